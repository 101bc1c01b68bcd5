"""The context a strategy runs with: what it may know of the session now, its notes (memo),
and the session's summarisers, counted in the attempt (a preview's given summary stands in for
the model). The compactor builds one per run (`Compactor.context_for`), live and in replay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo_magic.compact.attempt import Attempt
from evo_magic.compact.preview import GivenSummary
from evo_magic.compact.services import CompactionServices
from evo_magic.messages import Message


@dataclass
class Memos:
    """Each strategy's notes (`Context.memo`), kept while the history is unchanged: a new
    generation of the history starts them afresh."""

    generation: int = -1
    by_strategy: dict[int, dict[str, Any]] = field(default_factory=dict)

    def of(self, strategy: object, generation: int) -> dict[str, Any]:
        """The notes of `strategy` for the history at `generation` (empty when it changed)."""
        if generation != self.generation:
            self.by_strategy.clear()
            self.generation = generation
        return self.by_strategy.setdefault(id(strategy), {})

    def forget(self, strategy: object | None = None) -> None:
        """Drop the notes of `strategy`, or of every strategy when None."""
        if strategy is None:
            self.by_strategy.clear()
        else:
            self.by_strategy.pop(id(strategy), None)


def summarisers(
    services: CompactionServices,
    run: Attempt,
    given: GivenSummary | None,
    on_server_summary: Callable[[], None],
) -> tuple[
    Callable[[Sequence[Message], str | None], str],
    Callable[[Sequence[Message], str | None], dict[str, Any]],
]:
    """The session's summariser and the server's, each counting what it cost in `run`;
    `given` (a preview's summary) answers in place of the session's model."""

    def summarise(messages: Sequence[Message], focus: str | None) -> str:
        if given is not None:
            text = given.take(run.summaries)
            run.summaries += 1
            return text
        summary = services.summarise(messages, focus)
        run.add(summary)
        return summary.text

    def server_summarise(messages: Sequence[Message], focus: str | None) -> dict[str, Any]:
        block, summary = services.server_summarise(messages, focus)
        on_server_summary()
        run.add(summary)
        return block

    return summarise, server_summarise
