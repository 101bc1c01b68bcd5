"""Linear-time properties of the live meter guarded by counting work, not seconds: a refresh
builds, draws and reads what changed since the last one, not the whole session."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support.counted_history import SLACK, TOUCHED, ask, batch, compactor_for, grown, step
from support.meter_calls import meter_call

from evo_magic.history import History
from evo_magic.measure import ContextSize
from evo_magic.meter.chart import MAX_COLUMNS, ChartCache
from evo_magic.meter.composition import HistoryComposition, composition
from evo_magic.meter.data import MeterData
from evo_magic.meter.html import meter_html
from evo_magic.meter.log import CallPoint, Compaction, MeterLog
from evo_magic.meter.ranges import BLOCK
from evo_magic.meter.state import StateCache, state_of
from evo_magic.meter.tally import Tally
from evo_magic.meter.text import meter_text


def composition_touched(size: int) -> int:
    """Messages one refresh of the meter's composition touches after a call, at `size`."""
    history = History(lambda event: None)
    compactor = compactor_for("micro", history)
    n = grown(history, compactor, size)
    composer = HistoryComposition(history)
    composer.shares(100, 1_000)
    TOUCHED.clear()
    step(history, compactor, n + 1)  # appends, and micro-compaction rewrites an old result
    shares = composer.shares(100, 1_000)
    touched = len(TOUCHED)
    assert shares == composition(list(history.view()), 100, 1_000)  # the whole, measured anew
    history.replace([ask(1), *batch(2)[:1]])
    assert composer.shares(0, 50) == composition(list(history.view()), 0, 50)
    return touched


def test_the_meter_composition_measures_only_what_changed() -> None:
    small, large = composition_touched(200), composition_touched(2_000)
    assert large <= small + SLACK, (small, large)


# -- the live meter ------------------------------------------------------------------------


