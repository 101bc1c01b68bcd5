"""The test suite's helpers, each once: the loopback fake of the Messages API (`fake_api`, its
server-side context management `fake_context`, the documented clearing rules `clearing`), the
responders and environments the fixtures of `tests/conftest.py` are made of, a started Jupyter
kernel (`kernels`), and the modules that other processes import by name (`sweep_work` for sweep
workers, `example_strategy` for strategies rebuilt from a dotted path).

The test run puts `tests/` on `sys.path` (`pythonpath` in pyproject.toml), and a test kernel's
`PYTHONPATH` (`kernels.kernel_env`), so `support` imports the same way in the tests, in the
processes they start, and in the benchmarks (which add `tests/` themselves).
"""
