"""The micro-compactions a chart marks, kept in order with running sums.

A long session's chart marks the micro-compactions of each column of calls as one mark, its
tooltip summing what they rewrote and freed. A log writes a compaction after the calls before
it, so the micro-compactions of a column are a run of consecutive rows: found by two binary
searches on their calls and summed from running sums, a mark costs the same however many
rows it holds, and regrouping the columns (every 160 calls) reads (or copies) no row again:
a mark keeps its first and last row and their count.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from evo_magic.meter.log import Compaction


@dataclass(frozen=True)
class Sums:
    """What a mark's micro-compactions did, summed: tool results rewritten, chars and tokens
    freed."""

    cleared: int
    freed_chars: int
    freed_tokens: int


def sums_of(rows: Sequence[Compaction]) -> Sums:
    """The sums of `rows`, read row by row."""
    return Sums(
        sum(len(row.cleared) for row in rows),
        sum(row.freed_chars for row in rows),
        sum(row.freed_tokens for row in rows),
    )


@dataclass
class MicroRows:
    """The micro-compactions in a chart's window, in the log's order, whether each is the
    scope's own, and running sums (see the module docstring)."""

    rows: list[Compaction] = field(default_factory=list)
    own: list[bool] = field(default_factory=list)
    after: array[int] = field(default_factory=lambda: array("q"))
    """The calls before each (machine integers: a binary search reads a few near each other,
    not Python objects scattered through a long session's heap)."""
    in_order: bool = True
    """False when a row came after fewer calls than the one before (then a column's rows are
    not one run, and are found row by row)."""
    cleared: array[int] = field(default_factory=lambda: array("q", [0]))
    freed_chars: array[int] = field(default_factory=lambda: array("q", [0]))
    freed_tokens: array[int] = field(default_factory=lambda: array("q", [0]))

    def add(self, row: Compaction, own: bool) -> None:
        """`row` joins, after the others."""
        if self.after and row.after_call < self.after[-1]:
            self.in_order = False
        self.rows.append(row)
        self.own.append(own)
        self.after.append(row.after_call)
        self.cleared.append(self.cleared[-1] + len(row.cleared))
        self.freed_chars.append(self.freed_chars[-1] + row.freed_chars)
        self.freed_tokens.append(self.freed_tokens[-1] + row.freed_tokens)

    def runs(self, start: int, group: int, keys: Sequence[int] | None) -> dict[int, Run]:
        """The rows of each column `keys` (None: every column that has some) of `group` calls
        from call `start`, by column (in the order of their first rows)."""
        if not self.in_order:
            return self._runs_row_by_row(start, group, keys)
        after = self.after
        spans: list[tuple[int, int, int]] = []  # each column's key and its rows' range
        if keys is None:  # one search a column: each one's rows end where the next's start
            low = 0
            while low < len(after):
                key = (after[low] - start) // group
                high = bisect_left(after, start + (key + 1) * group, low)
                spans.append((key, low, high))
                low = high
        else:
            for key in keys:
                low = bisect_left(after, start + key * group)
                spans.append((key, low, bisect_left(after, start + (key + 1) * group, low)))
        rows, out = self.rows, {}
        for key, low, high in spans:
            sums = Sums(
                self.cleared[high] - self.cleared[low],
                self.freed_chars[high] - self.freed_chars[low],
                self.freed_tokens[high] - self.freed_tokens[low],
            )
            out[key] = Run(rows[low], rows[high - 1], high - low, self.own[high - 1], sums)
        return out

    def _runs_row_by_row(
        self, start: int, group: int, keys: Sequence[int] | None
    ) -> dict[int, Run]:
        found: dict[int, list[int]] = {}
        for index, after in enumerate(self.after):
            found.setdefault((after - start) // group, []).append(index)
        wanted = found if keys is None else {key: found[key] for key in keys}
        out: dict[int, Run] = {}
        for key, indexes in wanted.items():
            rows = [self.rows[i] for i in indexes]
            own = any(self.own[i] for i in indexes)
            out[key] = Run(rows[0], rows[-1], len(rows), own, sums_of(rows))
        return out


@dataclass(frozen=True)
class Run:
    """The micro-compactions of one mark (the first and the last in the log, and how many),
    whether one is the scope's own, and their sums."""

    first: Compaction
    last: Compaction
    count: int
    own: bool
    sums: Sums