def meter_step(log: MeterLog, n: int) -> None:
    """Call `n` of a long session as the log folds it: a call, and every other call a
    micro-compaction before it; a full compaction every 500 calls."""
    meter_call(log, n)
    if n % 500 == 0:
        size = ContextSize(2 * n, 1_000 + 90 * n, 250 + 22 * n)  # as meter_call made it
        after = ContextSize(4, 2_000, 500)
        number = n // 500
        log.compactions.append(
            Compaction(number, False, "summarise", "full", "auto", None, size, after, True, n,
                       n // 10 + 1, summary="The work so far.")
        )  # fmt: skip


def meter_data(log: MeterLog, scope: Any, tally: Tally | None = None) -> MeterData:
    now = ContextSize(9, 10**6, 10**5)
    return MeterData.of(log, scope, "s", 10**9, None, now, [], 0.25, tally)


def test_a_meters_data_is_the_log_as_it_was_when_made() -> None:
    """The data reads the log's rows in place (no copy), and later calls and compactions
    leave it as it was: a finished cell's meter, kept as its data, shows that cell only."""
    log = MeterLog()
    for n in range(1, 301):
        meter_step(log, n)
    data = meter_data(log, log.whole())
    page, calls, compactions = meter_html(data), list(data.calls), list(data.compactions)
    for n in range(301, 400):
        meter_step(log, n)
    assert (len(data.calls), len(data.compactions)) == (300, 150)
    assert data.calls == calls and data.compactions == compactions
    assert list(data.calls[-2:]) == calls[-2:] and data.own_calls[-1] is calls[-1]
    assert data.calls[10:20][2:50] == calls[12:20] and data.calls[::50] == calls[::50]
    with pytest.raises(IndexError):
        data.calls[300]
    assert meter_html(data) == page


def built_per_refresh(calls: int, cell_from: int | None = None) -> int:
    """Sums, columns, marks and states a live meter builds at one refresh after `calls` calls
    (the refreshes before it kept theirs), checking every refresh against a rendering anew."""
    log = MeterLog()
    tally, states, chart = Tally(), StateCache(), ChartCache()
    scope = log.whole()

    def refreshed() -> None:
        live, anew = meter_data(log, scope, tally), meter_data(log, scope)
        assert meter_html(live, chart) == meter_html(anew)
        assert meter_text(live) == meter_text(anew)
        assert state_of(live, states) == state_of(anew)

    for n in range(1, calls + 1):
        meter_step(log, n)
        if n == cell_from:
            scope = log.mark("cell", ContextSize(1, 2, 3))
        if n % 97 == 0 or n == calls:  # refreshed now and then, as the throttle does
            refreshed()
    before = chart.built + states.built + tally.calls + tally.rows
    meter_step(log, calls + 1)
    refreshed()
    return chart.built + states.built + tally.calls + tally.rows - before


def test_a_live_meter_refresh_builds_only_what_is_new() -> None:
    """A refresh of the live meter builds the new call's and compaction's states and marks and
    the newest column: the same at 200 and at 2,000 calls (it rebuilt every state, column and
    mark: some 3,000 at 2,000 calls). 2,000 calls are ten times 200 and far past the chart's
    160 columns; each refresh is checked against a rendering anew, so the cost of the check
    grows with the square of the length (5,000 took ten times as long)."""
    small, large = built_per_refresh(200), built_per_refresh(2_000)
    # A call and its micro-compaction: summed, a state each; the newest column; their mark.
    assert small == large == 6, (small, large)
    assert built_per_refresh(2_000, cell_from=1_700) == 6


def test_a_fresh_meter_builds_everything() -> None:
    log = MeterLog()
    for n in range(1, 301):
        meter_step(log, n)
    states, chart = StateCache(), ChartCache()
    data = meter_data(log, log.whole())
    meter_html(data, chart)
    state_of(data, states)
    # 300 calls in 150 columns of 2; their 150 micro-compactions in 150 marks; 450 states.
    assert (chart.built, states.built) == (150 + 150, 300 + 150)


def live_and_anew(log: MeterLog, scope: Any, tally: Tally, chart: ChartCache) -> None:
    """The live meter's HTML, with what its earlier refreshes drew kept, is the fresh one."""
    assert meter_html(meter_data(log, scope, tally), chart) == meter_html(meter_data(log, scope))


def test_a_live_meter_draws_at_every_refresh_what_a_fresh_one_draws() -> None:
    """Refreshed at every call through a full compaction (call 1,000), a regrouping of the
    chart's columns (call 1,121: 8 calls a column instead of 7), the log's newest compactions
    rewritten, and a cell's scope starting: every page is the fresh rendering, byte for byte."""
    log = MeterLog()
    tally, chart = Tally(), ChartCache()
    scope = log.whole()
    for n in range(1, 1_141):
        meter_step(log, n)
        if 990 <= n <= 1_010 or n >= 1_110:
            live_and_anew(log, scope, tally, chart)
    assert chart.drawn.strings and chart.listed.strings  # what was kept was used
    # The newest compactions written again (fewer, other tools): nothing kept is shown stale.
    rewritten = replace(log.compactions[-1], cleared=("grep", "bash"), after=ContextSize(1, 7, 2))
    del log.compactions[-3:]
    live_and_anew(log, scope, Tally(), chart)
    log.compactions.append(rewritten)
    live_and_anew(log, scope, Tally(), chart)
    scope = log.mark("cell", ContextSize(1, 2, 3))
    for n in range(1_141, 1_160):
        meter_step(log, n)
        live_and_anew(log, scope, tally, chart)


def drawn_per_refresh(calls: int) -> int:
    """HTML strings (columns, marks, listed compactions) a live meter draws at the refresh
    after one more call, the refresh after `calls` calls having drawn everything."""
    log = MeterLog()
    for n in range(1, calls + 1):
        meter_step(log, n)
    tally, chart = Tally(), ChartCache()
    live_and_anew(log, log.whole(), tally, chart)
    before = chart.drawn.made + chart.listed.made
    meter_step(log, calls + 1)  # in the newest column (a new one moves the axis: all drawn)
    live_and_anew(log, log.whole(), tally, chart)
    return chart.drawn.made + chart.listed.made - before


def test_a_live_meter_refresh_draws_only_what_changed() -> None:
    """The newest column, its micro-compaction's mark and its ask's row: the same 3 strings
    at 1,000 and at 10,000 calls (a refresh drew its columns, as many marks, the 20 listed
    asks and every full compaction's mark and row again: 312 and 378 strings). The call
    added is inside the newest column, neither its first nor its last (those move the axis's
    end: all are drawn again)."""
    assert drawn_per_refresh(1_002) == drawn_per_refresh(10_000) == 3


def read_at_a_regrouping(calls: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Calls' token counts and compactions' freed characters a live meter reads at the refresh
    where the chart's columns regroup (the call after `calls` makes each column hold one call
    more)."""
    log = MeterLog()
    for n in range(1, calls + 1):
        meter_step(log, n)
    tally, chart = Tally(), ChartCache()
    live_and_anew(log, log.whole(), tally, chart)
    read = {CallPoint: 0, Compaction: 0}

    def counting(kind: type, name: str) -> property:
        real = getattr(kind, name).fget

        def counted(row: Any) -> int:
            read[kind] += 1
            return real(row)  # type: ignore[no-any-return]

        return property(counted)

    meter_step(log, calls + 1)
    with monkeypatch.context() as patched:
        patched.setattr(CallPoint, "tokens", counting(CallPoint, "tokens"))
        patched.setattr(Compaction, "freed_chars", counting(Compaction, "freed_chars"))
        meter_html(meter_data(log, log.whole(), tally), chart)
    return read[CallPoint], read[Compaction]


def test_a_regrouping_refresh_reads_each_columns_largest_call_not_every_row(monkeypatch):
    """When the calls per column grow (every 160 calls) every column and micro-compaction
    mark is made again: from the calls' numbers and the micro-compactions' running sums,
    kept as rows come, not by reading the session's rows (it read every call twice or more
    and every micro-compaction: some 29,000 and 4,800 reads at 9,600 calls)."""
    small = read_at_a_regrouping(1_120, monkeypatch)  # 7 calls a column, then 8
    large = read_at_a_regrouping(9_600, monkeypatch)  # 60, then 61
    # A read per column (its largest call, for its tooltip) and the new call's; the new
    # micro-compaction's, as it is summed and listed.
    assert small[0] <= MAX_COLUMNS + 5 and large[0] <= MAX_COLUMNS + 5, (small, large)
    assert small[1] <= 10 and large[1] <= 10, (small, large)


class CountedRows(list):  # type: ignore[type-arg]
    """A log's list of rows that counts the rows read from it (by index, slice or loop)."""

    read = 0

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        self.read += len(got) if isinstance(index, slice) else 1
        return got

    def __iter__(self) -> Any:
        for row in super().__iter__():
            self.read += 1
            yield row


