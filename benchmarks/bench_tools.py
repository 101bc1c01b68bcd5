"""Benchmark: what the bash sandbox, the guard, descriptor-relative file opening and the
redactor cost.

Side by side in one process: a trivial bash command unsandboxed and in bubblewrap (with the
default bounds: a pids cgroup where one can be made, the shell's limits, sized RAM disks, the
workspace searched for files holding a key), the guard on a typical command, read_file of a small
file with openat2 and with the portable walk, and redaction of a tool output that holds no
credential while many are known.

    python benchmarks/bench_tools.py

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import secrets
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from evo_magic.secrets import redact
from evo_magic.tools import ToolContext, default_tools, run_tool
from evo_magic.tools import paths as paths_module
from evo_magic.tools.guard import refusal_reason
from evo_magic.tools.sandbox import sandbox_status, workspace_secrets

BASH_RUNS = 40
FAST_RUNS = 2000
SANDBOX_OVERHEAD_MS = 50.0
GUARD_US = 1000.0
REDACT_MS = 10.0
REDACT_KEYS = 40
OUTPUT = "an ordinary tool output line, 0123456789 abcdef\n" * 1_000
COMMAND = "cd src && git status --short | grep -v '^??' ; echo \"done: $(date)\" > log.txt"


def median_of(function: Callable[[], object], runs: int) -> float:
    """Median seconds of `function` over `runs` calls (after one warm-up call)."""
    function()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bash_medians(workspace: Path) -> tuple[float, float | None]:
    """Medians of `true` through the bash tool: unsandboxed, and sandboxed when possible."""
    tools = default_tools()

    def runner(mode: str) -> Callable[[], object]:
        ctx = ToolContext(workspace=workspace, sandbox=mode)  # type: ignore[arg-type]
        return lambda: run_tool(tools, "t", "bash", {"command": "true"}, ctx)

    plain = median_of(runner("off"), BASH_RUNS)
    boxed = median_of(runner("require"), BASH_RUNS) if sandbox_status().available else None
    return plain, boxed


def read_medians(workspace: Path) -> tuple[float, float]:
    """Medians of read_file on a small file: openat2, then the O_NOFOLLOW walk."""
    (workspace / "src").mkdir(exist_ok=True)
    (workspace / "src" / "a.py").write_text("x = 1\n" * 50)
    tools = default_tools()
    ctx = ToolContext(workspace=workspace)

    def read() -> object:
        return run_tool(tools, "t", "read_file", {"path": "src/a.py"}, ctx)

    with_openat2 = median_of(read, FAST_RUNS)
    saved = paths_module._OPENAT2.usable
    paths_module._OPENAT2.usable = False  # force the portable walk for the comparison
    try:
        walk = median_of(read, FAST_RUNS)
    finally:
        paths_module._OPENAT2.usable = saved
    return with_openat2, walk


def search_median(root: Path) -> float:
    """Median seconds to search a workspace of 100 folders of 100 files (the search's cap of
    entries) for files holding a key, as every sandboxed command does."""
    for folder in range(100):
        (root / f"d{folder}").mkdir()
        for name in range(99):
            (root / f"d{folder}" / f"f{name}.py").write_text("x = 1\n")
        (root / f"d{folder}" / "notes.ipynb").write_text('{"cells": []}' * 100)
    key = f"sk-ant-api03-{secrets.token_urlsafe(70)}"
    return median_of(lambda: workspace_secrets(root, [key]), 10)


def redact_median() -> float:
    """Median seconds to redact a 48,000-character output holding none of REDACT_KEYS keys."""
    keys = [f"sk-ant-api03-{secrets.token_urlsafe(70)}" for _ in range(REDACT_KEYS)]
    return median_of(lambda: redact(OUTPUT, keys), 50)


def main() -> list[dict]:
    with tempfile.TemporaryDirectory() as directory:
        workspace = Path(directory)
        plain, boxed = bash_medians(workspace)
        guard = median_of(lambda: refusal_reason(COMMAND, cwd=directory), FAST_RUNS)
        with_openat2, walk = read_medians(workspace)
    redacting = redact_median()
    with tempfile.TemporaryDirectory() as directory:
        searching = search_median(Path(directory))
    rows = [
        {"figure": "bash `true`, unsandboxed", "median": plain * 1e3, "unit": "ms", "target": "-"},
    ]
    if boxed is not None:
        overhead = (boxed - plain) * 1e3
        rows += [
            {"figure": "bash `true`, in bubblewrap", "median": boxed * 1e3, "unit": "ms"},
            {
                "figure": "sandbox overhead per command",
                "median": overhead,
                "unit": "ms",
                "target": f"< {SANDBOX_OVERHEAD_MS:g}",
                "met": overhead < SANDBOX_OVERHEAD_MS,
            },
        ]
    else:
        rows.append(
            {"figure": f"sandbox not measured: {sandbox_status().reason}", "median": 0, "unit": ""}
        )
    rows += [
        {
            "figure": "guard (parse + check) per command",
            "median": guard * 1e6,
            "unit": "us",
            "target": f"< {GUARD_US:,.0f}",
            "met": guard * 1e6 < GUARD_US,
        },
        {"figure": "read_file small file, openat2", "median": with_openat2 * 1e6, "unit": "us"},
        {"figure": "read_file small file, O_NOFOLLOW walk", "median": walk * 1e6, "unit": "us"},
        {
            "figure": "search a workspace of 10,000 files for files holding a key",
            "median": searching * 1e3,
            "unit": "ms",
        },
        {
            "figure": f"redact {len(OUTPUT):,} characters, {REDACT_KEYS} keys known, none in it",
            "median": redacting * 1e3,
            "unit": "ms",
            "target": f"< {REDACT_MS:g}",
            "met": redacting * 1e3 < REDACT_MS,
        },
    ]
    for row in rows:
        row.setdefault("target", "-")
        row.setdefault("met", True)
    return rows


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']}: median {row['median']:.4g} {row['unit']} (target {row['target']})")
