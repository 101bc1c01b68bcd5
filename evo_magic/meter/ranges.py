"""The largest value of any run of consecutive calls, in constant time, for a chart's columns.

A long session's chart groups its calls into at most 160 columns, and regroups them all when
the calls per column grow; each column shows the largest of its calls. Read call by call, a
regrouping reads the whole session, and the newest column is read again at every refresh.
A sparse table answers "the largest of values `start` to `end`" with two lookups, and a list
that only grows (a meter log's calls) extends it with the new values only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from evo_magic.meter.log import CallPoint

T = TypeVar("T")


@dataclass
class RangeMax(Generic[T]):
    """The largest of any run of a growing list's values (level k holds the largest of each
    run of 2**k values; values compare as Python compares them, tuples included)."""

    levels: list[list[T]] = field(default_factory=lambda: [[]])

    def __len__(self) -> int:
        return len(self.levels[0])

    def extend(self, values: Iterable[T]) -> None:
        """The list grown by `values` (each level extended with the runs that end in them)."""
        base = self.levels[0]
        base.extend(values)
        k = 1
        while 1 << k <= len(base):
            if len(self.levels) == k:
                self.levels.append([])
            below, level, half = self.levels[k - 1], self.levels[k], 1 << (k - 1)
            end = len(base) - (1 << k) + 1
            level.extend(map(max, below[len(level) : end], below[len(level) + half : end + half]))
            k += 1

    def largest(self, start: int, end: int) -> T:
        """The largest of values `start` to `end` (not included; `start < end`)."""
        k = (end - start).bit_length() - 1
        level = self.levels[k]
        return max(level[start], level[end - (1 << k)])


@dataclass
class CallRanges:
    """What a column shows of its calls, for any run of a log's calls in constant time."""

    tokens: RangeMax[tuple[int, int]] = field(default_factory=RangeMax)
    """(tokens sent, minus the index): the largest call, the first of equals."""
    before: RangeMax[int] = field(default_factory=RangeMax)
    """The tokens before the strategies that ran just before each call."""
    last_turn: RangeMax[int] = field(default_factory=RangeMax)
    first_turn: RangeMax[int] = field(default_factory=RangeMax)
    """Minus each call's ask (the largest: the first ask)."""

    def follow(self, calls: Sequence[CallPoint]) -> None:
        """Extended with the calls past those seen (begun afresh when there are fewer)."""
        if len(self.before) > len(calls):
            self.__dict__.update(vars(CallRanges()))
        seen = len(self.before)
        new = calls[seen:]
        self.tokens.extend((p.tokens, -(seen + i)) for i, p in enumerate(new))
        self.before.extend(before_tokens(p) for p in new)
        self.last_turn.extend(p.turn for p in new)
        self.first_turn.extend(-p.turn for p in new)

    def biggest(self, start: int, end: int) -> int:
        """The index of the call that sent the most among calls `start` to `end` (the
        first of those that sent as much)."""
        return -self.tokens.largest(start, end)[1]

    def asks(self, start: int, end: int) -> tuple[int, int]:
        """The first and the last ask of calls `start` to `end`."""
        return -self.first_turn.largest(start, end), self.last_turn.largest(start, end)


def before_tokens(point: CallPoint) -> int:
    """The prompt's tokens before the strategies that ran just before the call (its own
    tokens when they removed nothing): the call's count plus what they removed, estimated."""
    return point.tokens + max(point.before.tokens - point.sent.tokens, 0)
