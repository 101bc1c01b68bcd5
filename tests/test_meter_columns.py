"""A long session's chart: a column that stands for several calls shows the largest of them
and says which calls and asks it holds (its tooltip), however its calls were grouped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from evo_magic.measure import ContextSize
from evo_magic.meter.chart import ChartCache
from evo_magic.meter.data import MeterData
from evo_magic.meter.html import meter_html
from evo_magic.meter.log import CallPoint, Compaction, MeterLog
from evo_magic.meter.ranges import CallNumbers

TOKENS = [10, 30, 30, 5, 7, 9]
"""Calls 1 to 6 (repeated): calls 2 and 3 send as much, the most of the first three."""


def log_of(calls: int) -> MeterLog:
    log = MeterLog()
    for n in range(1, calls + 1):
        tokens = TOKENS[(n - 1) % len(TOKENS)] * 100 + n // len(TOKENS)
        size = ContextSize(n, tokens * 4, tokens)
        turn = (n + 1) // 2  # two calls an ask: asks 1, 1, 2, 2, 3, 3, ...
        log.calls.append(CallPoint(n, turn, size, size, None, None))
    return log


def columns(log: MeterLog, chart: ChartCache) -> list[dict[str, str]]:
    data = MeterData.of(log, log.whole(), "s", 10**9, None, ContextSize(1, 4, 1))
    page = ET.fromstring(meter_html(data, chart))
    return [dict(div.attrib) for div in page.iter("div") if div.get("class") == "evo-point"]


def test_a_columns_tooltip_names_its_largest_call_the_first_of_equals_and_its_asks() -> None:
    log = log_of(480)  # 3 calls a column
    (first, second) = columns(log, ChartCache())[:2]
    assert first["data-call"] == "1" and first["data-last-call"] == "3"
    assert first["title"] == "calls 1-3 (asks 1-2)\nlargest: call 2, 3,000 tokens, 12,000 chars"
    assert second["title"] == "calls 4-6 (asks 2-3)\nlargest: call 6, 901 tokens, 3,604 chars"


def test_a_live_chart_regrouped_shows_what_a_new_chart_shows() -> None:
    """Grown call by call past a regrouping (3 calls a column, then 4), a kept chart's
    columns are those of a chart drawn anew."""
    log, chart = log_of(470), ChartCache()
    columns(log, chart)
    grown = log_of(490)
    for point in grown.calls[470:]:
        log.calls.append(point)
        kept = columns(log, chart)
        assert kept == columns(log, ChartCache())
    titles = [c["title"] for c in kept]
    assert titles[0].startswith("calls 1-4 (asks 1-2)\n")
    assert all(re.match(r"calls \d+-\d+ \(asks? [\d-]+\)\nlargest: call \d+", t) for t in titles)


def with_micro(log: MeterLog, order: list[int] | None = None) -> MeterLog:
    """A micro-compaction before every other call (rewriting 1 tool result, then 2, 3, 1,
    ...; freeing 10 characters per result), written in the log's order or in `order`."""
    after_calls = [n for n in range(1, len(log.calls) + 1) if n % 2]
    for i in order or range(len(after_calls)):
        n = after_calls[i]
        cleared = ("read_file",) * (1 + n % 3)
        before = ContextSize(n, 1_000 + 10 * len(cleared), 300)
        after = ContextSize(n, 1_000, 290)
        log.compactions.append(
            Compaction(0, True, "micro", "micro", "every_call", None, before, after, True, n,
                       log.calls[n - 1].turn, cleared=cleared)
        )  # fmt: skip
    return log


def micro_marks(log: MeterLog, chart: ChartCache) -> list[dict[str, str]]:
    data = MeterData.of(log, log.whole(), "s", 10**9, None, ContextSize(1, 4, 1))
    page = ET.fromstring(meter_html(data, chart))
    return [
        dict(div.attrib)
        for div in page.iter("div")
        if div.get("class") == "evo-mark" and div.get("data-kind") == "micro"
    ]


