"""Run every benchmark of the project and print one table.

    python -m benchmarks.run            # from the repository root

Each `benchmarks/bench_*.py` module has a `main()` returning rows
{"figure", "median", "unit", "target", "met"} (plus an optional "note"). Figures are medians of
repeated runs measured side by side in this one process; these machines are noisy, so compare
ratios rather than absolute times across machines.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import time
from pathlib import Path

MODULES = (
    "bench_load",
    "bench_compaction",
    "bench_loop",
    "bench_transcripts",
    "bench_tools",
    "bench_prompt_cache",
    "bench_caching",
    "bench_replay",
    "bench_retention",
    "bench_lake",
)


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def format_value(value: float, unit: str) -> str:
    if unit in ("%", "x"):
        return f"{value:.1f}{unit}"
    if isinstance(value, float) and value < 10:
        return f"{value:.4g} {unit}"
    return f"{value:,.0f} {unit}"


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    rows: list[dict] = []
    for name in MODULES:
        started = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        rows += module.main()
        print(f"[{name}: {time.perf_counter() - started:.1f} s]", file=sys.stderr)
    width = max(len(row["figure"]) for row in rows)
    print(f"evo_magic benchmarks · {time.strftime('%Y-%m-%d')} · {machine()}")
    print(f"{'figure':<{width}}  {'median':>14}  {'target':>12}  met")
    targeted = [row for row in rows if has_target(row)]
    for row in rows:
        value = format_value(row["median"], row["unit"])
        met = ("yes" if row["met"] else "NO") if has_target(row) else "-"
        target = row["target"] if has_target(row) else "-"
        print(f"{row['figure']:<{width}}  {value:>14}  {target!s:>12}  {met}")
    return 0 if all(row["met"] for row in targeted) else 1


def has_target(row: dict) -> bool:
    """Rows without a target are context for the others (sizes, baselines, breakdowns)."""
    return row["target"] not in (None, "", "-")


if __name__ == "__main__":
    raise SystemExit(main())
