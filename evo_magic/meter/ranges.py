"""What a chart's column shows of any run of calls, from a few numbers whatever its length.

A long session's chart groups its calls into at most 160 columns, and regroups them all when
the calls per column grow; each column shows the largest of its calls. Read call by call, a
regrouping read the whole session (46 ms at 10,000 calls in Python; then every call still, in
C, as `max` over slices of numbers kept as calls came). Each number is kept as calls come in a
`RangeMax`: the largest of any run of them is read from at most four kept maxima (or, within a
block of `BLOCK` calls, from that run itself), so a regrouping reads some 160 x 4 numbers of
each kind however long the session, and a call adds a constant amount of work on average. The
numbers are machine integers in arrays, not Python objects: the few a column reads sit near
each other in memory, not scattered through a long session's heap.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from evo_magic.meter.log import CallPoint

BLOCK = 32
"""Values per block of a `RangeMax`: a run within one block is read whole (at most this many
values); a longer one from its ends' maxima within their blocks and the blocks' between."""
PLACES = 1 << 32
"""Calls a chart ranks at most (a call's place is kept beside its tokens in one integer)."""
MOST_TOKENS = (1 << 31) - 1
"""Tokens a call is ranked by at most (a thousand times any model's context window)."""


def _numbers() -> array[int]:
    return array("q")


@dataclass
class RangeMax:
    """The largest of any run of a list of integers that only grows (a range-maximum query
    in constant time): the values in blocks of `BLOCK`, with each value's largest from its
    block's start and, once its block is complete, to its block's end, and the largest of
    every run of 1, 2, 4, ... complete blocks (a sparse table, grown as blocks complete)."""

    values: array[int] = field(default_factory=_numbers)
    from_start: array[int] = field(default_factory=_numbers)
    """Each value's largest from its block's start to it."""
    to_end: array[int] = field(default_factory=_numbers)
    """Each value's largest from it to its block's end (complete blocks only)."""
    blocks: list[array[int]] = field(default_factory=list)
    """`blocks[k][b]`: the largest of blocks `b` to `b + 2**k - 1`."""
    read: int = 0
    """Values and maxima read by `max` so far (what a run costs, for tests)."""

    def append(self, value: int) -> None:
        """`value` joins, after the others."""
        at = len(self.values)
        self.values.append(value)
        if at % BLOCK:
            last = self.from_start[-1]
            self.from_start.append(last if last >= value else value)
        else:
            self.from_start.append(value)
        if at % BLOCK == BLOCK - 1:
            self._complete()

    def _complete(self) -> None:
        """The newest block is complete: its values' maxima to its end, and the runs of
        blocks that end with it."""
        self.to_end.extend(list(accumulate(reversed(self.values[-BLOCK:]), max))[::-1])
        if not self.blocks:
            self.blocks.append(_numbers())
        self.blocks[0].append(self.from_start[-1])
        newest, k = len(self.blocks[0]) - 1, 1
        while newest - (1 << k) + 1 >= 0:  # the run of 2**k blocks ending with the newest
            if len(self.blocks) == k:
                self.blocks.append(_numbers())
            half, first = self.blocks[k - 1], newest - (1 << k) + 1
            self.blocks[k].append(max(half[first], half[first + (1 << (k - 1))]))
            k += 1

    def max(self, start: int, end: int) -> int:
        """The largest of values `start` to `end` (not included; `start < end`)."""
        first_block, last_block = start // BLOCK, (end - 1) // BLOCK
        if first_block == last_block:
            self.read += end - start
            return max(self.values[start:end])
        head, tail = self.to_end[start], self.from_start[end - 1]
        best = head if head >= tail else tail
        self.read += 2
        if last_block - first_block > 1:  # whole blocks between: two runs that cover them
            low, high = first_block + 1, last_block
            k = (high - low).bit_length() - 1
            runs = self.blocks[k]
            left, right = runs[low], runs[high - (1 << k)]
            middle = left if left >= right else right
            best = best if best >= middle else middle
            self.read += 2
        return best


@dataclass(frozen=True)
class RunNumbers:
    """What a column shows of its run of calls."""

    tokens: int
    """The most tokens one of them sent."""
    before: int
    """The most tokens before the strategies that ran just before one of them."""
    biggest: int
    """Where the call that sent the most is (the first of those that sent as much)."""
    asks: tuple[int, int]
    """The first and the last ask of the calls."""


@dataclass
class CallNumbers:
    """Each call's tokens sent (ranked with its place, to find the largest's), tokens before,
    and ask, in the order of the calls, each in a `RangeMax`; the asks are read from the run's
    ends while they only grow (as a session's do)."""

    tokens: RangeMax = field(default_factory=RangeMax)
    """Each call's `ranked` tokens: the largest is the first of those that sent the most."""
    before: RangeMax = field(default_factory=RangeMax)
    turns: RangeMax = field(default_factory=RangeMax)
    minus_turns: RangeMax = field(default_factory=RangeMax)
    """Minus each call's ask (the largest is minus the run's first ask)."""
    turns_grow: bool = True
    """True while no call's ask is before the one before it."""

    @property
    def count(self) -> int:
        """Calls seen."""
        return len(self.before.values)

    @property
    def read(self) -> int:
        """Numbers read by `run` so far (what a column costs, for tests)."""
        ranges = (self.tokens, self.before, self.turns, self.minus_turns)
        return sum(numbers.read for numbers in ranges)

    def follow(self, calls: Sequence[CallPoint]) -> None:
        """Extended with the calls past those seen (begun afresh when there are fewer)."""
        if self.count > len(calls):
            self.__dict__.update(vars(CallNumbers()))
        turns = self.turns.values
        for place, point in enumerate(calls[self.count :], self.count):
            if turns and point.turn < turns[-1]:
                self.turns_grow = False
            self.tokens.append(ranked(point.tokens, place))
            self.before.append(before_tokens(point))
            self.turns.append(point.turn)
            self.minus_turns.append(-point.turn)

    def run(self, start: int, end: int) -> RunNumbers:
        """The numbers of calls `start` to `end` (not included; `start < end`)."""
        tokens, biggest = unranked(self.tokens.max(start, end))
        if self.turns_grow:
            turns = self.turns.values
            self.turns.read += 2
            asks = (turns[start], turns[end - 1])
        else:
            asks = (-self.minus_turns.max(start, end), self.turns.max(start, end))
        return RunNumbers(tokens, self.before.max(start, end), biggest, asks)


def ranked(tokens: int, place: int) -> int:
    """A call's tokens and place as one integer, larger for more tokens, then for an earlier
    place (tokens past `MOST_TOKENS` rank as that many)."""
    return (min(max(tokens, 0), MOST_TOKENS) * PLACES) + (PLACES - 1 - place)


def unranked(rank: int) -> tuple[int, int]:
    """The tokens and the place of a `ranked` integer."""
    tokens, place = divmod(rank, PLACES)
    return tokens, PLACES - 1 - place


def before_tokens(point: CallPoint) -> int:
    """The prompt's tokens before the strategies that ran just before the call (its own
    tokens when they removed nothing): the call's count plus what they removed, estimated."""
    return point.tokens + max(point.before.tokens - point.sent.tokens, 0)
