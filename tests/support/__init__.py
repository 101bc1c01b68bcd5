"""The test suite's helpers, each once.

- `fake_api`: the loopback fake of the Messages API; `fake_context`, its server-side context
  management; `clearing`, the API's documented clearing rules written on their own (the oracle
  the fake applies, so the project's implementation is checked against a rule it does not share);
- `responders` and `sandbox`: what the fixtures of `tests/conftest.py` and some tests are made of;
- `kernels`: a started Jupyter kernel with the tests' environment;
- `claude_code_session`: realistic Claude Code sessions, written for replay's tests and benchmarks;
- `sweep_work` and `example_strategy`: modules other processes import by name (sweep workers;
  a strategy rebuilt from its dotted path).

The test run puts `tests/` on `sys.path` (`pythonpath` in pyproject.toml), and so does a test
kernel's `PYTHONPATH` (`kernels.kernel_env`), so `support` imports the same way in the tests, in
the processes they start, and in the benchmarks (which add `tests/` themselves).
"""
