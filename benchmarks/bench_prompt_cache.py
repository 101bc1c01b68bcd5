"""Benchmark: what prompt caching adds to a model call, and how fast the cache model replays.

1. `place_breakpoints` per call on agent histories of 200, 2,000 and 20,000 messages, next to
   encoding the same messages as JSON (which the SDK does for every request anyway).
2. `PrefixCache.call` per call in its worst case: 4 breakpoints, each missing and walking its
   full 20-block lookback.
3. `cache_request` (the O(prompt) conversion used for offline replay) on 2,000 messages: context.

    python -m benchmarks.bench_prompt_cache            # prints a table

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from evo_magic.prompt_cache import (
    Breakpoint,
    CacheRequest,
    PrefixCache,
    cache_request,
    place_breakpoints,
)

SIZES = (200, 2_000, 20_000)
PLACE_US_TARGET = 1_000.0  # at 20,000 messages
SHARE_TARGET = 1.0  # % of the JSON encoding of the same messages
CALL_US_TARGET = 50.0
SYSTEM = "You are a careful notebook agent. " * 120
TOOLS = [{"name": "bash", "description": "Run a command.", "input_schema": {"type": "object"}}]


def history(size: int) -> list[dict]:
    """An agent loop's history: a request, then tool calls and their results."""
    messages: list[dict] = [{"role": "user", "content": "Survey the project."}]
    turn = 0
    while len(messages) < size:
        tool_id = f"toolu_{turn}"
        call = {"type": "tool_use", "id": tool_id, "name": "bash", "input": {"command": "ls"}}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "Next."}, call]})
        output = {"type": "tool_result", "tool_use_id": tool_id, "content": "line\n" * 40}
        messages.append({"role": "user", "content": [output]})
        turn += 1
    return messages


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def placement_rows() -> list[dict]:
    rows = []
    for size in SIZES:
        messages = history(size)
        placed = median_seconds(
            lambda m=messages: place_breakpoints(m, system=SYSTEM, tools=TOOLS), 301
        )
        encoded = median_seconds(lambda m=messages: json.dumps(m), 21)
        share = 100 * placed / encoded
        last = size == SIZES[-1]
        rows.append(
            {
                "figure": f"place_breakpoints, {size:,} messages",
                "median": placed * 1e6,
                "unit": "us",
                "target": f"<= {PLACE_US_TARGET:,.0f} us" if last else "-",
                "met": placed * 1e6 <= PLACE_US_TARGET,
            }
        )
        rows.append(
            {
                "figure": f"  as a share of JSON-encoding them ({encoded * 1e3:.1f} ms)",
                "median": share,
                "unit": "%",
                "target": f"<= {SHARE_TARGET}%" if last else "-",
                "met": share <= SHARE_TARGET,
            }
        )
    return rows


def simulator_row(calls: int = 20_000) -> dict:
    window = 19
    requests = [
        CacheRequest(
            10.0 * n,
            5_000,
            tuple(
                Breakpoint(
                    1_000 * (k + 1),
                    (n, k),
                    lookback=tuple((1_000 * k + j, (n, k, j)) for j in range(window)),
                )
                for k in range(4)
            ),
        )
        for n in range(calls)
    ]
    cache = PrefixCache()
    started = time.perf_counter()
    for request in requests:
        cache.call(request)
    per_call = (time.perf_counter() - started) / calls * 1e6
    return {
        "figure": "PrefixCache.call, 4 breakpoints missing over a full lookback",
        "median": per_call,
        "unit": "us",
        "target": f"<= {CALL_US_TARGET:.0f} us",
        "met": per_call <= CALL_US_TARGET,
    }


def conversion_row() -> dict:
    params = place_breakpoints(history(2_000), system=SYSTEM, tools=TOOLS).params
    seconds = median_seconds(lambda: cache_request(params, time=0.0), 7)
    return {
        "figure": "cache_request (offline replay), 2,000 messages",
        "median": seconds * 1e3,
        "unit": "ms",
        "target": "-",
        "met": True,
    }


def main() -> list[dict]:
    return [*placement_rows(), simulator_row(), conversion_row()]


if __name__ == "__main__":
    for row in main():
        target = row["target"]
        met = ("yes" if row["met"] else "NO") if target != "-" else "-"
        print(f"{row['figure']:<60} {row['median']:>10.1f} {row['unit']:<3} {target:>12} {met}")
