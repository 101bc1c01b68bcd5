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
summary are `compact.preview`; pins are `compact.pins`; what a strategy's result does to the
history (checked, then rewritten in place or replacing it) is `compact.outcome`; a summary
prepared in the background is `compact.background`.
"""

from __future__ import annotations

from collections.abc import Sequence

from evo_magic.catalog import context_window
from evo_magic.compact.attempt import Attempt
from evo_magic.compact.background import Prepared, share_of_limit
from evo_magic.compact.base import Context, Strategy, check_strategy, settings_of
from evo_magic.compact.contexts import Memos, summarisers
from evo_magic.compact.outcome import checked_result, pins_restored, rewrite_in_place
from evo_magic.compact.pins import carry_pins
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.preview import GivenSummary, Preview
from evo_magic.compact.requests import Requests
from evo_magic.compact.results import reason_of
from evo_magic.compact.server_side import ServerSide
from evo_magic.compact.services import CompactionServices
from evo_magic.compact.state import CompactState, retry_at
from evo_magic.compact.undo import Undoable, remember, restore
from evo_magic.events import (
    CompactionFinished,
    CompactionSkipped,
    CompactionStarted,
    Event,
    MicroCompacted,
    Notice,
)
from evo_magic.history import History
from evo_magic.measure import ContextSize
from evo_magic.messages import Message
from evo_magic.prompt_cache import PrefixTracker

__all__ = ["CompactionServices", "Compactor"]


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
        self.requests = Requests(self)
        self.undoable: Undoable | None = None
        """What undoing the last full compaction restores (`compact.undo`); None: nothing."""
        self.prepared = Prepared(services)  # a summary made off the critical path
        self.turn_note: str | None = None  # for the next call only (`Context.turn_notes`)
        self._strategies: tuple[Strategy, ...] = ()
        self._memos = Memos()
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
        self._memos.forget()
        self.state.strategies_changed()

    def configure(self, strategies: Sequence[Strategy]) -> bool:
        """Run `strategies` from the next call on, unless they are the running ones' settings
        (then the running ones stay, with what they know). True when they changed: live and
        replay both configure through here."""
        checked = [check_strategy(s) for s in strategies]
        if [settings_of(s) for s in checked] == [settings_of(s) for s in self._strategies]:
            return False
        self.strategies = checked
        return True

    def of(self, when: str) -> list[Strategy]:
        """The configured strategies that run at `when`, in order."""
        return [s for s in self._strategies if s.when == when]

    def pins(self) -> tuple[str, ...]:
        """The pinned block texts as they are now (no file read again)."""
        return self.services.pins(False)

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
        if not self.over_limit(size) or self.paused or not self.of("over_limit"):
            return False
        return not self.state.backing_off(size.chars)

    def reset(self) -> None:
        """Forget the compaction state and every strategy's notes (the history was emptied)."""
        self.state = CompactState()
        self.undoable = None
        self.requests.forget()
        self.prepared.forget()
        self._memos.forget()
        if self.cache is not None:
            self.cache.replaced()

    def close(self) -> None:
        """The session closes: charge a summary prepared in the background that no
        compaction took (`Prepared.settle`)."""
        self.prepared.settle(self.history.size(), closing=True)

    # -- before every model call ----------------------------------------------------------

    def before_call(self) -> None:
        """Every pin in the history, the every-call strategies, then the over-limit ones when
        they are due."""
        self._keep_pins()
        self.turn_note = None
        for strategy in self.of("every_call"):
            if not self.state.strategy_paused(strategy.name, self.policy):
                self.run(strategy, "every_call", None)
        size = self.history.size()
        share = share_of_limit(size.chars, size.tokens, self.policy.context_limit, self.token_limit)
        if self.prepared.dropped:
            self.prepared.settle(size)
        if not self.over_limit(size) and not self.paused:
            self.prepared.due(self.of("over_limit"), self.history.view(), share)
        notice = self.state.before_call(
            self.over_limit(size), self.policy, self.policy.limit_text(self.token_limit)
        )
        if notice is not None:
            self.emit(notice)
        if not self._compaction_due(size):
            return
        for strategy in self.of("over_limit"):
            self.run(strategy, "auto", None)
            if not self.over_limit(self.history.size()):
                return
        size = self.history.size()
        if self.over_limit(size):
            # Still too big (a huge request carried verbatim, nothing to cut): wait for growth.
            self.state.retry_after_chars = max(
                self.state.retry_after_chars, retry_at(size.chars, self.policy)
            )

    def _keep_pins(self) -> None:
        """After the API's own compaction, the pins it left out join the newest message (looked
        at once, when the newest message is the user's)."""
        view = self.history.view()
        if self._pins_due and view and view[-1].get("role") == "user":
            self._pins_due = False
            if (notice := carry_pins(self.history, self.pins())) is not None:
                self.emit(notice)

    def reactive(self) -> CompactionFinished | None:
        """Compact because the API refused the prompt as too long: the over-limit strategies
        in order until one acts, pause or back-off notwithstanding (the call cannot be sent
        as it is). Returns the last compaction event (None when no strategy ran)."""
        event: CompactionFinished | None = None
        for strategy in self.of("over_limit"):
            outcome = self.run(strategy, "auto", None)
            if isinstance(outcome, CompactionFinished):
                event = outcome
                if outcome.success:
                    break
        return event

    # -- on request (see `compact.requests`) ---------------------------------------------

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
        return self.requests.request(trigger, focus, strategy, given)

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
        return self.requests.preview(strategy, focus, summarise)

    # -- one strategy -------------------------------------------------------------------

    def run(
        self,
        strategy: Strategy,
        trigger: str,
        focus: str | None,
        given: GivenSummary | None = None,
    ) -> CompactionFinished | MicroCompacted | None:
        """Run one strategy and apply its result if it is valid; None when it did nothing."""
        history = self.history
        attempt = Attempt(strategy.name, strategy.when, trigger, focus, history.size())
        if trigger != "every_call":  # a compaction asked for, or due over the limit
            self.emit(CompactionStarted(trigger, focus, attempt.before, strategy.name))
        if len(history) == 0:
            return None
        ctx = self.context_for(strategy, trigger, focus, attempt.before, attempt, given)
        try:
            result = checked_result(strategy, ctx, attempt, given, history, self.snapshot)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # any failure of a strategy is a failed compaction
            self._memos.forget(strategy)  # its notes may assume the result was applied
            return self.failed(attempt, reason_of(strategy.name, exc))
        for note in ctx.notes:
            self.emit(Notice("strategy_note", f"{strategy.name}: {note}"))
        if ctx.turn_notes:
            self.turn_note = " ".join([*filter(None, [self.turn_note]), *ctx.turn_notes])
        if result is None:
            return None
        if result.restored:
            self.emit(pins_restored(strategy.name, result.restored))
        if result.changes is not None:
            edited = rewrite_in_place(
                history, self.cache, strategy.name, result, attempt.before, ctx
            )
            self.state.strategy_ok(strategy.name)
            self.emit(edited)
            return edited
        assert result.new is not None
        summary = ctx.summaries[-1] if ctx.summaries else None
        self.adopt(result.new, summary, trigger=trigger, snapshot=result.snapshot)
        self.requests.compacted(strategy)
        self.state.strategy_ok(strategy.name)
        event = attempt.succeeded(
            self.history.size(),
            summary=ctx.summaries[-1] if ctx.summaries else "",
            snapshot_path=result.snapshot,
            details=dict(ctx.details),
            fallback_for=self.server.fallback_of(strategy),
            summary_edited=given is not None and given.edited,
            summary_proposed=given.proposed if given is not None else None,
        )
        self.emit(event)
        return event

    def context_for(
        self,
        strategy: Strategy,
        trigger: str,
        focus: str | None,
        size: ContextSize,
        attempt: Attempt | None = None,
        given: GivenSummary | None = None,
    ) -> Context:
        """The context `strategy` runs with now: what it may know, its notes, and the session's
        summariser (counted in `attempt`; `given` stands in for it)."""
        history = self.history
        run = attempt or Attempt(strategy.name, strategy.when, trigger, focus, size)
        summarise, server_summarise = summarisers(self.services, run, given, self.server.summarised)

        return Context(
            focus=focus,
            trigger=trigger,
            size=size,
            context_limit=self.policy.context_limit,
            token_limit=self.token_limit,
            recent_files=tuple(self.state.recent_files),
            pending_request=history.pending_request,
            memo=self._memos.of(strategy, history.generation),
            tokens_per_char=history.tokens_per_char,
            compaction_due=self._compaction_due(size) and not self.state.consecutive_failures,
            cached_prefix=self.cache.prefix() if self.cache is not None else None,
            model=self.services.model(),
            auto_compaction=bool(self.of("over_limit")) and not self.paused,
            pins=self.services.pins(trigger != "every_call"),
            tools=self.services.tools(),
            _summarise=summarise,
            _tool_name=history.tool_name,
            _tool_results=history.tool_results,
            _history=history.view(),
            _save_output=self.services.save_output,
            _message_chars=history.message_chars,
            _read_file=self.services.read_file,
            _server_summarise=server_summarise,
            _prepared=lambda messages: self.prepared.take(messages, run),
        )

    # -- applying ------------------------------------------------------------------------

    def adopt(
        self, new: Sequence[Message], summary: str | None, trigger: str = "recorded",
        snapshot: str = "",
    ) -> None:  # fmt: skip
        """Replace the history with `new`, the result of a successful full compaction (by a
        strategy, the server, or one recorded that replay applies): the cache holds none of
        it, the state counts it (`CompactState.compacted`), and what it replaced is what an
        undo restores (`snapshot`: where it is on disk)."""
        self.undoable = remember(self.history.messages, self.state, snapshot)
        self.history.replace(new)
        self._pins_due = True  # the API's compaction holds none: looked at once
        if self.cache is not None:
            self.cache.replaced()
        after = self.history.size()
        still_over = retry_at(after.chars, self.policy) if self.over_limit(after) else None
        self.state.compacted(trigger, summary, still_over)

    def undo(self) -> CompactionFinished:
        """Put back the history and the state the last full compaction replaced, byte for
        byte, recorded as a compaction of its own (strategy "undo"; see `compact.undo`).
        ValueError when there is none to undo (none since the start, a reset, or the last
        undo: only the last can be undone, once)."""
        event, self.state = restore(self.history, self.cache, self.undoable)
        self.undoable = None
        self.emit(event)
        return event

    # -- failures -------------------------------------------------------------------------

    def failed(self, attempt: Attempt, reason: str) -> CompactionFinished:
        """A failed compaction: the history as it was, the event saying why (said once), the
        back-off counted (`CompactState.failed`) and an every-call strategy that keeps failing
        paused."""
        policy, state = self.policy, self.state
        event = attempt.failed(reason, self.server.stands_in_for(attempt.strategy))
        notices = [state.failed(attempt.trigger, retry_at(attempt.before.chars, policy), policy)]
        if attempt.trigger == "every_call":
            notices.append(state.strategy_failed(attempt.strategy, policy))
        self.emit(event)
        for notice in notices:
            if notice is not None:
                self.emit(notice)
        return event
