"""Run every benchmark of the project and print one table.

    python -m benchmarks.run                                # from the repository root
    python -m benchmarks.run --markdown docs/benchmarks.md  # also write the docs' page

The page that `--markdown` writes is the one place benchmark numbers are kept (the README links
to it rather than repeating them).

Each `benchmarks/bench_*.py` module has a `main()` returning rows
{"figure", "median", "unit", "target", "met"} (plus an optional "note"). Figures are medians of
repeated runs measured side by side in this one process; these machines are noisy, so compare
ratios rather than absolute times across machines.
"""

from __future__ import annotations

import argparse
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
    "bench_percall",
    "bench_meter_widget",
    "bench_strategies",
    "bench_transcripts",
    "bench_tools",
    "bench_prompt_cache",
    "bench_caching",
    "bench_replay",
    "bench_retention",
    "bench_lake",
    "bench_experiment",
    "bench_formats",
    "bench_folders",
    "bench_behaviour",
    "bench_estimate",
    "bench_scale",
    "bench_scale_analyses",
)


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def format_value(value: float, unit: str) -> str:
    if unit in ("%", "x"):
        return f"{value:.1f}{unit}"
    if isinstance(value, float) and value < 10:
        return f"{value:.4g} {unit}"
    return f"{value:,.0f} {unit}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--markdown", metavar="PATH", help="also write the table as a page")
    options = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    rows: list[dict] = []
    for name in MODULES:
        started = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        rows += module.main()
        print(f"[{name}: {time.perf_counter() - started:.1f} s]", file=sys.stderr)
    heading = f"evo_magic benchmarks · {time.strftime('%Y-%m-%d')} · {machine()}"
    print(text_table(rows, heading))
    if options.markdown:
        Path(options.markdown).write_text(markdown_page(rows, heading), encoding="utf-8")
    return 0 if all(row["met"] for row in rows if has_target(row)) else 1


def cells(row: dict) -> tuple[str, str, str, str]:
    """A row's figure, median, target and whether it was met, as the tables show them."""
    met = ("yes" if row["met"] else "NO") if has_target(row) else "-"
    target = str(row["target"]) if has_target(row) else "-"
    return row["figure"], format_value(row["median"], row["unit"]), target, met


def text_table(rows: list[dict], heading: str) -> str:
    """The table as the terminal shows it."""
    width = max(len(row["figure"]) for row in rows)
    lines = [heading, f"{'figure':<{width}}  {'median':>14}  {'target':>12}  met"]
    for row in rows:
        figure, value, target, met = cells(row)
        lines.append(f"{figure:<{width}}  {value:>14}  {target:>12}  {met}")
    return "\n".join(lines)


def markdown_page(rows: list[dict], heading: str) -> str:
    """The docs' benchmark page: how it was made, then every row (a row's note below it)."""
    lines = [
        "# Benchmarks",
        "",
        "<!-- made by `python -m benchmarks.run --markdown docs/benchmarks.md`; do not edit -->",
        "",
        f"{heading}. Medians of repeated runs measured side by side in one process; these",
        "machines are noisy, so compare the ratios. Rows without a target are context for the",
        "others. Run it again with the command above: this page is where the numbers live.",
        "",
        "| figure | median | target | met |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        shown = [cell.replace("|", "\\|") for cell in cells(row)]
        lines.append("| " + " | ".join(shown) + " |")
    notes = [f"- **{row['figure']}**: {row['note']}" for row in rows if row.get("note")]
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def has_target(row: dict) -> bool:
    """Rows without a target are context for the others (sizes, baselines, breakdowns)."""
    return row["target"] not in (None, "", "-")


if __name__ == "__main__":
    raise SystemExit(main())
