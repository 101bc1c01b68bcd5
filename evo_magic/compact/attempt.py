"""One attempt of one strategy at one compaction: what it was asked (trigger, focus), what it
used (its summaries, their tokens and cost) and the event that says how it ended. The
compactor makes one per run; a request refused outright and the server's failed summary are
attempts too, so every `CompactionFinished` is built here, one way."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from evo_magic.cost import add_costs
from evo_magic.events import CompactionFinished
from evo_magic.measure import ContextSize
from evo_magic.summariser import Summary
from evo_magic.usage import Usage


@dataclass
class Attempt:
    """One strategy's attempt (see the module docstring)."""

    strategy: str
    layer: str
    """The strategy's `when` ("on_request" for a request refused before any ran)."""
    trigger: str
    focus: str | None
    before: ContextSize
    started: float = field(default_factory=time.perf_counter)
    usage: Usage = Usage()
    cost_usd: float | None = 0.0
    """What its summaries cost: 0.0 until it asks for one, None once one had no price."""
    summaries: int = 0

    def add(self, summary: Summary) -> None:
        """A summary it asked for (its tokens and cost count with the attempt)."""
        self.usage = self.usage + summary.usage
        self.summaries += 1
        self.cost_usd = add_costs(self.cost_usd, summary.cost_usd)

    def succeeded(self, after: ContextSize, **facts: Any) -> CompactionFinished:
        """The event of an attempt that replaced the history (`facts`: summary, snapshot,
        details, fallback_for, summary_edited, summary_proposed)."""
        return CompactionFinished(
            trigger=self.trigger,
            focus=self.focus,
            before=self.before,
            after=after,
            success=True,
            duration=time.perf_counter() - self.started,
            summary_usage=self.usage,
            strategy=self.strategy,
            layer=self.layer,
            summary_cost_usd=self.cost_usd,
            **facts,
        )

    def failed(self, reason: str, fallback_for: str | None) -> CompactionFinished:
        """The event of an attempt that failed: the history as it was, and why."""
        return CompactionFinished(
            trigger=self.trigger,
            focus=self.focus,
            before=self.before,
            after=self.before,
            success=False,
            duration=time.perf_counter() - self.started,
            error=reason,
            summary_usage=self.usage,
            strategy=self.strategy,
            layer=self.layer,
            summary_cost_usd=self.cost_usd,
            fallback_for=fallback_for,
        )
