"""Benchmark: model-free retention of a long Claude Code session, beside replay alone.

The session of bench_replay (about 1,000 model calls) is loaded once; 300 facts extracted from it
(spread over the session, every kind) are followed under the same six strategy settings as
replay's benchmark. Retention runs in replay's own pass, so the figure to read is what it adds
to replay alone. Medians of a few runs, in seconds.

    python -m benchmarks.bench_retention
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

from benchmarks.bench_replay import CALLS, SWEEP  # noqa: E402
from evo_magic import Fact, load_transcripts, replay, retention  # noqa: E402

RUNS = 3
FACTS = 300
TARGET_SECONDS = 10.0


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def _facts(t: Any) -> list[Fact]:
    """`FACTS` of the session's extracted facts, evenly spread over all of them."""
    found = retention(t, {"none": []}).facts
    step = max(len(found) / FACTS, 1.0)
    rows = [found.iloc[int(i * step)] for i in range(min(FACTS, len(found)))]
    return [Fact(str(row["text"]), kind=str(row["kind"])) for row in rows]


def main(runs: int = RUNS) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        t = load_transcripts(write_session(Path(tmp), calls=CALLS))
        facts = _facts(t)
        alone, measured = [], []
        for _ in range(runs):
            started = time.perf_counter()
            replayed = replay(t, SWEEP, model="claude-sonnet-4-5")
            alone.append(time.perf_counter() - started)
            started = time.perf_counter()
            result = retention(t, SWEEP, facts=facts, model="claude-sonnet-4-5")
            measured.append(time.perf_counter() - started)
    calls = int(replayed.totals["calls"].iloc[0])
    kept = result.totals[result.totals["kind"] == "all"].set_index("strategy")["kept_share"]
    median = statistics.median(measured)
    base = statistics.median(alone)
    return [
        _row(f"replay alone, {calls:,} calls, {len(SWEEP)} strategies", base, "s", None, None),
        _row(
            f"retention of {len(facts)} facts, same session and strategies",
            median,
            "s",
            f"< {TARGET_SECONDS:g}",
            median < TARGET_SECONDS,
        ),
        _row("  added to replay", 100 * (median - base) / base, "%", None, None),
        _row("  kept share under masking-10", 100 * float(kept["masking-10"]), "%", None, None),
    ]


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<60} {row['median']:>10,.3f} {row['unit']}")
