"""Benchmark: the rest of the per-call path at 200 and 20,000 messages, before and after, side by
side in one run (each pair timed in turns, so a burst of load hits both alike).

1. The Anthropic adapter's request build (`request_params`: breakpoints placed, a turn note
   after them) over a snapshot of the history, against the list-copying build it replaced
   (`place_breakpoints(..., copy=True)` and the note appended to a new list).
2. `MicroCompact` run before every call outside a session through `Context.for_messages`, its
   memo kept between calls, against a new context per call (a scan of every tool result).
3. The live meter's refresh (the data, the HTML and the widget's state) after one more call,
   with what earlier refreshes built kept, against a rendering anew, at 100 and 10,000 calls
   (some 200 and 20,000 messages), the sizes in turns, one call per timed refresh. What a
   refresh draws depends on what the call does to the chart, so each change is also timed on
   its own at 1,000 and 10,000 calls (2,000 and 20,000 messages: both charts draw all their
   160 columns): a call into the newest column, a call that starts a column (the axis moves:
   every column drawn again) and a call that regroups the columns (every 160 calls). At 100
   calls every call starts a column.

    python -m benchmarks.bench_percall

`main()` returns the figures as rows ``{"figure", "median", "unit", "target", "met"}``.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.meter_calls import meter_call  # noqa: E402

from evo_magic.compact.base import Context
from evo_magic.events import ContextSize
from evo_magic.history import History
from evo_magic.meter.chart import MAX_COLUMNS, ChartCache
from evo_magic.meter.data import MeterData
from evo_magic.meter.html import meter_html
from evo_magic.meter.log import MeterLog
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


def columns_group(calls: int) -> int:
    """Calls per chart column in a session of `calls` calls (`evo_magic.meter.chart`)."""
    return max(math.ceil(calls / MAX_COLUMNS), 1)


def chart_change(call: int) -> str:
    """What call number `call` does to the chart when it joins: "regroup" (the calls per
    column grow: every column built again), "column" (it starts a column: the axis moves and
    every column is drawn again) or "grow" (it joins the newest column: that one is drawn)."""
    group = columns_group(call)
    if group != columns_group(call - 1):
        return "regroup"
    return "column" if (call - 1) % group == 0 else "grow"


class LiveMeter:
    """A live meter's log and what its refreshes keep, refreshed after every call."""

    def __init__(self, calls: int) -> None:
        self.log = MeterLog()
        for n in range(1, calls + 1):
            meter_call(self.log, n)
        self.tally, self.states, self.chart = Tally(), StateCache(), ChartCache()
        self.refresh()

    def refresh(self, live: bool = True) -> None:
        """The data, the HTML and the widget's state (`live`: with what earlier refreshes
        built; else anew)."""
        log, now = self.log, ContextSize(9, 10**6, 10**5)
        data = MeterData.of(
            log, log.whole(), "s", 10**9, None, now, tally=self.tally if live else None
        )
        meter_html(data, self.chart if live else None)
        state_of(data, self.states if live else None)

    def call(self) -> None:
        meter_call(self.log, len(self.log.calls) + 1)

    def until(self, change: str | None) -> None:
        """Calls joined and refreshed (untimed) until the next call makes `change` (None:
        whatever the next call makes)."""
        while change is not None and chart_change(len(self.log.calls) + 1) != change:
            self.call()
            self.refresh()


def meter_times(
    sizes: tuple[int, ...], change: str | None, repeats: int, live: bool = True
) -> list[float]:
    """Microseconds per refresh after one call joined, the call making `change` to the chart,
    at each size (medians; the sizes in turns)."""
    meters = [LiveMeter(calls) for calls in sizes]
    times: list[list[float]] = [[] for _ in sizes]
    for _ in range(repeats):
        for meter, samples in zip(meters, times, strict=True):
            meter.until(change)
            meter.call()
            started = time.perf_counter()
            meter.refresh(live)
            samples.append(time.perf_counter() - started)
    return [median_us(samples) for samples in times]


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


def _ratio_row(figure: str, times: list[float]) -> dict:
    ratio = times[1] / times[0]
    return _row(figure, ratio, "ratio", f"<= {RATIO_TARGET:g}", ratio <= RATIO_TARGET)


def meter_rows() -> list[dict]:
    """The live refresh at 200 and 20,000 messages as it comes, and each chart change at
    2,000 and 20,000 (both charts full: the same columns and marks to draw)."""
    small, large = CALLS[SMALL], CALLS[LARGE]
    anew = meter_times((small, large), None, 5, live=False)
    typical = meter_times((small, large), None, REPEATS)
    name = "live meter refresh"
    rows = _rows(f"{name} (the next call)", (typical[0], anew[0]), (typical[1], anew[1]))
    note = {
        "grow": "a call into the newest column (most calls)",
        "column": "a call that starts a column (all drawn again)",
        "regroup": f"a call that regroups the columns (one in {MAX_COLUMNS})",
    }
    for change, what in note.items():
        repeats = 11 if change == "regroup" else REPEATS
        times = meter_times((CALLS[PLATEAU], large), change, repeats)
        rows += [
            _row(f"{name}, {what}, {PLATEAU:,} messages", times[0], "us", None, None),
            _row(f"{name}, {what}, {LARGE:,} messages", times[1], "us", None, None),
            _ratio_row(f"{name}, {what}, {LARGE:,} vs {PLATEAU:,} messages", times),
        ]
    return rows


def main() -> list[dict[str, Any]]:
    rows = _rows("request build (adapter)", request_times(SMALL), request_times(LARGE))
    rows += _rows("MicroCompact outside a session", outside_times(SMALL), outside_times(LARGE))
    return rows + meter_rows()


if __name__ == "__main__":
    for row in main():
        print(f"{row['figure']:<55} {row['median']:>10,.3f} {row['unit']}")
