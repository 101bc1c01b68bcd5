"""Benchmark: the rest of the per-call path at 200 and 20,000 messages, before and after, side by
side in one run (each pair timed in turns, so a burst of load hits both alike).

1. The Anthropic adapter's request build (`request_params`: breakpoints placed, a turn note
   after them) over a snapshot of the history, against the list-copying build it replaced
   (`place_breakpoints(..., copy=True)` and the note appended to a new list).
2. `MicroCompact` run before every call outside a session through `Context.for_messages`, its
   memo kept between calls, against a new context per call (a scan of every tool result).
3. The live meter's refresh (the data, the HTML and the widget's state) with what earlier
   refreshes built kept, against a rendering anew, at 100, 1,000 and 10,000 calls (some 200,
   2,000 and 20,000 messages; from 160 calls on the chart draws all its columns).

    python -m benchmarks.bench_percall

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from evo_magic.compact.base import Context
from evo_magic.events import ContextSize
from evo_magic.history import History
from evo_magic.meter.chart import ChartCache
from evo_magic.meter.data import MeterData
from evo_magic.meter.html import meter_html
from evo_magic.meter.log import CallPoint, Compaction, MeterLog
from evo_magic.meter.state import StateCache, state_of
from evo_magic.meter.tally import Tally
from evo_magic.models.anthropic import request_params
from evo_magic.models.base import ModelRequest, system_note
from evo_magic.prompt_cache import CacheSettings, place_breakpoints
from evo_magic.strategies import MicroCompact

SMALL, PLATEAU, LARGE = 200, 2_000, 20_000
CALLS = {SMALL: 100, PLATEAU: 1_000, LARGE: 10_000}
"""Model calls of a session of that many messages (a call adds a reply and its results)."""
REPEATS = 41
RATIO_TARGET = 1.2
MODEL = "claude-opus-4-6"
NOTE = "Half the context window is used."


def step(n: int) -> list[dict[str, Any]]:
    """One model step: a reply calling a tool, and the tool's result (a few hundred chars)."""
    use = {"type": "tool_use", "id": f"toolu_{n:07d}", "name": "read_file",
           "input": {"path": f"src/m{n % 40}.py"}}  # fmt: skip
    reply = {"role": "assistant", "content": [{"type": "text", "text": f"Step {n}."}, use]}
    result = {"type": "tool_result", "tool_use_id": use["id"], "content": f"line {n}\n" * 40}
    return [reply, {"role": "user", "content": [result]}]


def grown(size: int) -> list[dict[str, Any]]:
    messages = [{"role": "user", "content": [{"type": "text", "text": "Read every module."}]}]
    n = 0
    while len(messages) < size:
        n += 1
        messages += step(n)
    return messages


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def timed(
    *paths: Callable[[], object], repeats: int = REPEATS, number: int = 1
) -> list[list[float]]:
    """Seconds per run of each path (the mean of `number` runs in a row), the paths taking
    turns sample by sample: a burst of load hits them alike, and a few microseconds' path is
    timed over runs in a row, not just after the other path left the CPU caches cold."""
    times: list[list[float]] = [[] for _ in paths]
    for _ in range(repeats):
        for i, path in enumerate(paths):
            started = time.perf_counter()
            for _ in range(number):
                path()
            times[i].append((time.perf_counter() - started) / number)
    return times


# -- 1. the request build ------------------------------------------------------------------


def request_times(size: int) -> tuple[float, float]:
    history = History(lambda event: None)
    for message in grown(size):
        history.append(message)
    sent = history.snapshot()
    request = ModelRequest(
        messages=sent, max_tokens=64, system="Be brief.", cache=CacheSettings(),
        turn_note=NOTE, betas=("mid-conversation-system-clear-at-2026-08-21",),
    )  # fmt: skip

    def copied() -> object:  # the build before: the list copied, then again for the note
        params = place_breakpoints(sent, system="Be brief.", model=MODEL).params
        return {**params, "messages": [*params["messages"], system_note(NOTE)]}

    after, before = timed(lambda: request_params(request, MODEL), copied, number=50)
    return median_us(after), median_us(before)


