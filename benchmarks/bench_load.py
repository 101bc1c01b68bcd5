"""Wall time of `%load_ext evo_magic` in fresh processes (target: under 0.3 s).

Each run starts a new interpreter with a real InteractiveShell, so nothing is cached in memory;
the figure is the time of the `load_ext` call alone, and the process also reports whether the
anthropic SDK or pandas were imported (they must not be).

    python benchmarks/bench_load.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

RUNS = 7
TARGET_SECONDS = 0.3
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
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
        ).stdout
        record = json.loads(out.strip().splitlines()[-1])
        times.append(record["seconds"])
        heavy.update(record["heavy"])
    return times, sorted(heavy)


def main() -> list[dict]:
    times, heavy = measure()
    median = statistics.median(times)
    return [
        {
            "figure": "%load_ext evo_magic (fresh process)",
            "median": median,
            "unit": "s",
            "target": f"< {TARGET_SECONDS}",
            "met": median < TARGET_SECONDS and not heavy,
            "note": f"{RUNS} runs; heavy modules imported: {', '.join(heavy) or 'none'}",
        }
    ]


if __name__ == "__main__":
    for row in main():
        print(
            f"{row['figure']}: median {row['median']:.4f} {row['unit']} "
            f"(target {row['target']}, met: {row['met']}; {row['note']})"
        )
