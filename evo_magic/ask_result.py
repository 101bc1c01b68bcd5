"""What one `Session.ask` returns: its `AskFinished` event, and every event it emitted."""

from __future__ import annotations

from dataclasses import dataclass, field

from evo_magic.events import AskFinished, CompactionFinished, ContextSize, Event
from evo_magic.usage import Usage


@dataclass(frozen=True)
class AskResult:
    """What one `ask` did: its `AskFinished` event and every event it emitted."""

    finished: AskFinished
    events: list[Event] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The model's final text."""
        return self.finished.text

    @property
    def stop_reason(self) -> str:
        """ "end_turn", "max_turns", "max_tokens", "refusal", ... as the loop saw it."""
        return self.finished.stop_reason

    @property
    def turns(self) -> int:
        return self.finished.turns

    @property
    def usage(self) -> Usage:
        return self.finished.usage

    @property
    def duration(self) -> float:
        return self.finished.duration

    @property
    def context(self) -> ContextSize:
        return self.finished.context

    @property
    def compactions(self) -> list[CompactionFinished]:
        return [e for e in self.events if isinstance(e, CompactionFinished)]