# -- 2. a strategy outside a session -------------------------------------------------------


def outside_times(size: int) -> tuple[float, float]:
    strategy = MicroCompact(cache_aware=False)
    runs: dict[str, list[float]] = {"kept": [], "fresh": []}
    for path in runs:
        memo: dict[str, Any] = {}
        messages = grown(size)
        for n in range(REPEATS + 5):
            messages += step(10**6 + n)
            started = time.perf_counter()
            ctx = Context.for_messages(messages, memo=memo if path == "kept" else None)
            result = strategy.compact(messages, ctx)
            if n >= 5:  # the first runs index the list (once, when the memo is new)
                runs[path].append(time.perf_counter() - started)
            for index, message in getattr(result, "changes", {}).items():
                messages[index] = message  # the edit applied in place, as a caller keeps its list
    return median_us(runs["kept"]), median_us(runs["fresh"])


# -- 3. the live meter's refresh -----------------------------------------------------------


def meter_call(log: MeterLog, n: int) -> None:
    """A call as the log folds it; a micro-compaction before every other call."""
    size = ContextSize(2 * n, 1_000 + 90 * n, 250 + 22 * n)
    log.calls.append(CallPoint(n, n // 10 + 1, size, size, None, 0.001, ("tool results",)))
    if n % 2:
        log.compactions.append(
            Compaction(0, True, "micro", "micro", "every_call", None, size, size, True, n,
                       n // 10 + 1, cleared=("read_file",))
        )  # fmt: skip


def meter_times(calls: int) -> tuple[float, float]:
    log = MeterLog()
    for n in range(1, calls + 1):
        meter_call(log, n)
    tally, states, chart = Tally(), StateCache(), ChartCache()
    count = [calls]
    now = ContextSize(9, 10**6, 10**5)

    def refresh(live: bool) -> None:
        count[0] += 1
        meter_call(log, count[0])  # a call since the last refresh
        kept = tally if live else None
        data = MeterData.of(log, log.whole(), "s", 10**9, None, now, tally=kept)
        meter_html(data, chart if live else None)
        state_of(data, states if live else None)

    refresh(True)
    after, before = timed(lambda: refresh(True), lambda: refresh(False), repeats=21)
    return median_us(after), median_us(before)


def _row(figure: str, median: float, unit: str, target: str | None, met: bool | None) -> dict:
    return {"figure": figure, "median": median, "unit": unit, "target": target, "met": met}


def _rows(name: str, small: tuple[float, float], large: tuple[float, float]) -> list[dict]:
    ratio, old = large[0] / small[0], large[1] / small[1]
    target = f"<= {RATIO_TARGET:g}"
    return [
        _row(f"{name}, {SMALL} messages", small[0], "us", None, None),
        _row(f"{name}, {LARGE:,} messages", large[0], "us", None, None),
        _row(f"{name}, {LARGE:,} vs {SMALL} messages", ratio, "ratio", target, ratio <= 1.2),
        _row(f"  before: {small[1]:,.0f} to {large[1]:,.0f} us", old, "ratio", None, None),
    ]


def main() -> list[dict[str, Any]]:
    rows = _rows("request build (adapter)", request_times(SMALL), request_times(LARGE))
    rows += _rows("MicroCompact outside a session", outside_times(SMALL), outside_times(LARGE))
    small, large = meter_times(CALLS[SMALL]), meter_times(CALLS[LARGE])
    rows += _rows("live meter refresh", small, large)
    # Past 160 calls the chart has all its columns and the list all its asks: what a refresh
    # draws stops growing, and so should its time.
    drawn = meter_times(CALLS[PLATEAU])
    ratio = large[0] / drawn[0]
    figure = f"live meter refresh, {LARGE:,} vs {PLATEAU:,} messages (all columns drawn)"
    return [*rows, _row(figure, ratio, "ratio", f"<= {RATIO_TARGET:g}", ratio <= RATIO_TARGET)]


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<55} {row['median']:>10,.3f} {row['unit']}")
