"""Compaction asked for (`%compact`, `Session.compact`, the model's `compact` tool), and its
preview: which strategies answer a request, what is skipped as nothing to compact, what the
model's tool is refused while automatic compaction backs off, and what compacting now would do.

A request runs the compactor's own `run` of each strategy (the same checks and application as
before a call); this part decides which, and says why when none acts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from evo_magic.compact.attempt import Attempt
from evo_magic.compact.base import Context, Strategy, check_strategy
from evo_magic.compact.pins import with_pins
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.preview import GivenSummary, Preview, SummaryProposal, stand_in
from evo_magic.compact.results import check_replacement, reason_of
from evo_magic.compact.server_side import ServerSide
from evo_magic.compact.state import CompactState
from evo_magic.events import CompactionFinished, CompactionSkipped, Event, MicroCompacted
from evo_magic.history import History
from evo_magic.measure import ContextSize

NO_REQUEST_STRATEGY = (
    "no strategy answers compaction requests: configure one whose `when` is 'on_request' or "
    "'over_limit'"
)


class _Compactor(Protocol):
    """The parts of the compactor a request uses."""

    history: History
    state: CompactState
    server: ServerSide

    @property
    def policy(self) -> CompactPolicy: ...

    @property
    def paused(self) -> bool: ...

    def of(self, when: str) -> list[Strategy]: ...

    def emit(self, event: Event) -> None: ...

    def run(
        self, strategy: Strategy, trigger: str, focus: str | None, given: GivenSummary | None = ...
    ) -> CompactionFinished | MicroCompacted | None: ...

    def context_for(
        self, strategy: Strategy, trigger: str, focus: str | None, size: ContextSize
    ) -> Context: ...

    def failed(self, attempt: Attempt, reason: str) -> CompactionFinished: ...

    def pins(self) -> tuple[str, ...]: ...


class Requests:
    """The compaction requests of one compactor (see the module docstring)."""

    def __init__(self, compactor: _Compactor):
        self._compactor = compactor
        self._compacted_by: tuple[Any, ...] | None = None
        """The history a full compaction left: its generation, length, strategy and pins."""
        self._proposal: tuple[SummaryProposal, tuple[int, int, int]] | None = None
        """The last proposal, and the history it was made for."""

    def strategies(self) -> list[Strategy]:
        """What a request runs: the on-request strategies, else the over-limit ones."""
        compactor = self._compactor
        return compactor.of("on_request") or compactor.of("over_limit")

    def compacted(self, strategy: Strategy) -> None:
        """`strategy` just replaced the history: asking it again before anything changes is
        nothing to compact, and a proposal made before is for another history."""
        self._compacted_by = self._mark(strategy)
        self._proposal = None

    def forget(self) -> None:
        """The history was emptied: nothing was compacted."""
        self._compacted_by = None

    def already_done(self, strategy: Strategy) -> str | None:
        """Why `strategy`, asked now, has nothing to work on: the history is what its own last
        full compaction left, with the same pins (compacting again would only summarise the
        summary). None otherwise."""
        if self._compacted_by == self._mark(strategy):
            return f"nothing new since the last compaction by {strategy.name}"
        return None

    def _mark(self, strategy: Strategy) -> tuple[Any, ...]:
        history = self._compactor.history
        return (history.generation, len(history), strategy.name, self._compactor.pins())

    def request(
        self,
        trigger: str,
        focus: str | None,
        strategy: Strategy | None = None,
        given: GivenSummary | None = None,
    ) -> CompactionFinished | CompactionSkipped:
        """See `Compactor.request`."""
        compactor = self._compactor
        candidates = [check_strategy(strategy)] if strategy else self.strategies()
        if given is not None:
            candidates = candidates[:1]
        if candidates and not len(compactor.history):
            return self._skipped(trigger, focus, candidates[-1].name, "the history is empty")
        refusal = self._refusal(trigger, candidates)
        if refusal:
            name = candidates[0].name if candidates else "none"
            attempt = Attempt(name, "on_request", trigger, focus, compactor.history.size())
            return compactor.failed(attempt, refusal)
        event: CompactionFinished | None = None
        reason = "no strategy found anything to do"
        for candidate in candidates:
            if done := self.already_done(candidate):
                reason = done
                continue
            event = self._run(candidate, trigger, focus, given) or event
            if event is not None and event.success:
                break
        if event is None:
            return self._skipped(trigger, focus, candidates[-1].name, reason)
        return event

    def _run(
        self, strategy: Strategy, trigger: str, focus: str | None, given: GivenSummary | None
    ) -> CompactionFinished | None:
        """One candidate; when the API refused its feature, its fallback (from now on)."""
        compactor = self._compactor
        outcome = compactor.run(strategy, trigger, focus, given)
        fallback = compactor.server.rejected_for(strategy, outcome)
        if fallback is not None:
            outcome = compactor.run(fallback, trigger, focus, given)
        return outcome if isinstance(outcome, CompactionFinished) else None

    def _skipped(
        self, trigger: str, focus: str | None, strategy: str, reason: str
    ) -> CompactionSkipped:
        """Nothing to compact: said (and recorded) once, not a failure, no back-off."""
        event = CompactionSkipped(trigger, focus, reason, strategy)
        self._compactor.emit(event)
        return event

    def _refusal(self, trigger: str, candidates: Sequence[Strategy]) -> str | None:
        """Why this request is refused outright: no strategy answers requests, or the model
        asks while automatic compaction is paused or backing off (the user may always ask)."""
        if not candidates:
            return NO_REQUEST_STRATEGY
        if trigger != "model":
            return None
        compactor = self._compactor
        state = compactor.state
        if compactor.paused:
            return (
                f"not run: automatic compaction is paused after {state.consecutive_failures} "
                "failures in a row; the user can compact by hand"
            )
        size = compactor.history.size()
        if state.backing_off(size.chars):
            return (
                "not run: the last compaction failed and the context has not grown enough since "
                f"({size.chars:,} of {state.retry_after_chars:,} characters); carry on"
            )
        return None

    def propose(self, strategy: Strategy | None, focus: str | None) -> SummaryProposal:
        """The summary a request would apply now, made by the real summariser with the very
        request it would send, the history unchanged; kept as `proposal` until the history
        changes. ValueError when the strategy would fail or makes no single summary."""
        preview = self.preview(strategy, focus, summarise=True)
        if preview.error:
            raise ValueError(f"no summary to propose: {preview.error}")
        if len(preview.summaries) != 1:
            made = "makes several summaries" if preview.summaries else "makes no summary"
            if not preview.acts and not preview.summaries:
                made = f"has nothing to compact now ({preview.reason or 'no change'})"
            raise ValueError(f"no summary to propose: the strategy {preview.strategy!r} {made}")
        proposal = SummaryProposal(
            preview.summaries[0], focus, preview.strategy, preview.before, preview.after, strategy
        )
        self._proposal = (proposal, self._history_mark())
        return proposal

    def proposal(self) -> SummaryProposal | None:
        """The last proposal while the history is as it was then (None after it changed)."""
        if self._proposal is None or self._proposal[1] != self._history_mark():
            return None
        return self._proposal[0]

    def _history_mark(self) -> tuple[int, int, int]:
        """Changes whenever the history does (a message, a result, an edit, a replacement)."""
        history = self._compactor.history
        return (history.generation, len(history), history.size().chars)

    def preview(self, strategy: Strategy | None, focus: str | None, summarise: bool) -> Preview:
        """See `Compactor.preview`."""
        manual = self.strategies()
        chosen = check_strategy(strategy) if strategy else (manual[0] if manual else None)
        if chosen is None:
            raise ValueError("no strategy to preview: configure one or pass strategy=...")
        history = self._compactor.history
        before, view = history.size(), history.view()
        unchanged = Preview(chosen.name, chosen.when, before, before, list(view), None)
        nothing = "the history is empty" if not len(view) else self.already_done(chosen)
        if nothing:
            return replace(unchanged, reason=nothing)
        ctx = self._compactor.context_for(chosen, "user", focus, before)
        ctx.memo = dict(ctx.memo)  # a preview leaves the strategy's notes as they were
        if not summarise:
            ctx._summarise = stand_in
        try:
            result = chosen.compact(view, ctx)
            if result is None:
                return unchanged
            new = with_pins(list(result), ctx.pins)  # a requested compaction replaces
            check_replacement(new, view, history.pending_request, before.chars, must_shrink=True)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            return replace(unchanged, error=reason_of(chosen.name, exc))
        return Preview(
            chosen.name, chosen.when, before, history.projected_size(new, replaced=True),
            new, None, replaces=True, original=list(view), summaries=tuple(ctx.summaries),
            stand_in=not summarise and bool(ctx.summaries),
        )  # fmt: skip
