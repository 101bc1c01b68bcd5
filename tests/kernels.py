"""The environment a test kernel starts with: no Anthropic settings of the machine it runs on,
the tests' helpers importable, then what the test gives."""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).parent


def kernel_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env
