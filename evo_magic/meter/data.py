"""What one meter shows: a session's `MeterLog` seen through a `Scope` at one moment, with the
context now, the limit and what it holds by kind. The notebook's meter (widget, static HTML,
text) and `Session.context_figure()` are renderings of one `MeterData`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from evo_magic.events import ContextSize
from evo_magic.meter.composition import Share
from evo_magic.meter.log import CallPoint, Compaction, Followed, MeterLog, Scope
from evo_magic.meter.rows import Rows
from evo_magic.meter.tally import Earlier, Item, Tally

MICRO_ASKS = 20
"""A meter lists the micro-compactions of this many asks at most (the newest), one group per
ask; earlier ones are summed up in one line. Full compactions are always listed."""


@dataclass
class MeterData:
    """The numbers one meter shows: a log seen through a scope, at one moment."""

    session_id: str
    context_limit: int
    token_limit: int | None
    current: ContextSize
    """The context now (for a closed scope: when it closed)."""
    scope: Scope
    calls: Sequence[CallPoint] = field(default_factory=list)
    """Every call of the session up to the scope's end (the chart shows them all)."""
    compactions: Sequence[Compaction] = field(default_factory=list)
    """Every compaction up to the scope's end."""
    holds: list[Share] = field(default_factory=list)
    """What the context holds now, by kind."""
    session_cost_usd: float | None = None
    tokens_per_char: float = 0.25
    """The session's tokens per character of message JSON (to state the limit in tokens)."""
    tally: Tally | None = field(default=None, compare=False, repr=False)
    """Sums over the rows (a live meter's, kept between its refreshes; made when None)."""

    @classmethod
    def of(
        cls,
        log: MeterLog,
        scope: Scope,
        session_id: str,
        context_limit: int,
        token_limit: int | None,
        current: ContextSize,
        holds: list[Share] | None = None,
        tokens_per_char: float = 0.25,
        tally: Tally | None = None,
    ) -> MeterData:
        """The data of `log` through `scope`; `tally`: a live meter's sums from its earlier
        refreshes, extended with the new rows. Its calls and compactions are the log's, read
        in place up to the scope's end as it is now (`Rows`, nothing copied: a refresh costs
        what changed, not the session's length); a log only appends, so later events leave
        them be."""
        calls = Rows(log.calls, 0, scope.end_call)
        compactions = Rows(log.compactions, 0, scope.end_compaction)
        tally = (tally or Tally()).fold(calls, compactions, scope.first_compaction)
        session_cost = tally.cost((0, len(calls)), (0, len(compactions)))
        return cls(
            session_id,
            context_limit,
            token_limit,
            current,
            replace(scope),
            calls,
            compactions,
            list(holds or []),
            session_cost,
            tokens_per_char,
            tally,
        )

    @classmethod
    def of_session(
        cls,
        session: Followed,
        log: MeterLog,
        scope: Scope | None = None,
        tally: Tally | None = None,
    ) -> MeterData:
        """The data of `session`'s `log` through `scope` (None: the whole session), now
        (`tally`: see `of`)."""
        return cls.of(
            log,
            scope if scope is not None else log.whole(),
            session.session_id,
            session.policy.context_limit,
            session.token_limit,
            session.context(),
            log.compose() if log.compose else [],
            session.history.tokens_per_char,
            tally,
        )

    # -- the scope's own story -----------------------------------------------------------

    @property
    def own_calls(self) -> Sequence[CallPoint]:
        """The scope's model calls (`calls` also holds those before it; read in place)."""
        return Rows(self.calls, self.scope.first_call)

    @property
    def own_compactions(self) -> Sequence[Compaction]:
        """The scope's compactions, full and micro (`compactions` also holds earlier ones;
        read in place)."""
        return Rows(self.compactions, self.scope.first_compaction)

    @cached_property
    def full(self) -> list[Compaction]:
        """The scope's full compactions (failed ones included)."""
        first = self.scope.first_compaction
        return [self.compactions[i] for i in self.sums().fulls(first, len(self.compactions))]

    @property
    def micro(self) -> list[Compaction]:
        """The scope's micro-compactions."""
        return [c for c in self.own_compactions if c.micro]

    @property
    def micro_count(self) -> int:
        """How many micro-compactions the scope holds."""
        return len(self.compactions) - self.scope.first_compaction - len(self.full)

    @cached_property
    def cost_usd(self) -> float | None:
        """What the scope's model calls and summaries cost (None when one had no price)."""
        calls = (self.scope.first_call, len(self.calls))
        return self.sums().cost(calls, (self.scope.first_compaction, len(self.compactions)))

    def sums(self) -> Tally:
        """The sums over the rows (`tally` brought up to them; a tally of its own when there
        is none, or when the one given has seen rows past these: a later refresh's)."""
        tally, first = self.tally, self.scope.first_compaction
        if tally is None or tally.calls > len(self.calls) or tally.rows > len(self.compactions):
            self.tally = tally = Tally(first)
        return tally.fold(self.calls, self.compactions, first)

    @property
    def limit_tokens(self) -> int:
        """The limit on the basis of every share the meter shows, the whole prompt in tokens:
        the token limit, or the prompt's tokens when its messages reach the character limit
        (at the session's tokens per character), whichever comes first."""
        chars_limit = self.current.tokens + round(
            (self.context_limit - self.current.chars) * self.tokens_per_char
        )
        limits = [max(chars_limit, 1)] + ([self.token_limit] if self.token_limit else [])
        return min(limits)

    def fill(self) -> float:
        """How full the context is: the prompt's tokens as a share of `limit_tokens`."""
        return self.current.tokens / self.limit_tokens

    @property
    def asks(self) -> tuple[int, int]:
        """The first and last ask whose model calls the scope holds ((0, 0): none)."""
        turns = [c.turn for c in self.own_calls]
        return (min(turns), max(turns)) if turns else (0, 0)

    def listing(self, micro_asks: int = MICRO_ASKS) -> tuple[list[Item], Earlier]:
        """What `timeline` lists, and the earlier micro-compactions summed up: from the sums
        kept as rows come (a refresh reads only the newest), the same as `timeline` says."""
        sums = self.sums()
        if sums.in_order:
            return sums.listing(micro_asks)
        listed, earlier = self.timeline(micro_asks)
        asks = len({row.turn for row in earlier})
        return listed, Earlier(len(earlier), asks, sum(row.freed_chars for row in earlier))

    def timeline(
        self, micro_asks: int = MICRO_ASKS
    ) -> tuple[list[Compaction | tuple[int, list[Compaction]]], list[Compaction]]:
        """The scope's compactions in order, to list: each full one on its own (all of them),
        the micro-compactions of an ask as one group (placed where the first of them
        happened), for the newest `micro_asks` asks; and apart, the micro-compactions of the
        asks before those (to sum up, not list: a long session's list stays short)."""
        out: list[Compaction | tuple[int, list[Compaction]]] = []
        groups: dict[int, list[Compaction]] = {}
        for row in self.own_compactions:
            if not row.micro:
                out.append(row)
            elif row.turn in groups:
                groups[row.turn].append(row)
            else:
                groups[row.turn] = [row]
                out.append((row.turn, groups[row.turn]))
        listed = set(sorted(groups)[-micro_asks:]) if micro_asks > 0 else set()
        earlier = [row for turn, rows in groups.items() if turn not in listed for row in rows]
        kept = [item for item in out if isinstance(item, Compaction) or item[0] in listed]
        return kept, earlier
