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
from dataclasses import dataclass

from evo_magic.meter.data import MeterData
from evo_magic.meter.log import CallPoint, Compaction

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


def before_tokens(point: CallPoint) -> int:
    """The prompt's tokens before the strategies that ran just before the call (its own
    tokens when they removed nothing): the call's count plus what they removed, estimated."""
    return point.tokens + max(point.before.tokens - point.sent.tokens, 0)


@dataclass(frozen=True)
class Column:
    """One column of the chart: one call, or consecutive calls in a long session."""

    calls: tuple[CallPoint, ...]
    start: float
    """Where its slot starts on the call axis (its first call minus a half)."""
    width: float
    """Its slot's width in calls."""
    tokens: int
    """The prompt sent (the largest of its calls)."""
    before: int
    """The prompt before the strategies that ran just before (>= `tokens`)."""
    own: bool
    """True when it holds a call of the scope (a cell's own calls are drawn darker)."""

    @property
    def removed(self) -> int:
        """Tokens the strategies just before removed (the ghost above the column)."""
        return self.before - self.tokens


@dataclass(frozen=True)
class Mark:
    """A compaction where it happened: a full one on its own, micro-compactions grouped."""

    rows: tuple[Compaction, ...]
    x: float
    own: bool
    """True when one of them is the scope's own (the others are drawn faint)."""

    @property
    def micro(self) -> bool:
        """True for micro-compactions (a mark holds one kind only)."""
        return self.rows[0].micro

    @property
    def label(self) -> str:
        """What a full compaction's mark is labelled: "C1", "C2", ..., or "failed" ("" for
        micro-compactions, drawn unlabelled)."""
        if self.micro:
            return ""
        row = self.rows[0]
        return row.label if row.success else "failed"


class Chart:
    """The chart of a `MeterData`: its window of calls, columns, marks, limit and scale."""

    def __init__(self, data: MeterData):
        self.data = data
        self.start = 0
        if data.scope.label == "cell":
            self.start = max(data.scope.first_call - CONTEXT_CALLS, 0)
        self.calls = data.calls[self.start :]
        self.group = max(math.ceil(len(self.calls) / MAX_COLUMNS), 1)
        self.columns = [
            self._column(number, tuple(self.calls[i : i + self.group]))
            for number, i in enumerate(range(0, len(self.calls), self.group))
        ]
        self.marks = self._marks()
        first = self.calls[0].call if self.calls else 1
        last = self.calls[-1].call if self.calls else 1
        self.x0 = first - 0.5
        self.x1 = last + (1.0 if any(m.x > last for m in self.marks) else 0.5)
        self.limit = data.limit_tokens
        sizes = [c.before for c in self.columns] + [
            row.before.tokens for m in self.marks for row in m.rows if not row.micro
        ]
        peak = max([*sizes, self.limit, 1]) * 1.08
        self.step = nice_step(peak, Y_TICKS)
        self.top = math.ceil(peak / self.step) * self.step

    @property
    def empty(self) -> bool:
        """True when there is nothing to draw: no call and no compaction yet."""
        return not self.data.calls and not self.data.compactions

    def _column(self, number: int, group: tuple[CallPoint, ...]) -> Column:
        own = self.start + (number + 1) * self.group > self.data.scope.first_call
        return Column(
            group,
            group[0].call - 0.5,
            float(len(group)),
            max(p.tokens for p in group),
            max(before_tokens(p) for p in group),
            own,
        )

    def _marks(self) -> list[Mark]:
        """Every compaction in the window: a full one as it is, a micro-compaction as it is
        (or, when calls share columns, those of a column as one mark)."""
        data, marks = self.data, []
        micro: dict[int, list[tuple[Compaction, bool]]] = {}
        for index, row in enumerate(data.compactions):
            if row.after_call < self.start:
                continue
            own = index >= data.scope.first_compaction
            if row.micro:
                # One mark each; in a long session one per column of calls.
                column = (
                    max(row.after_call - self.start, 0) // self.group if self.group > 1 else index
                )
                micro.setdefault(column, []).append((row, own))
            else:
                marks.append(Mark((row,), position(row, data.calls), own))
        for group in micro.values():
            rows = tuple(row for row, _ in group)
            marks.append(Mark(rows, position(rows[0], data.calls), any(o for _, o in group)))
        return marks

    def label_lines(
        self, width: Callable[[str], float], free_until: Callable[[int], float] | None = None
    ) -> list[int]:
        """For each of `marks`, the line its label goes on, 0 the top one: the first line where
        it starts after the labels already there end and ends before `free_until(line)` (where
        the limit's label takes that line, if it does), `width(label)` being a label's width in
        calls (with its gap). So labels never overprint: a failed and a successful compaction
        before one call stack, the failed one first."""
        ends: list[float] = []  # where the last label on each line ends
        lines = [0] * len(self.marks)
        for index in sorted(range(len(self.marks)), key=lambda i: self.marks[i].x):
            mark = self.marks[index]
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
