"""The context chart, in the data's own units: what the meter's HTML chart and the context
figure both draw.

One column per model call: the prompt it sent, in tokens (the API's count when it reported
one), and, when strategies removed something just before it, a ghost of the size before them
(drawn as an outline behind the column, so it never reads as the column's height); the limit
on the same basis (the whole prompt in tokens); a mark where each compaction happened. A cell's
chart shows its own calls and at most `CONTEXT_CALLS` before them; a long session's columns
stand for several consecutive calls each (the largest drawn), `MAX_COLUMNS` at most.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from evo_magic.meter.data import MeterData
from evo_magic.meter.drawn import Drawn
from evo_magic.meter.log import CallPoint, Compaction
from evo_magic.meter.micro_marks import MicroRows, Sums
from evo_magic.meter.ranges import CallNumbers
from evo_magic.meter.ranges import before_tokens as before_tokens  # where it was defined
from evo_magic.meter.rows import Rows

CONTEXT_CALLS = 40
"""A cell's chart shows its own calls and at most this many before them."""
MAX_COLUMNS = 160
"""Columns at most: beyond, consecutive calls share a column (the largest of them drawn), so a
chart stays small however long the session."""
Y_TICKS = 4
X_TICKS = 8


def nice_step(span: float, ticks: int) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` ticks."""
    raw = max(span / max(ticks, 1), 1e-9)
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def tokens_label(value: float) -> str:
    """ "0", "500", "12k", "12.5k", "1.2M"."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def position(row: Compaction, calls: Sequence[CallPoint]) -> float:
    """Where a compaction happened on the call axis: between the call before it and the next."""
    if row.after_call <= 0:
        return (calls[0].call if calls else 1) - 0.5
    return calls[min(row.after_call, len(calls)) - 1].call + 0.5


@dataclass(frozen=True)
class Column:
    """One column of the chart: one call, or consecutive calls in a long session."""

    first: CallPoint
    """Its first call."""
    last: CallPoint
    """Its last call (its first when it holds one; the calls between are not kept: a column is
    drawn from these and its numbers, so regrouping the columns reads none of them)."""
    start: float
    """Where its slot starts on the call axis (its first call minus a half)."""
    width: float
    """Its slot's width in calls (how many calls it stands for)."""
    tokens: int
    """The prompt sent (the largest of its calls)."""
    before: int
    """The prompt before the strategies that ran just before (>= `tokens`)."""
    own: bool
    """True when it holds a call of the scope (a cell's own calls are drawn darker)."""
    biggest: CallPoint
    """The call that sent the most (the first of those that sent as much)."""
    asks: tuple[int, int]
    """The first and the last ask of its calls."""

    @property
    def removed(self) -> int:
        """Tokens the strategies just before removed (the ghost above the column)."""
        return self.before - self.tokens


@dataclass(frozen=True)
class Mark:
    """A compaction where it happened: a full one on its own, micro-compactions grouped."""

    first: Compaction
    """The compaction it marks (of a group, the first in the log)."""
    last: Compaction
    """Of a group, the last in the log (else `first`)."""
    count: int
    """How many compactions it stands for (a group's: those between are not kept)."""
    x: float
    own: bool
    """True when one of them is the scope's own (the others are drawn faint)."""
    sums: Sums | None = None
    """What its micro-compactions did, summed (micro-compactions only)."""

    @property
    def micro(self) -> bool:
        """True for micro-compactions (a mark holds one kind only)."""
        return self.first.micro

    @property
    def label(self) -> str:
        """What a full compaction's mark is labelled: "C1", "C2", ..., or "failed" ("" for
        micro-compactions, drawn unlabelled)."""
        if self.micro:
            return ""
        row = self.first
        return row.label if row.success else "failed"


@dataclass
class ChartCache:
    """The columns and marks a chart built, for the next chart of the same meter: a log only
    grows and its rows never change, so while the window and the calls per column stay the
    same, a chart builds the columns and marks of the new calls and compactions only (the
    last column again, which may have grown). A long session's columns regroup when the calls
    per column grow (every `MAX_COLUMNS` calls): then all are built anew."""

    window: tuple[int, ...] = ()
    """The chart's first call, calls per column, and the scope's first call and compaction."""
    whole: list[Column] = field(default_factory=list)
    """The columns whose calls are all there (every one but the newest)."""
    full: list[Mark] = field(default_factory=list)
    """A mark per full compaction, in order."""
    micro: MicroRows = field(default_factory=MicroRows)
    """The micro-compactions in the window (a mark is one of them, or a column's)."""
    micro_marks: dict[int, Mark] = field(default_factory=dict)
    """The micro-compactions' marks, by compaction (one each) or by column of calls."""
    seen: int = 0
    """Compactions of the log looked at."""
    built: int = 0
    """Columns and marks built so far (what a chart costs, for tests)."""
    tips: dict[int, tuple[object, str]] = field(default_factory=dict)
    """The tooltip of each column and mark drawn last, by its id (the item kept with it, so
    the id is its own): a tooltip reads every call of its column, and a column or mark
    kept from an earlier chart has the same one."""
    drawn: Drawn = field(default_factory=Drawn)
    """The HTML of each column and mark drawn last (see `evo_magic.meter.chart_html`)."""
    listed: Drawn = field(default_factory=Drawn)
    """The HTML of each compaction the meter listed last (see `evo_magic.meter.html`)."""
    numbers: CallNumbers = field(default_factory=CallNumbers)
    """The calls' numbers (a column's read from them at C speed, not call by call)."""

    def tip(self, item: Column | Mark, make: Callable[[], str]) -> str:
        """The tooltip of `item`: the one made for it before, else `make()`."""
        kept = self.tips.get(id(item))
        if kept is None or kept[0] is not item:
            kept = self.tips[id(item)] = (item, make())
        return kept[1]

    def keep_tips(self, items: Sequence[Column | Mark]) -> None:
        """Forget the tooltips of the items no longer drawn, once they are as many as those
        drawn (a refresh replaces one or two: a pass over all at each would cost more than
        what it draws; a kept tooltip holds its item, so no id is reused meanwhile)."""
        if len(self.tips) > 2 * len(items) + 16:
            self.tips = {id(i): self.tips[id(i)] for i in items if id(i) in self.tips}

    def follow(self, window: tuple[int, ...]) -> None:
        """Start afresh when the chart's window is not the cached one's; when only the calls
        per column grew, the columns and micro-compaction marks are made again from what is
        kept (the compactions in the window and the full compactions' marks stay)."""
        if window == self.window:
            return
        regrouped = window[:1] + window[2:] == self.window[:1] + self.window[2:]
        self.window, self.whole, self.micro_marks = window, [], {}
        if not regrouped:
            self.full, self.seen, self.micro = [], 0, MicroRows()

    def columns(self, count: int, column: Callable[[int, int, int], Column]) -> list[Column]:
        """The columns of `count` calls, `column(number, first, end)` making column `number` of
        the calls `first` to `end` (not included): the whole ones kept, the newest built again."""
        group = self.window[1]
        if len(self.whole) * group > count:  # not the same calls grown: afresh
            self.follow(())
            return self.columns(count, column)
        made = [
            column(number, number * group, min((number + 1) * group, count))
            for number in range(len(self.whole), math.ceil(count / group))
        ]
        self.built += len(made)
        self.whole += [c for c in made if c.width == group]
        return self.whole + [c for c in made if c.width < group]

    def marks(self, data: MeterData, start: int, group: int) -> list[Mark]:
        """Every compaction in the window: a full one as it is, a micro-compaction as it is
        (or, when calls share columns, those of a column as one mark); only the marks that
        gained a compaction are built."""
        if self.seen > len(data.compactions):
            self.follow(())
            self.follow((start, group, data.scope.first_call, data.scope.first_compaction))
        changed: dict[int, None] = {}  # in the order first seen (the marks' order)
        for index in range(self.seen, len(data.compactions)):
            row = data.compactions[index]
            if row.after_call < start:
                continue
            own = index >= data.scope.first_compaction
            if row.micro:
                self.micro.add(row, own)
                if group == 1:  # one mark each
                    sums = Sums(len(row.cleared), row.freed_chars, row.freed_tokens)
                    mark = Mark(row, row, 1, position(row, data.calls), own, sums)
                    self.micro_marks[index] = mark
                    self.built += 1
                else:  # in a long session one per column of calls
                    changed[(row.after_call - start) // group] = None
            else:
                self.full.append(Mark(row, row, 1, position(row, data.calls), own))
                self.built += 1
        self.seen = len(data.compactions)
        if group > 1 and (changed or (self.micro.rows and not self.micro_marks)):
            keys = list(changed) if self.micro_marks else None  # None: regrouped, every one
            for key, run in self.micro.runs(start, group, keys).items():
                x = position(run.first, data.calls)
                self.micro_marks[key] = Mark(run.first, run.last, run.count, x, run.own, run.sums)
                self.built += 1
        return self.full + list(self.micro_marks.values())


class Chart:
    """The chart of a `MeterData`: its window of calls, columns, marks, limit and scale."""

    def __init__(self, data: MeterData, cache: ChartCache | None = None):
        """The chart of `data`; `cache` is what the same meter's chart built at its earlier
        refreshes (a live meter's), so only the new columns and marks are built."""
        self.data = data
        self.start = 0
        if data.scope.label == "cell":
            self.start = max(data.scope.first_call - CONTEXT_CALLS, 0)
        # The data's calls, read in place (a cell's chart from its start): never copied.
        self.calls = Rows(data.calls, self.start)
        self.group = max(math.ceil(len(self.calls) / MAX_COLUMNS), 1)
        self.cache = cache = cache if cache is not None else ChartCache()
        cache.follow((self.start, self.group, data.scope.first_call, data.scope.first_compaction))
        cache.numbers.follow(data.calls)
        self.columns = cache.columns(len(self.calls), self._column)
        self.marks = cache.marks(data, self.start, self.group)
        first = self.calls[0].call if self.calls else 1
        last = self.calls[-1].call if self.calls else 1
        self.x0 = first - 0.5
        # The axis ends where the newest column's slot does (and, when calls share columns,
        # half a call on, room for a mark after its last call): in a long session it moves
        # once per column, not once per call, so the columns before keep their places (and
        # their drawing); with a call per column, that is the newest call's.
        room = 0.5 if self.group > 1 else 0.0
        end = self.columns[-1].start + self.group + room if self.columns else last + 0.5
        self.x1 = max([end, last + 0.5] + [m.x + 0.5 for m in self.marks if m.x > last])
        self.limit = data.limit_tokens
        sizes = [c.before for c in self.columns] + [
            m.first.before.tokens for m in self.marks if not m.micro
        ]
        peak = max([*sizes, self.limit, 1]) * 1.08
        self.step = nice_step(peak, Y_TICKS)
        self.top = math.ceil(peak / self.step) * self.step

    @property
    def empty(self) -> bool:
        """True when there is nothing to draw: no call and no compaction yet."""
        return not self.data.calls and not self.data.compactions

    def _column(self, number: int, first: int, end: int) -> Column:
        """Column `number`, of the window's calls `first` to `end` (not included)."""
        own = self.start + (number + 1) * self.group > self.data.scope.first_call
        first, end = self.start + first, self.start + end  # their places in `data.calls`
        run = self.cache.numbers.run(first, end)
        calls = self.data.calls
        head = calls[first]
        return Column(
            head,
            calls[end - 1],
            head.call - 0.5,
            float(end - first),
            run.tokens,
            run.before,
            own,
            self.data.calls[run.biggest],
            run.asks,
        )

    def label_lines(
        self,
        width: Callable[[str], float],
        free_until: Callable[[int], float] | None = None,
        marks: Sequence[Mark] | None = None,
    ) -> list[int]:
        """For each of `marks` (None: the chart's), the line its label goes on, 0 the top one
        (a micro-compaction's: 0, it has none): the first line where it starts after the
        labels already there end and ends before `free_until(line)` (where the limit's label
        takes that line, if it does), `width(label)` being a label's width in calls (with its
        gap). So labels never overprint: a failed and a successful compaction
        before one call stack, the failed one first."""
        marks = self.marks if marks is None else marks
        ends: list[float] = []  # where the last label on each line ends
        lines = [0] * len(marks)
        for index in sorted(range(len(marks)), key=lambda i: marks[i].x):
            mark = marks[index]
            if mark.micro:
                continue
            end = mark.x + width(mark.label)
            line = 0
            while line < len(ends) and not (
                ends[line] <= mark.x and (free_until is None or end <= free_until(line))
            ):
                line += 1
            if line == len(ends):  # a new line: past the limit's label when it takes this one
                while free_until is not None and end > free_until(line) and line < 100:
                    ends.append(-math.inf)
                    line += 1
                ends.append(-math.inf)
            ends[line] = end
            lines[index] = line
        return lines

    def y_ticks(self) -> list[float]:
        """Token values to label, from 0 to the top in round steps."""
        count = round(self.top / self.step)
        return [i * self.step for i in range(count + 1)]

    def x_ticks(self) -> list[int]:
        """Call numbers to label: the first, then round steps."""
        if not self.calls:
            return []
        first, last = math.ceil(self.x0), math.floor(self.x1)
        step = max(int(nice_step(max(last - first, 1), X_TICKS)), 1)
        start = first if first % step == 0 else first + step - first % step
        return sorted({first, *range(start, last + 1, step)})

    def limit_label(self) -> str:
        """ "limit 12,000 chars ≈ 3,104 tokens", or "limit 50,000 tokens" (the token limit
        comes first)."""
        data = self.data
        if data.token_limit and data.token_limit == self.limit:
            return f"limit {self.limit:,} tokens"
        return f"limit {data.context_limit:,} chars ≈ {self.limit:,} tokens"
