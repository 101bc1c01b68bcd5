"""Running sums over a meter log's rows, for what a meter says of them all: the cost of the calls
and summaries, the full compactions, and the compactions to list, micro-compactions grouped by
ask. A log only grows and its rows never change, so a `Tally` extends itself with the rows
added since it last looked: a live meter's refresh reads these at the cost of what is new.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from evo_magic.meter.log import CallPoint, Compaction

Item = Compaction | tuple[int, list[Compaction]]
"""A compaction to list: a full one, or an ask's micro-compactions as one group."""


@dataclass(frozen=True)
class Earlier:
    """The micro-compactions too old to list one ask at a time, summed up."""

    count: int
    asks: int
    freed_chars: int


@dataclass
class Tally:
    """What a meter sums over a log's rows, kept as they come (see the module docstring).

    `first` is the scope's first compaction: the list and its groups start there."""

    first: int = 0
    calls: int = 0
    """Calls folded in."""
    call_cost: list[float] = field(default_factory=lambda: [0.0])
    """Prefix sums of the calls' costs (an unpriced one counts 0) ..."""
    call_unpriced: list[int] = field(default_factory=lambda: [0])
    """... and of the calls without a price."""
    rows: int = 0
    """Compactions folded in."""
    full: list[int] = field(default_factory=list)
    """Where the full compactions are among the compactions."""
    full_cost: list[float] = field(default_factory=lambda: [0.0])
    full_unpriced: list[int] = field(default_factory=lambda: [0])
    items: list[Item] = field(default_factory=list)
    """The scope's compactions to list, in order (see `MeterData.timeline`)."""
    item_of_group: list[int] = field(default_factory=list)
    """Where each ask's group is among `items`, oldest ask first."""
    item_of_full: list[int] = field(default_factory=list)
    """Where each full compaction is among `items`."""
    group_freed: list[int] = field(default_factory=list)
    micro_rows: int = 0
    micro_freed: int = 0
    in_order: bool = True
    """False when an ask's micro-compactions came after a later ask's (then the list is
    worked out from every row, as `MeterData.timeline` does)."""

    def fold(
        self, calls: Sequence[CallPoint], compactions: Sequence[Compaction], first: int
    ) -> Tally:
        """This tally extended with the rows past those it saw, the list starting at
        compaction `first` (begun afresh when these are not the rows it saw, grown, or the
        list starts elsewhere)."""
        if self.calls > len(calls) or self.rows > len(compactions) or first != self.first:
            self.__dict__.update(vars(Tally(first)))
        for point in calls[self.calls :]:
            self.call_cost.append(self.call_cost[-1] + (point.cost_usd or 0.0))
            self.call_unpriced.append(self.call_unpriced[-1] + (point.cost_usd is None))
        self.calls = len(calls)
        for index in range(self.rows, len(compactions)):
            self._fold_row(index, compactions[index])
        self.rows = len(compactions)
        return self

    def _fold_row(self, index: int, row: Compaction) -> None:
        if not row.micro:
            self.full.append(index)
            self.full_cost.append(self.full_cost[-1] + (row.cost_usd or 0.0))
            self.full_unpriced.append(self.full_unpriced[-1] + (row.cost_usd is None))
        if index < self.first:
            return
        if not row.micro:
            self.item_of_full.append(len(self.items))
            self.items.append(row)
            return
        self.micro_rows += 1
        self.micro_freed += row.freed_chars
        last = self.items[self.item_of_group[-1]] if self.item_of_group else None
        if isinstance(last, tuple) and last[0] == row.turn:
            last[1].append(row)
            self.group_freed[-1] += row.freed_chars
            return
        if isinstance(last, tuple) and row.turn < last[0]:
            self.in_order = False
        self.item_of_group.append(len(self.items))
        self.items.append((row.turn, [row]))
        self.group_freed.append(row.freed_chars)

    def cost(self, calls: tuple[int, int], compactions: tuple[int, int]) -> float | None:
        """What the calls and the full compactions in these ranges cost (None: one had no
        price)."""
        c0, c1 = calls
        f0, f1 = (self._fulls_before(index) for index in compactions)
        unpriced = self.call_unpriced[c1] - self.call_unpriced[c0]
        if unpriced or self.full_unpriced[f1] - self.full_unpriced[f0]:
            return None
        spent = self.call_cost[c1] - self.call_cost[c0] + self.full_cost[f1] - self.full_cost[f0]
        return float(spent)

    def fulls(self, start: int, end: int) -> list[int]:
        """Where the full compactions among compactions `start` to `end` are."""
        return self.full[self._fulls_before(start) : self._fulls_before(end)]

    def _fulls_before(self, index: int) -> int:
        return bisect_left(self.full, index)

    def listing(self, micro_asks: int) -> tuple[list[Item], Earlier]:
        """The compactions to list (every full one; the micro-compactions of the newest
        `micro_asks` asks, one group each) and the earlier micro-compactions summed up."""
        groups = len(self.item_of_group)
        listed = min(max(micro_asks, 0), groups)
        if listed == groups:
            return list(self.items), Earlier(0, 0, 0)
        cut = self.item_of_group[groups - listed] if listed else len(self.items)
        fulls = self.item_of_full[: bisect_left(self.item_of_full, cut)]
        kept = [self.items[i] for i in fulls] + self.items[cut:]
        recent = [self.items[i] for i in self.item_of_group[groups - listed :]]
        rows = self.micro_rows - sum(len(item[1]) for item in recent if isinstance(item, tuple))
        freed = self.micro_freed - sum(self.group_freed[groups - listed :])
        return kept, Earlier(rows, groups - listed, freed)
