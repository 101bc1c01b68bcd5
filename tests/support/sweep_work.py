"""Work functions for the sweep tests: importable by worker processes (local and Dask)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd


def square(payload: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """A pure function of its payload; writes a mark per run so tests can count the runs."""
    n = payload["n"]
    if "runs" in payload:
        Path(payload["runs"], f"{n}-{os.getpid()}-{os.urandom(4).hex()}").touch()
    if n in payload.get("fail", ()):
        raise ValueError(f"session {n} is broken")
    if n == payload.get("interrupt"):
        raise KeyboardInterrupt
    return {
        "rows": pd.DataFrame({"n": [n] * (n % 3 + 1), "square": [n * n] * (n % 3 + 1)}),
        "one": pd.DataFrame({"n": [n]}),
    }


def die_once(payload: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Kills its worker process the first time it runs (a worker that dies mid-sweep)."""
    mark = Path(payload["mark"])
    if payload["n"] == 1 and not mark.exists():
        mark.touch()
        os._exit(1)
    return {"one": pd.DataFrame({"n": [payload["n"]]})}


def reader(request: Any, *, out: str | None = None, stop_after: int = 0) -> dict[str, Any]:
    """A reader that answers a probe from the context it is given (a module-level function,
    so a FunctionModel of it pickles). With `out`, it is interrupted (KeyboardInterrupt, as a
    user's ^C) once `stop_after` sessions of the sweep under `out` are done, while the file
    `out`/stop exists."""
    from evo_magic.probe import answer_from_context, probe_question

    stopped = out is not None and Path(out, "stop").exists()
    if stopped and len(list(Path(out, "done").glob("*.json"))) >= stop_after:
        raise KeyboardInterrupt
    question = probe_question(request.messages) or ""
    reply = answer_from_context(request.messages, question)
    return {
        "content": [{"type": "text", "text": reply}],
        "usage": {"input_tokens": 100, "output_tokens": 5},
    }


def peek(payload: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """What code run in a worker finds: the variables whose value holds `payload["key"]` (in
    `os.environ` and in the process's initial environment) and the scheduler's address."""
    from distributed import get_worker

    key = payload["key"]
    named = [name for name, value in os.environ.items() if key in value]
    environ = Path("/proc/self/environ")
    initial = environ.read_bytes() if environ.exists() else b""
    return {
        "seen": pd.DataFrame(
            {
                "n": [payload["n"]],
                "named": [",".join(named)],
                "in_initial": [key.encode() in initial],
                "scheduler": [get_worker().scheduler.address],
            }
        )
    }
