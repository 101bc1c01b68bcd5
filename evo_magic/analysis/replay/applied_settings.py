"""The settings a replayed conversation is under at each point: its recorded settings timeline
(`timeline`), each record applied from where it was written, as the setting being replayed
takes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evo_magic.analysis.replay.options import ReplaySettings
from evo_magic.analysis.replay.pricing import Pricing
from evo_magic.analysis.replay.summaries import Summaries
from evo_magic.analysis.replay.timeline import Change
from evo_magic.compact.base import Strategy
from evo_magic.compact.compactor import Compactor
from evo_magic.compact.pins import Pin
from evo_magic.strategies.registry import NotRebuildable, rebuild


class AppliedSettings:
    """Applies a conversation's settings timeline to one run: under "recorded" every record;
    under another setting the policy, caching and prices (unless replay was given its own),
    never strategies. Pins and the outputs' folder are part of the conversation: applied under
    every setting."""

    def __init__(
        self,
        timeline: Sequence[Change],
        given: ReplaySettings,
        recorded_mode: bool,
        outputs: str,
        parts: tuple[Compactor, Summaries, Pricing],
    ):
        self._timeline = list(timeline)
        self._given = given
        self._recorded_mode = recorded_mode
        self._compactor, self._summaries, self._pricing = parts
        self.pins: dict[int, Pin] = {}
        """The pins the session had at this point (from its pin and unpin records)."""
        self.outputs = outputs
        """The folder saved outputs are shown in (the session's own, once its start is read)."""
        self.unrebuilt: list[str] = []
        """Why recorded strategies were not rebuilt (each a reason)."""
        self.tools: tuple[str, ...] = ()
        """The names of the tools the session offered at this point (none when it does not
        say: a recording of another agent)."""

    def until(self, line: int | None) -> None:
        """Apply the records written before `line` of the file (None: an item with no line
        applies none)."""
        timeline = self._timeline
        while timeline and line is not None and timeline[0].line < line:
            self.apply(timeline.pop(0))

    def apply(self, change: Change) -> None:
        """A recorded setting, from here on (see the class docstring). Prices given to replay
        cost every call; the recorded ones still steer the decisions under "recorded" (the
        cache-aware rule weighs them)."""
        name, value = change.name, change.value
        if name in ("pin", "unpin"):
            if isinstance(value, Pin):
                self.pins[value.id] = value
            else:
                self.pins.pop(value, None)
        elif name == "strategies":
            if self._recorded_mode:
                self._compactor.strategies = self._recorded_strategies(value)
        elif name == "tools":  # what the recorded requests held: replay counts the difference
            self.tools = value
        elif name == "outputs":  # where this session's saved outputs are: as live showed them
            self.outputs = value
        elif getattr(self._given, name) is None or self._recorded_mode:
            self._follow(name, value)

    def _follow(self, name: str, value: Any) -> None:
        """A recorded policy, cache or prices record, taken by the run."""
        pricing = self._pricing
        if name == "policy":
            self._compactor.policy = value
            self._summaries.use_policy(value)
        elif name == "cache":
            pricing.cache_settings = value
        elif name == "prices":
            pricing.decision_prices = value
            if self._given.prices is None:
                pricing.prices = value

    def _recorded_strategies(self, described: list[dict[str, Any]] | None) -> list[Strategy]:
        """The session's own strategies, rebuilt from the registry; the every-call ones run
        (the others' compactions are recorded, and replayed as they happened)."""
        if described is None:  # schema 1: the seed's pipeline; its compactions are recorded
            return []
        made = []
        for item in described:
            try:
                made.append(rebuild(item, trust=self._given.trust))
            except NotRebuildable as exc:
                self.unrebuilt.append(str(exc))
        # A record is written only when they changed: they start afresh, as they did live.
        return [s if s.when == "every_call" else _Recorded(s) for s in made]


class _Recorded:
    """A strategy of the session whose compactions are recorded: present, so that the others
    decide as they did live (an over-limit compaction due), but never acting itself (the
    recorded replacement is applied where it happened)."""

    def __init__(self, strategy: Strategy):
        self.strategy = strategy
        self.name = strategy.name
        self.when = strategy.when

    def compact(self, messages: Sequence[dict[str, Any]], ctx: Any) -> None:
        return None
