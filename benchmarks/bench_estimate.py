"""Benchmark: replay's per-call token estimate against what each real call counted.

Every real Claude Code and Codex file of `tests/fixtures/real` is loaded and replayed under
"recorded"; per file, the 90th percentile over its calls of |estimated_tokens -
recorded_tokens| / recorded_tokens (the fit alone, from the rebuilt characters). Per format, the
worst file's figure. Codex is measured on its unredacted real turns; the other real rollout was
published with its texts and encrypted reasoning replaced by length markers: its figure, on a
row of its own, says nothing of the estimate (a note says so).

    python -m benchmarks.bench_estimate
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from evo_magic import load_transcripts, replay

REAL = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "real"
FORMATS = {
    "claude_code": "claude-code-*/*.jsonl",
    "codex": "codex-unredacted-turn*/*.jsonl",
    "codex (redacted)": "codex-0.104/*.jsonl",
}
TARGET = 0.05
REDACTED = "a rollout published with every text redacted to a length marker"


def p90(calls: pd.DataFrame) -> float:
    """The 90th percentile of the per-call relative error over the calls with both counts."""
    both = calls[calls["recorded_tokens"].notna() & calls["estimated_tokens"].notna()]
    recorded = both["recorded_tokens"].astype(float)
    return float(
        ((both["estimated_tokens"].astype(float) - recorded).abs() / recorded).quantile(0.9)
    )


def per_file(pattern: str) -> dict[str, float]:
    found = {}
    for path in sorted(REAL.glob(pattern)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # partial usage and the like: said elsewhere
            calls = replay(load_transcripts(path), {"recorded": "recorded"}).calls
        short = path.stem[-8:] if path.stem.startswith("rollout") else path.stem[:8]
        found[f"{path.parent.name}/{short}"] = p90(calls)
    return found


def main() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for source, pattern in FORMATS.items():
        figures = per_file(pattern)
        redacted = "redacted" in source
        worst = max(figures, key=figures.__getitem__)
        row = {
            "figure": f"replay estimate p90 per call, {source}: worst of {len(figures)} "
            f"real file{'s' if len(figures) > 1 else ''}",
            "median": figures[worst] * 100,
            "unit": "%",
            "target": None if redacted else f"<= {TARGET:.0%}",
            "met": None if redacted else figures[worst] <= TARGET,
            "note": f"{worst}" + (f"; {REDACTED}" if redacted else ""),
        }
        rows.append(row)
    return rows


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<70} {row['median']:>8.1f} {row['unit']}  {row['note']}")
