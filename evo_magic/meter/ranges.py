"""What a chart's column shows of any run of calls, read at C speed.

A long session's chart groups its calls into at most 160 columns, and regroups them all when
the calls per column grow; each column shows the largest of its calls. Read call by call in
Python, a regrouping read the whole session (46 ms at 10,000 calls), and the newest column was
read again at every refresh. Each call's numbers are kept in lists of plain integers as calls
come (a log's calls only grow), so a column is a few `max` over slices of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from evo_magic.meter.log import CallPoint


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
    """Each call's tokens sent, tokens before, and ask, in the order of the calls."""

    tokens: list[int] = field(default_factory=list)
    before: list[int] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)

    def follow(self, calls: Sequence[CallPoint]) -> None:
        """Extended with the calls past those seen (begun afresh when there are fewer)."""
        if len(self.tokens) > len(calls):
            self.tokens, self.before, self.turns = [], [], []
        new = calls[len(self.tokens) :]
        self.tokens += [point.tokens for point in new]
        self.before += [before_tokens(point) for point in new]
        self.turns += [point.turn for point in new]

    def run(self, start: int, end: int) -> RunNumbers:
        """The numbers of calls `start` to `end` (not included; `start < end`)."""
        tokens, turns = self.tokens[start:end], self.turns[start:end]
        top = max(tokens)
        biggest = start + tokens.index(top)
        return RunNumbers(top, max(self.before[start:end]), biggest, (min(turns), max(turns)))


def before_tokens(point: CallPoint) -> int:
    """The prompt's tokens before the strategies that ran just before the call (its own
    tokens when they removed nothing): the call's count plus what they removed, estimated."""
    return point.tokens + max(point.before.tokens - point.sent.tokens, 0)