def test_a_long_sessions_micro_mark_sums_up_its_columns_micro_compactions() -> None:
    log = with_micro(log_of(480))  # 3 calls a column: calls 1-3, 4-6, ...
    first, second = micro_marks(log, ChartCache())[:2]
    # Before call 2 (the first column's); before calls 4 and 6 (the second's): 1 and 3
    # results rewritten, 10 chars each; 10 tokens a micro-compaction.
    assert first["data-count"] == "1" and second["data-count"] == "2"
    assert second["title"] == (
        "2 micro-compactions before calls 4-6: 4 tool results rewritten, "
        "freed 40 chars (~20 tokens)"
    )


def test_micro_compactions_written_out_of_order_are_marked_by_their_columns() -> None:
    """Rows written out of call order (not what a live log writes): each column's mark
    still holds its own rows, through a regrouping, as a chart drawn anew marks them."""
    calls = 470
    order = [1, 0, *range(2, (calls + 1) // 2)]  # the one before call 4 written first
    log, chart = with_micro(log_of(calls), order), ChartCache()
    drawn = micro_marks(log, chart)  # the second column's mark first: its row came first
    assert drawn[0]["data-count"] == "2" and drawn[1]["data-count"] == "1"
    assert drawn[0]["title"].startswith("2 micro-compactions before calls 4-6: 4 tool results")
    for point in log_of(490).calls[calls:]:
        log.calls.append(point)
        assert micro_marks(log, chart) == micro_marks(log, ChartCache())


# -- a column's numbers, from what is kept as calls come ------------------------------------


def calls_of(rows: list[tuple[int, int, int]]) -> list[CallPoint]:
    points = []
    for n, (tokens, removed, turn) in enumerate(rows, 1):
        sent = ContextSize(n, 4 * tokens, tokens)
        before = ContextSize(n, 4 * (tokens + removed), tokens + removed)
        points.append(CallPoint(n, turn, before, sent, None, None))
    return points


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 400), st.randoms(use_true_random=False), st.booleans())
def test_a_runs_numbers_are_those_read_off_its_calls(count, rng, asks_grow) -> None:
    """Every run of calls a chart makes a column of (however many calls a column holds), and
    runs anywhere: the most tokens sent, the first call that sent them (few values: many
    equal), the most before the strategies, the first and last ask; asks as a session makes
    them (never going back) or in any order."""
    rows = [(rng.randint(0, 60), rng.randint(-50, 400), rng.randint(1, 40)) for _ in range(count)]
    if asks_grow:
        rows = [(tokens, removed, i // 3 + 1) for i, (tokens, removed, _) in enumerate(rows)]
    calls = calls_of(rows)
    kept = CallNumbers()
    kept.follow(calls[: count // 2])  # as calls come: in two refreshes
    kept.follow(calls)
    runs = [(0, count)] + [(rng.randrange(count), rng.randint(1, count)) for _ in range(20)]
    for group in (1, 3, 7, 32, 33, 64, 100):
        runs += [(start, group) for start in range(0, count, group)]
    for start, length in runs:
        end = min(start + length, count)
        part = rows[start:end]
        most = max(tokens for tokens, _, _ in part)
        got = kept.run(start, end)
        assert got.tokens == most
        assert got.biggest == start + [tokens for tokens, _, _ in part].index(most)
        assert got.before == max(tokens + max(removed, 0) for tokens, removed, _ in part)
        assert got.asks == (min(t for _, _, t in part), max(t for _, _, t in part))


def test_a_columns_asks_when_the_log_goes_back_to_an_earlier_ask() -> None:
    """A log whose asks go back (not what a session writes, a log folded by hand can):
    each column still says the first and the last ask of its calls."""
    log = log_of(480)  # 3 calls a column
    log.calls[4] = replace(log.calls[4], turn=1)  # call 5: ask 1 after ask 2
    (_, second) = columns(log, ChartCache())[:2]
    assert second["title"].startswith("calls 4-6 (asks 1-3)\n")