def work_at_a_regrouping(calls: int) -> tuple[int, int]:
    """Rows of the log (calls and compactions) and numbers kept by the chart a live refresh
    (the data, the HTML, the widget's state) reads where the chart's columns regroup: the
    call after `calls` makes each column hold one call more."""
    log = MeterLog()
    log.calls, log.compactions = CountedRows(), CountedRows()
    for n in range(1, calls + 1):
        meter_step(log, n)
    tally, states, chart = Tally(), StateCache(), ChartCache()
    state_of(meter_data(log, log.whole(), tally), states)
    live_and_anew(log, log.whole(), tally, chart)
    meter_step(log, calls + 1)
    log.calls.read = log.compactions.read = 0
    numbers, group = chart.numbers.read, chart.window[1]
    data = meter_data(log, log.whole(), tally)
    page = meter_html(data, chart)
    state_of(data, states)
    rows, numbers = log.calls.read + log.compactions.read, chart.numbers.read - numbers
    assert page == meter_html(meter_data(log, log.whole()))  # regrouped: as drawn anew
    assert chart.window[1] == group + 1  # a call more a column
    return rows, numbers


def test_a_regrouping_refresh_reads_a_few_rows_and_numbers_a_column() -> None:
    """Where the columns regroup, a refresh reads a few of the log's rows a column (its
    first, last and largest call, its micro-compactions' first) besides the full compactions
    it lists, and a few kept numbers a column (of each kind, a run within a block of calls
    or the largest from each end of the run and of the blocks between): as many at 9,600
    calls as at 1,120. It copied the log's calls and compactions at every refresh (some
    14,000 rows at 9,600 calls) and read every call's numbers at a regrouping."""
    small, large = work_at_a_regrouping(1_120), work_at_a_regrouping(9_600)
    fulls = 9_600 // 500  # listed and marked, each read once
    for rows, numbers in (small, large):
        assert rows <= 4 * MAX_COLUMNS + 2 * fulls + 20, (small, large)
        assert numbers <= (2 * BLOCK + 2) * MAX_COLUMNS, (small, large)


def looked_up_per_refresh(calls: int) -> int:
    """Kept strings a live meter looks up at the refresh after one more call (into the
    newest column), the refresh after `calls` calls having drawn everything."""
    log = MeterLog()
    for n in range(1, calls + 1):
        meter_step(log, n)
    tally, chart = Tally(), ChartCache()
    live_and_anew(log, log.whole(), tally, chart)
    looked = [0]
    for drawn in (chart.drawn, chart.listed):
        real = drawn.get

        def counted(*args: Any, real: Any = real) -> str:
            looked[0] += 1
            return real(*args)  # type: ignore[no-any-return]

        drawn.get = counted  # type: ignore[method-assign]
    meter_step(log, calls + 1)
    meter_html(meter_data(log, log.whole(), tally), chart)
    return looked[0]


def test_a_live_meter_refresh_looks_up_what_changed_not_every_column_and_mark() -> None:
    """The whole columns, the full compactions' marks and the micro-compactions' marks but
    the newest are kept as one string each: a call into the newest column looks up those,
    the newest column and mark, and the listed rows (the 20 newest asks' and every full
    compaction's, one each 500 calls here), at 1,000 as at 10,000 calls (it looked up each
    of the 160 columns and as many marks too: some 360 at each)."""
    small, large = looked_up_per_refresh(1_002), looked_up_per_refresh(10_000)
    assert small - 1_002 // 500 == large - 10_000 // 500 <= 30, (small, large)
