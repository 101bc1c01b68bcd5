"""A long session's chart: a column that stands for several calls shows the largest of them
and says which calls and asks it holds (its tooltip), however its calls were grouped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from evo_magic.measure import ContextSize
from evo_magic.meter.chart import ChartCache
from evo_magic.meter.data import MeterData
from evo_magic.meter.html import meter_html
from evo_magic.meter.log import CallPoint, MeterLog

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
