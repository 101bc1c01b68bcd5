"""Benchmark: the agent loop's own overhead per model call, at 200 and 20,000 messages.

One session on a `FunctionModel` (no network: the model answers at once) that calls a tool
doing nothing, over and over, while the history grows; the time from one model call to the
next is everything the loop does per call: append the reply, run the tool, record the result
in the transcript (on disk), run the compaction strategies, measure, build the next request.
Its median near 200 messages and near 20,000 messages, measured in the same session; then the
same with Python's cyclic garbage collector paused, which tells the loop's own work from the
collector's (a full collection walks every object alive, so it costs more as the history
grows: a cost any Python program holding that many objects pays).

    python -m benchmarks.bench_loop
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from evo_magic.compact.policy import CompactPolicy
from evo_magic.models import FunctionModel, ModelRequest
from evo_magic.session import Session
from evo_magic.tools import Tool

SMALL, LARGE = 200, 20_000
CALLS = 60
RATIO_TARGET = 1.2
OUTPUT = "line of tool output that the agent reads and then forgets about\n" * 8

NOOP = Tool(
    name="noop",
    description="Does nothing and returns a few lines.",
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    run=lambda tool_input, ctx: OUTPUT,
)


def per_call_times(collect: bool = True) -> dict[int, list[float]]:
    """Seconds between consecutive model calls, for calls made near SMALL and LARGE messages
    (with the cyclic garbage collector paused when not `collect`)."""
    was_enabled = gc.isenabled()
    if not collect:
        gc.disable()
    try:
        return _times()
    finally:
        if was_enabled:
            gc.enable()


def _times() -> dict[int, list[float]]:
    stamps: list[tuple[int, float]] = []

    def model(request: ModelRequest) -> list[dict[str, Any]]:
        stamps.append((len(request.messages), time.perf_counter()))
        if len(request.messages) >= LARGE + 2 * CALLS:
            return [{"type": "text", "text": "done"}]
        n = len(stamps)
        return [
            {"type": "text", "text": f"Step {n}: calling the tool."},
            {"type": "tool_use", "id": f"toolu_{n:07d}", "name": "noop", "input": {"n": n}},
        ]

    with tempfile.TemporaryDirectory() as tmp:
        policy = CompactPolicy(context_limit=10**12)  # never over the limit: per-call work only
        session = Session(
            Path(tmp), model=FunctionModel(model), tools=[NOOP], policy=policy, max_turns=10**6
        )
        with session:
            session.ask("Call the tool until the history is long.")
    times: dict[int, list[float]] = {SMALL: [], LARGE: []}
    for (size, started), (_, ended) in zip(stamps, stamps[1:], strict=False):
        for target in times:
            if target <= size < target + 2 * CALLS:
                times[target].append(ended - started)
    return times


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def main() -> list[dict[str, Any]]:
    times = per_call_times()
    small, large = (statistics.median(times[n]) * 1e6 for n in (SMALL, LARGE))
    ratio = large / small
    paused = per_call_times(collect=False)
    own_small, own_large = (statistics.median(paused[n]) * 1e6 for n in (SMALL, LARGE))
    return [
        _row(f"loop overhead per call, {SMALL} messages", small, "us", None, None),
        _row(f"loop overhead per call, {LARGE:,} messages", large, "us", None, None),
        _row(
            f"loop overhead, {LARGE:,} vs {SMALL} messages",
            ratio,
            "ratio",
            f"<= {RATIO_TARGET:g}",
            ratio <= RATIO_TARGET,
        ),
        _row(
            f"  the same, garbage collector paused ({own_small:,.0f} to {own_large:,.0f} us)",
            own_large / own_small,
            "ratio",
            None,
            None,
        ),
    ]


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<45} {row['median']:>10,.3f} {row['unit']}")
