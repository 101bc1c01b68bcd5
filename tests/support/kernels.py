"""Real Jupyter kernels for the tests: the environment a test kernel starts with (no Anthropic
settings of the machine it runs on, the tests' helpers importable, then what the test gives),
and a started kernel with it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jupyter_client.blocking.client import BlockingKernelClient
    from jupyter_client.manager import KernelManager

TESTS = Path(__file__).resolve().parent.parent
"""The tests' folder: on a test kernel's PYTHONPATH, so `support` imports there too."""
READY_SECONDS = 60


def kernel_env(**extra: str) -> dict[str, str]:
    """This process's environment without any ANTHROPIC_ variable, `tests/` first on
    PYTHONPATH, then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


@contextlib.contextmanager
def kernel(workspace: Path, **env: str) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """A python3 ipykernel started in `workspace` with `kernel_env(**env)`, its client's
    channels open and the kernel ready; on exit the channels are closed and the kernel shut
    down at once, whatever the test did."""
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=str(workspace), env=kernel_env(**env))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=READY_SECONDS)
        yield manager, client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
