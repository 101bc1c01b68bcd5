"""The Compactor runs the strategies and guarantees, for every one of them, what DESIGN promises.

- Before every model call: the `every_call` strategies in order, then, when the context is over
  the limit (and automatic compaction is neither paused nor backing off), the `over_limit`
  ones in order until it is under the limit.
- On request (`%compact`, `Session.compact`, the model's `compact` tool): the `on_request`
  strategies, or the `over_limit` ones when none is configured, until one acts.
- Every result is checked before it touches the history (`compact.results`): a request the API
  accepts, the pending request carried, smaller than before when it replaces the history. The
  original is on disk first (every message was recorded as it joined; a replaced history is
  also snapshotted whole). A strategy that raises or returns something invalid is a failed
  compaction: the history stays byte-identical, the failure is said once, and automatic
  compaction backs off (and pauses after `max_failures` in a row) instead of retrying.

The same Compactor runs live (a `Session`) and in replay: whoever runs it gives it its
`CompactionServices`. What it remembers across compactions is the `CompactState` (one writer,
`compact.state`); the server strategies' part is `compact.server_side`; a preview and a given
summary are `compact.preview`; pins are `compact.pins`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evo_magic.catalog import context_window
from evo_magic.compact.base import Context, Strategy, check_strategy, settings_of
from evo_magic.compact.pins import carried_pins, missing_pins, restore_edited_pins, with_pins
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.preview import GivenSummary, Preview, stand_in
from evo_magic.compact.results import (
    CompactionRefused,
    block_id,
    check_edits,
    check_replacement,
    in_place_changes,
)
from evo_magic.compact.server_side import ServerSide
from evo_magic.compact.state import CompactState, retry_at
from evo_magic.cost import add_costs
from evo_magic.events import (
    CompactionFinished,
    CompactionSkipped,
    CompactionStarted,
    Event,
    MicroCompacted,
    Notice,
)
from evo_magic.history import History
from evo_magic.measure import ContextSize, to_json
from evo_magic.messages import Message
from evo_magic.prompt_cache import PrefixTracker
from evo_magic.summariser import Summary
from evo_magic.usage import Usage

Summarise = Callable[[Sequence[Message], str | None], Summary]
ServerSummarise = Callable[[Sequence[Message], str | None], tuple[dict[str, Any], Summary]]
"""Asks the API for its own summary: the compaction block, and its text and cost."""


def _no_file(path: str, max_chars: int) -> str | None:
    raise RuntimeError("there is no workspace to read files from")


def _no_server(messages: Sequence[Message], focus: str | None) -> tuple[dict[str, Any], Summary]:
    raise RuntimeError("this session cannot ask the API for a summary")


@dataclass(frozen=True)
class CompactionServices:
    """What the compactor asks of whoever runs it (a session, a replay): the one list of its
    collaborators, each with what it does where there is none."""

    emit: Callable[[Event], None]
    """Receives every event (the session records it and shows it)."""
    summarise: Summarise
    """The summariser (`Summary` with its usage and cost)."""
    save_output: Callable[[str, str], str]
    """Saves a tool output whole; returns the path shown to the model."""
    snapshot: Callable[[list[Message]], str] = lambda messages: ""
    """Writes a history about to be replaced; returns where ("" for nowhere)."""
    read_file: Callable[[str, int], str | None] = _no_file
    """Reads a workspace file as the file tools do (None: over the size given)."""
    model: Callable[[], str | None] = lambda: None
    """The model the session calls now (its window, its prices)."""
    server_summarise: ServerSummarise = _no_server
    pins: Callable[[bool], tuple[str, ...]] = lambda reread: ()
    """The pinned block texts (`reread`: a full compaction follows, pinned files read again)."""


@dataclass
class _Run:
    """What one run of one strategy used: its summaries and their cost."""

    usage: Usage = Usage()
    cost_usd: float | None = None
    summaries: int = 0

    def add(self, summary: Summary) -> None:
        self.usage = self.usage + summary.usage
        self.summaries += 1
        first = self.summaries == 1
        self.cost_usd = summary.cost_usd if first else add_costs(self.cost_usd, summary.cost_usd)


class Compactor:
    """Runs a session's strategies over its history. See the module docstring."""

    def __init__(
        self,
        history: History,
        services: CompactionServices,
        *,
        policy: CompactPolicy,
        strategies: Sequence[Strategy] = (),
        cache: PrefixTracker | None = None,
    ):
        self.history = history
        self.services = services
        self.cache = cache
        """Where the prompt cache of the history ends (kept current through every edit)."""
        self.state = CompactState()
        self._policy = policy
        self.server = ServerSide(self)
        self._pins_due = False
        """The history was replaced (the API's compaction keeps none of the pins): the next
        call looks for them once, not every call."""
        self._compacted_by: tuple[Any, ...] | None = None
        """The history a full compaction left: its generation, length, strategy and pins."""
        self._strategies: tuple[Strategy, ...] = ()
        self._memos: dict[int, dict[str, Any]] = {}
        self._memo_generation = -1
        self._failures: dict[int, int] = {}
        self.strategies = strategies

    def emit(self, event: Event) -> None:
        self.services.emit(event)

    def snapshot(self, messages: list[Message]) -> str:
        """Write a history about to be replaced whole; where it went ("" for nowhere)."""
        return self.services.snapshot(messages)

    # -- configuration -------------------------------------------------------------------

    @property
    def strategies(self) -> tuple[Strategy, ...]:
        return self._strategies

    @strategies.setter
    def strategies(self, strategies: Sequence[Strategy]) -> None:
        checked = tuple(check_strategy(s) for s in strategies)
        self._strategies = checked
        self._memos.clear()
        self._failures.clear()

    def configure(self, strategies: Sequence[Strategy]) -> bool:
        """Run `strategies` from the next call on, unless they are the running ones' settings
        (then the running ones stay, with what they know). True when they changed: live and
        replay both configure through here."""
        checked = [check_strategy(s) for s in strategies]
        if [settings_of(s) for s in checked] == [settings_of(s) for s in self._strategies]:
            return False
        self.strategies = checked
        return True

    def _of(self, when: str) -> list[Strategy]:
        return [s for s in self._strategies if s.when == when]

    @property
    def policy(self) -> CompactPolicy:
        return self._policy

    @policy.setter
    def policy(self, policy: CompactPolicy) -> None:
        self._policy = policy
        self.state.limits_changed()

    @property
    def token_limit(self) -> int | None:
        """The token limit in tokens (a share of the model's window resolved), or None."""
        model = self.services.model()
        return self.policy.token_limit_for(context_window(model) if model else None)

    def over_limit(self, size: ContextSize) -> bool:
        """True when `size` is over the session's limit (characters, or tokens when set)."""
        return size.over(self.policy.context_limit, self.token_limit)

    @property
    def paused(self) -> bool:
        return self.state.paused(self.policy)

    @property
    def thrashing(self) -> bool:
        """True when automatic compaction paused because the context kept refilling."""
        return self.state.thrashing(self.policy)

    def _compaction_due(self, size: ContextSize) -> bool:
        """True when the over-limit strategies run at this size: over the limit, automatic
        compaction not paused, and not backing off after a failure (waiting for growth)."""
        if not self.over_limit(size) or self.paused or not self._of("over_limit"):
            return False
        return not self.state.backing_off(size.chars)

    def reset(self) -> None:
        """Forget the compaction state and every strategy's notes (the history was emptied)."""
        self.state = CompactState()
        self._compacted_by = None
        self._memos.clear()
        self._failures.clear()
        if self.cache is not None:
            self.cache.replaced()

    # -- before every model call ----------------------------------------------------------

    def before_call(self) -> None:
        """Every pin in the history, the every-call strategies, then the over-limit ones when
        they are due."""
        self._keep_pins()
        for strategy in self._of("every_call"):
            if self._failures.get(id(strategy), 0) < self.policy.max_failures:
                self._run(strategy, "every_call", None)
        size = self.history.size()
        notice = self.state.before_call(self.over_limit(size), self.policy, self._limit_text())
        if notice is not None:
            self.emit(notice)
        if not self._compaction_due(size):
            return
        for strategy in self._of("over_limit"):
            self._run(strategy, "auto", None)
            if not self.over_limit(self.history.size()):
                return
        size = self.history.size()
        if self.over_limit(size):
            # Still too big (a huge request carried verbatim, nothing to cut): wait for growth.
            self.state.retry_after_chars = max(
                self.state.retry_after_chars, retry_at(size.chars, self.policy)
            )

    def _limit_text(self) -> str:
        limit = f"{self.policy.context_limit:,} characters"
        return limit + (f" / {self.token_limit:,} tokens" if self.token_limit else "")

    def _keep_pins(self) -> None:
        """After the API's own compaction, the pins it left out join the newest message."""
        if not self._pins_due or not len(self.history):
            return
        if self.history.view()[-1].get("role") != "user":
            return  # looked at once the newest message is the user's
        self._pins_due = False
        carried = carried_pins(self.history.view(), self.services.pins(False))
        if carried is None:
            return
        message, count = carried
        self.history.rewrite({len(self.history) - 1: message})
        self.emit(
            Notice(
                "pins_carried",
                f"{count} pinned text(s) were not in the history (the API's compaction keeps "
                "only its summary and what follows it); they were added to the newest message.",
            )
        )

    def reactive(self) -> CompactionFinished | None:
        """Compact because the API refused the prompt as too long: the over-limit strategies
        in order until one acts, pause or back-off notwithstanding (the call cannot be sent
        as it is). Returns the last compaction event (None when no strategy ran)."""
        event: CompactionFinished | None = None
        for strategy in self._of("over_limit"):
            outcome = self._run(strategy, "auto", None)
            if isinstance(outcome, CompactionFinished):
                event = outcome
                if outcome.success:
                    break
        return event

    # -- on request ---------------------------------------------------------------------

    def request(
        self,
        trigger: str,
        focus: str | None,
        strategy: Strategy | None = None,
        given: GivenSummary | None = None,
    ) -> CompactionFinished | CompactionSkipped:
        """Compact now for the user ("user") or the model's compact tool ("model").

        Runs `strategy`, or the on-request strategies (the over-limit ones when none is
        configured), in order until one acts. Returns the event of the one that acted, or of
        the last failure; `CompactionSkipped` when there was nothing to compact (an empty
        history; nothing new since a strategy's own last compaction, which it skips). With
        `given`, its text is the summary (no summariser call): only the first strategy runs
        (the one `preview` shows), and it must ask for one summary.
        """
        candidates = [check_strategy(strategy)] if strategy else self.manual_strategies()
        if given is not None:
            candidates = candidates[:1]
        if candidates and not len(self.history):
            return self._skipped(trigger, focus, candidates[-1].name, "the history is empty")
        refusal = self._request_refusal(trigger, candidates)
        if refusal:
            name = candidates[0].name if candidates else "none"
            before = self.history.size()
            return self.failed(
                trigger, focus, before, time.perf_counter(), name, "on_request", refusal
            )
        event: CompactionFinished | None = None
        reason = "no strategy found anything to do"
        for candidate in candidates:
            if done := self.already_done(candidate):
                reason = done
                continue
            outcome = self._run(candidate, trigger, focus, given)
            fallback = self.server.rejected_for(candidate, outcome)
            if fallback is not None:
                outcome = self._run(fallback, trigger, focus, given)
            if isinstance(outcome, CompactionFinished):
                event = outcome
                if outcome.success:
                    break
        if event is None:
            return self._skipped(trigger, focus, candidates[-1].name, reason)
        return event

    def already_done(self, strategy: Strategy) -> str | None:
        """Why `strategy`, asked now, has nothing to work on: the history is what its own last
        full compaction left, with the same pins (compacting again would only summarise the
        summary). None otherwise."""
        if self._compacted_by == self._mark(strategy):
            return f"nothing new since the last compaction by {strategy.name}"
        return None

    def _mark(self, strategy: Strategy) -> tuple[Any, ...]:
        history = self.history
        return (history.generation, len(history), strategy.name, self.services.pins(False))

    def _skipped(
        self, trigger: str, focus: str | None, strategy: str, reason: str
    ) -> CompactionSkipped:
        """Nothing to compact: said (and recorded) once, not a failure, no back-off."""
        event = CompactionSkipped(trigger, focus, reason, strategy)
        self.emit(event)
        return event

    def manual_strategies(self) -> list[Strategy]:
        """What a request runs: the on-request strategies, else the over-limit ones."""
        return self._of("on_request") or self._of("over_limit")

    def _request_refusal(self, trigger: str, candidates: list[Strategy]) -> str | None:
        if not candidates:
            return (
                "no strategy answers compaction requests: configure one whose `when` is "
                "'on_request' or 'over_limit'"
            )
        if trigger != "model":
            return None
        if self.paused:
            return (
                f"not run: automatic compaction is paused after {self.state.consecutive_failures} "
                "failures in a row; the user can compact by hand"
            )
        size = self.history.size()
        if self.state.backing_off(size.chars):
            return (
                "not run: the last compaction failed and the context has not grown enough since "
                f"({size.chars:,} of {self.state.retry_after_chars:,} characters); carry on"
            )
        return None

    # -- preview --------------------------------------------------------------------------

    def preview(
        self,
        strategy: Strategy | None = None,
        focus: str | None = None,
        *,
        summarise: bool = False,
    ) -> Preview:
        """What compacting now would do, without doing it: the strategy's result, checked as a
        real compaction checks it, nothing applied, nothing recorded.

        `strategy` defaults to the one a manual request would run first. Without `summarise`,
        a summary is a stand-in of the strategy's input size (no model call); with it, the
        summariser is called (and paid for) but the history stays as it is.
        """
        chosen = (
            check_strategy(strategy) if strategy else next(iter(self.manual_strategies()), None)
        )
        if chosen is None:
            raise ValueError("no strategy to preview: configure one or pass strategy=...")
        before = self.history.size()
        view = self.history.view()
        unchanged = Preview(chosen.name, chosen.when, before, before, list(view), None)
        nothing = "the history is empty" if not len(view) else self.already_done(chosen)
        if nothing:
            return replace(unchanged, reason=nothing)
        ctx = self.context_for(chosen, "user", focus, before, _Run())
        ctx.memo = dict(ctx.memo)  # a preview leaves the strategy's notes as they were
        if not summarise:
            ctx._summarise = stand_in
        try:
            result = chosen.compact(view, ctx)
            if result is None:
                return unchanged
            new = with_pins(list(result), ctx.pins)  # a requested compaction replaces
            pending = self.history.pending_request
            check_replacement(new, view, pending, before.chars, must_shrink=True)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            return replace(unchanged, error=_reason(chosen, exc))
        return Preview(
            chosen.name, chosen.when, before, self.history.projected_size(new, replaced=True),
            new, None, replaces=True, original=list(view), summaries=tuple(ctx.summaries),
            stand_in=not summarise and bool(ctx.summaries),
        )  # fmt: skip

    # -- one strategy -------------------------------------------------------------------

    def _run(
        self,
        strategy: Strategy,
        trigger: str,
        focus: str | None,
        given: GivenSummary | None = None,
    ) -> CompactionFinished | MicroCompacted | None:
        """Run one strategy and apply its result if it is valid; None when it did nothing."""
        history = self.history
        before = history.size()
        started = time.perf_counter()
        if trigger != "every_call":  # a compaction asked for, or due over the limit
            self.emit(CompactionStarted(trigger, focus, before, strategy.name))
        if len(history) == 0:
            return None
        run = _Run()
        view = history.view()
        ctx = self.context_for(strategy, trigger, focus, before, run, given)
        # Before a call, an every-call strategy edits in place; run on request, any strategy
        # replaces the history (a compaction the user asked for, snapshotted and checked).
        in_place = strategy.when == "every_call" and trigger == "every_call"
        try:
            result = strategy.compact(view, ctx)
            if given is not None and not run.summaries:
                raise CompactionRefused(
                    "it makes no summary, so there is none to replace with the given one"
                )
            if result is None:
                return None
            changes = in_place_changes(result, view) if in_place else None
            if changes is not None:
                changes, restored = restore_edited_pins(changes, view, ctx.pins)
                edits = check_edits(changes, view, history.pending_request)
            else:
                new = list(result)
                restored = len(missing_pins(new, ctx.pins))
                new = with_pins(new, ctx.pins)
                pending = history.pending_request
                check_replacement(new, view, pending, before.chars, trigger != "every_call")
                # The original whole on disk before it is replaced (or no replacement).
                snapshot = self.snapshot(history.messages)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # any failure of a strategy is a failed compaction
            self._memos.pop(id(strategy), None)  # its notes may assume the result was applied
            reason = _reason(strategy, exc)
            return self.failed(
                trigger, focus, before, started, strategy.name, strategy.when, reason,
                run.usage, run.cost_usd,
            )  # fmt: skip
        if restored:
            self.emit(
                Notice(
                    "pins_restored",
                    f"The strategy {strategy.name!r} left out {restored} pinned text(s); they "
                    "were put back verbatim (a pinned text is in every request).",
                )
            )
        if changes is not None:
            return self._apply_edits(strategy, changes, edits, before, ctx) if edits else None
        self.adopt(new, ctx.summaries[-1] if ctx.summaries else None, trigger=trigger)
        self._compacted_by = self._mark(strategy)
        return self._finished(strategy, trigger, focus, before, started, ctx, run, snapshot, given)

    def context_for(
        self,
        strategy: Strategy,
        trigger: str,
        focus: str | None,
        size: ContextSize,
        run: _Run,
        given: GivenSummary | None = None,
    ) -> Context:
        """The context `strategy` runs with now: what it may know, its notes, and the session's
        summariser (counted in `run`; `given` stands in for it)."""
        history = self.history
        if self._memo_generation != history.generation:
            self._memos.clear()
            self._memo_generation = history.generation

        def summarise(messages: Sequence[Message], focus: str | None) -> str:
            if given is not None:
                text = given.take(run.summaries)
                run.summaries += 1
                return text
            summary = self.services.summarise(messages, focus)
            run.add(summary)
            return summary.text

        def server_summarise(messages: Sequence[Message], focus: str | None) -> dict[str, Any]:
            block, summary = self.services.server_summarise(messages, focus)
            self.server.summarised()
            run.add(summary)
            return block

        return Context(
            focus=focus,
            trigger=trigger,
            size=size,
            context_limit=self.policy.context_limit,
            token_limit=self.token_limit,
            recent_files=tuple(self.state.recent_files),
            pending_request=history.pending_request,
            memo=self._memos.setdefault(id(strategy), {}),
            tokens_per_char=history.tokens_per_char,
            compaction_due=self._compaction_due(size) and not self.state.consecutive_failures,
            cached_prefix=self.cache.prefix() if self.cache is not None else None,
            model=self.services.model(),
            auto_compaction=bool(self._of("over_limit")) and not self.paused,
            pins=self.services.pins(trigger != "every_call"),
            _summarise=summarise,
            _tool_name=history.tool_name,
            _tool_results=history.tool_results,
            _history=history.view(),
            _save_output=self.services.save_output,
            _message_chars=history.message_chars,
            _read_file=self.services.read_file,
            _server_summarise=server_summarise,
        )

    # -- applying ------------------------------------------------------------------------

    def _apply_edits(
        self,
        strategy: Strategy,
        changes: dict[int, Message],
        edits: list[dict[str, Any]],
        before: ContextSize,
        ctx: Context,
    ) -> MicroCompacted:
        first = min(edit["index"] for edit in edits)
        invalidated = ctx.cache_invalidated_tokens(first)  # measured before the rewrite
        self.history.rewrite(changes)
        if self.cache is not None:
            self.cache.edited(first, invalidated)
        after = self.history.size()
        ids = (block_id(edit["block"]) for edit in edits)
        freed = before.chars - after.chars
        event = MicroCompacted(
            cleared_ids=tuple(dict.fromkeys(i for i in ids if i)),
            chars_freed=freed,
            before=before,
            after=after,
            strategy=strategy.name,
            edits_json=to_json(edits),
            cleared_tokens=self.history.tokens_of_chars(max(freed, 0)),
            cache_invalidated_tokens=invalidated,
        )
        self._failures.pop(id(strategy), None)
        self.emit(event)
        return event

    def adopt(self, new: Sequence[Message], summary: str | None, trigger: str = "recorded") -> None:
        """Replace the history with `new`, the result of a successful full compaction (by a
        strategy, the server, or one recorded that replay applies): the cache holds none of
        it, and the state counts it (`CompactState.compacted`)."""
        self.history.replace(new)
        self._pins_due = True  # the API's compaction holds none: looked at once
        if self.cache is not None:
            self.cache.replaced()
        after = self.history.size()
        still_over = retry_at(after.chars, self.policy) if self.over_limit(after) else None
        self.state.compacted(trigger, summary, still_over)

    def _finished(
        self,
        strategy: Strategy,
        trigger: str,
        focus: str | None,
        before: ContextSize,
        started: float,
        ctx: Context,
        run: _Run,
        snapshot: str,
        given: GivenSummary | None,
    ) -> CompactionFinished:
        self._failures.pop(id(strategy), None)
        event = CompactionFinished(
            trigger=trigger,
            focus=focus,
            before=before,
            after=self.history.size(),
            success=True,
            duration=time.perf_counter() - started,
            summary=ctx.summaries[-1] if ctx.summaries else "",
            snapshot_path=snapshot,
            summary_usage=run.usage,
            strategy=strategy.name,
            layer=strategy.when,
            summary_cost_usd=run.cost_usd,
            details=dict(ctx.details),
            fallback_for=self.server.fallback_of(strategy),
            summary_edited=given is not None and given.edited,
            summary_proposed=given.proposed if given is not None else None,
        )
        self.emit(event)
        return event

    # -- failures -------------------------------------------------------------------------

    def failed(
        self,
        trigger: str,
        focus: str | None,
        before: ContextSize,
        started: float,
        strategy: str,
        layer: str,
        reason: str,
        usage: Usage | None = None,
        cost: float | None = None,
    ) -> CompactionFinished:
        """A failed compaction: the history as it was, the event saying why (said once), the
        back-off counted (`CompactState.failed`) and an every-call strategy that keeps failing
        paused."""
        event = CompactionFinished(
            trigger=trigger,
            focus=focus,
            before=before,
            after=before,
            success=False,
            duration=time.perf_counter() - started,
            error=reason,
            summary_usage=usage or Usage(),
            strategy=strategy,
            layer=layer,
            summary_cost_usd=cost,
            fallback_for=self.server.stands_in_for(strategy),
        )
        notice = self.state.failed(trigger, retry_at(before.chars, self.policy), self.policy)
        self.emit(event)
        if notice is not None:
            self.emit(notice)
        if trigger == "every_call":
            self._every_call_failed(strategy)
        return event

    def _every_call_failed(self, name: str) -> None:
        strategy = next((s for s in self._strategies if s.name == name), None)
        if strategy is None:
            return
        failures = self._failures[id(strategy)] = self._failures.get(id(strategy), 0) + 1
        if failures == self.policy.max_failures:
            self.emit(
                Notice(
                    "strategy_paused",
                    f"The strategy {name!r} failed {failures} times in a row and no longer runs "
                    "before each call; set the strategies again or reset the session to retry it.",
                )
            )


def _reason(strategy: Strategy, exc: Exception) -> str:
    if isinstance(exc, CompactionRefused):
        return f"{strategy.name}: {exc}"
    known = type(exc).__name__ in ("ModelError", "SummaryError")
    detail = str(exc) if known else f"{type(exc).__name__}: {exc}"
    return f"{strategy.name}: {detail}" if known else f"{strategy.name} raised {detail}"
