"""What a replayed call's row reports of what happened since the previous call: the tokens
cleared, the summaries paid for, the compactions so far, and the changes an observer is told."""

from __future__ import annotations

from collections.abc import Callable

from evo_magic.events import CompactionFinished, Event, MicroCompacted
from evo_magic.usage import Usage


class Tally:
    """Counts the compactor's events (it is the replayed compactor's `emit`) and the charges
    of summaries between one call's row and the next."""

    def __init__(self, summary_cost: Callable[[Usage], float | None]):
        self._summary_cost = summary_cost
        """The cost of a summarisation call of this usage (None: no price)."""
        self.cleared_tokens = 0
        """Tokens cleared since the previous row."""
        self.summary_cost: float | None = 0.0
        """What summaries cost since the previous row (None: one had no price)."""
        self.compactions = 0
        """Compactions so far (never reset)."""
        self.changes: list[Event] = []
        """What compacted since the previous call, for `on_call`."""

    def observe(self, event: Event) -> None:
        """One event of the replayed compactor."""
        if isinstance(event, MicroCompacted):
            if event.applied is None:
                # The modelled server clears again on every call while it is configured: its
                # row counts what is newly cleared (`ServerPart.serve`), not each clearing.
                self.cleared_tokens += event.cleared_tokens
            self.changes.append(event)
        elif isinstance(event, CompactionFinished):
            if event.success:
                self.changes.append(event)
                self.compacted(max(event.before.tokens - event.after.tokens, 0))
            if event.summary_usage.output_tokens or event.summary_usage.input_tokens:
                self.charge_summary(event.summary_usage)

    def compacted(self, cleared_tokens: int) -> None:
        """A compaction that cleared `cleared_tokens`."""
        self.compactions += 1
        self.cleared_tokens += cleared_tokens

    def charge_summary(self, usage: Usage) -> None:
        """Add a summarisation call to the cost of the next call's row (NA without a price)."""
        priced = self._summary_cost(usage)
        if priced is None or self.summary_cost is None:
            self.summary_cost = None
        else:
            self.summary_cost += priced

    def take_changes(self) -> tuple[Event, ...]:
        """The changes since the previous call; the next call starts with none."""
        changes, self.changes = tuple(self.changes), []
        return changes

    def row_written(self) -> None:
        """The row reported them: the next one counts afresh (compactions go on)."""
        self.cleared_tokens = 0
        self.summary_cost = 0.0
