"""Benchmark: trace-driven replay of a long Claude Code session under six strategy settings.

A Claude Code session of about 1,000 model calls (written by the test suite's generator: tool
rounds, a compaction, a rewind, a subagent) is loaded once, then replayed under "recorded",
none, the seed pipeline, ClearToolUses, ObservationMasking and SummariseOlder, with the prompt
cache modelled. Medians of a few runs, in seconds.

    python -m benchmarks.bench_replay
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.claude_code_session import write_session  # noqa: E402

from evo_magic import load_transcripts, replay  # noqa: E402
from evo_magic.strategies import ClearToolUses, ObservationMasking, SummariseOlder  # noqa: E402

CALLS = 1_150  # model calls written; about 1,000 stay active (the rest are rewound)
RUNS = 3
TARGET_SECONDS = 30.0
SWEEP = {
    "recorded": "recorded",
    "none": [],
    "seed": None,
    "clear-3": [ClearToolUses(keep=3, trigger_tokens=40_000)],
    "masking-10": [ObservationMasking(10)],
    "older-20": [SummariseOlder(keep=20)],
}


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def main(runs: int = RUNS) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        project = write_session(Path(tmp), calls=CALLS)
        started = time.perf_counter()
        t = load_transcripts(project)
        loaded = time.perf_counter() - started
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            result = replay(t, SWEEP, model="claude-sonnet-4-5")
            times.append(time.perf_counter() - started)
    calls = int(result.totals["calls"].iloc[0])
    median = statistics.median(times)
    return [
        _row(f"Claude Code session of {calls:,} calls: load", loaded, "s", None, None),
        _row(
            f"replay of {calls:,} calls under {len(SWEEP)} strategies",
            median,
            "s",
            f"< {TARGET_SECONDS:g}",
            median < TARGET_SECONDS,
        ),
        _row("  per call and strategy", median / calls / len(SWEEP) * 1e3, "ms", None, None),
    ]


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<50} {row['median']:>10,.3f} {row['unit']}")
