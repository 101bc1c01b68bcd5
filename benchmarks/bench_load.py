"""Wall time of `%load_ext evo_magic` in fresh processes, beside a bare shell's.

Each run starts a new interpreter with a real InteractiveShell, so nothing is cached in memory;
the first figure is the time of the `load_ext` call alone, and the process also reports whether
the anthropic SDK or pandas were imported (they must not be). The yardstick is not ours: the
whole `ipython -c` process with `%load_ext evo_magic` against the same with nothing to do, run
in turns (the target is their ratio, measured in this run). Both run as an install does, with
the package's bytecode compiled (`benchmarks.bytecode`) and one warm-up run each.

    python benchmarks/bench_load.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from benchmarks.bytecode import compiled

RUNS = 7
SHELL_RATIO = 2.0
"""`ipython -c '%load_ext evo_magic'` at most this many times a bare `ipython -c`."""
PROBE = """
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
start = time.perf_counter()
shell.run_line_magic("load_ext", "evo_magic")
elapsed = time.perf_counter() - start
heavy = [m for m in ("anthropic", "pandas", "ipywidgets") if m in sys.modules]
print(json.dumps({"seconds": elapsed, "heavy": heavy}))
"""


def measure(runs: int = RUNS) -> tuple[list[float], list[str]]:
    times, heavy = [], set()
    compiled()
    subprocess.run([sys.executable, "-c", PROBE], capture_output=True, check=True)
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
        ).stdout
        record = json.loads(out.strip().splitlines()[-1])
        times.append(record["seconds"])
        heavy.update(record["heavy"])
    return times, sorted(heavy)


def shell_processes(runs: int = RUNS) -> tuple[float, float]:
    """Median wall seconds of `ipython -c` doing nothing, and loading the extension."""
    bare, loaded = [], []
    compiled()
    for command in ("pass", "%load_ext evo_magic"):  # warm-up: files read once before timing
        _shell(command)
    for _ in range(runs):
        for command, times in (("pass", bare), ("%load_ext evo_magic", loaded)):
            times.append(_shell(command))
    return statistics.median(bare), statistics.median(loaded)


def _shell(command: str) -> float:
    """Wall seconds of one `ipython -c command` process."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "IPython", "-c", command], capture_output=True, check=True
    )
    return time.perf_counter() - started


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def main() -> list[dict]:
    times, heavy = measure()
    median = statistics.median(times)
    bare, loaded = shell_processes()
    ratio = loaded / bare
    call = _row("%load_ext evo_magic, the call alone (fresh process)", median, "s", None, None)
    call["note"] = f"{RUNS} runs; heavy modules imported: {', '.join(heavy) or 'none'}"
    return [
        call,
        _row("heavy modules imported by %load_ext", len(heavy), "modules", "0", not heavy),
        _row("ipython -c, bare shell process", bare, "s", None, None),
        _row("ipython -c '%load_ext evo_magic' process", loaded, "s", None, None),
        _row(
            "%load_ext process vs bare shell process",
            ratio,
            "ratio",
            f"<= {SHELL_RATIO:g}",
            ratio <= SHELL_RATIO,
        ),
    ]


if __name__ == "__main__":
    for row in main():
        print(
            f"{row['figure']}: median {row['median']:.4f} {row['unit']} "
            f"(target {row['target']}, met: {row['met']})"
        )
