"""The Compactor runs the strategies and guarantees, for every one of them, what DESIGN promises.

- Before every model call: the `every_call` strategies in order, then, when the context is over
  the limit (and automatic compaction is neither paused nor backing off), the `over_limit`
  ones in order until it is under the limit.
- On request (`%compact`, `Session.compact`, the model's `compact` tool): the `on_request`
  strategies, or the `over_limit` ones when none is configured, until one acts.
- Every result is checked before it touches the history: a request the API accepts, the
  pending request carried, smaller than before when it replaces the history. The original is
  on disk first (every message was recorded as it joined; a replaced history is also
  snapshotted whole). A strategy that raises or returns something invalid is a failed
  compaction: the history stays byte-identical, the failure is said once, and automatic
  compaction backs off (and pauses after `max_failures` in a row) instead of retrying.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evo_magic.compact import server
from evo_magic.compact.base import (
    Context,
    Edited,
    Message,
    Strategy,
    check_strategy,
    server_edit,
)
from evo_magic.compact.pins import missing_pins, with_pins
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.state import CompactState
from evo_magic.compact.validate import history_problem, message_problem
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
from evo_magic.measure import ContextSize, message_chars, to_json
from evo_magic.messages import content_blocks, holds_text
from evo_magic.models.catalog import context_window
from evo_magic.prompt_cache import PrefixTracker
from evo_magic.render import plural, size
from evo_magic.summariser import Summary
from evo_magic.usage import Usage

# A refill: over the limit again within this many calls of an automatic full compaction.
REFILL_CALLS = 2
# After a failure, automatic compaction waits until the context grew by this share of the limit.
RETRY_GROWTH = 0.1

Summarise = Callable[[Sequence[Message], str | None], Summary]
ServerSummarise = Callable[[Sequence[Message], str | None], tuple[dict[str, Any], Summary]]
"""Asks the API for its own summary: the compaction block, and its text and cost."""


class CompactionRefused(Exception):
    """A strategy's result cannot replace the history; the message says why."""


@dataclass
class _Run:
    """What one run of one strategy used: its summaries' cost."""

    usage: Usage = Usage()
    cost_usd: float | None = None
    summaries: int = 0


class Compactor:
    """Runs a session's strategies over its history. See the module docstring."""

    def __init__(
        self,
        history: History,
        *,
        emit: Callable[[Event], None],
        summarise: Summarise,
        snapshot: Callable[[list[Message]], str],
        save_output: Callable[[str, str], str],
        policy: CompactPolicy,
        strategies: Sequence[Strategy],
        state: CompactState | None = None,
        cache: PrefixTracker | None = None,
        read_file: Callable[[str, int], str | None] | None = None,
        model: Callable[[], str | None] = lambda: None,
        server_summarise: ServerSummarise | None = None,
        pins: Callable[[bool], tuple[str, ...]] = lambda reread: (),
    ):
        self.history = history
        self._server_summarise = server_summarise
        self._block_betas: set[str] = set()
        """Betas of the compaction blocks the server made in this session."""
        self._fallback_for: dict[int, str] = {}
        """id of a fallback strategy -> the server strategy it stands in for."""
        self.cache = cache
        """Where the prompt cache of the history ends (kept current through every edit)."""
        self.state = state or CompactState()
        self.policy = policy
        self._emit = emit
        self._summarise = summarise
        self._snapshot = snapshot
        self._save_output = save_output
        self._read_file = read_file
        self._model = model
        self._pins = pins
        self._pins_due = False
        """The history was replaced (the API's compaction keeps none of the pins): the next
        call looks for them once, not every call."""
        self._strategies: tuple[Strategy, ...] = ()
        self._memos: dict[int, dict[str, Any]] = {}
        self._memo_generation = -1
        self._failures: dict[int, int] = {}
        self.strategies = strategies

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

    def _of(self, when: str) -> list[Strategy]:
        return [s for s in self._strategies if s.when == when]

    @property
    def policy(self) -> CompactPolicy:
        return self._policy

    @policy.setter
    def policy(self, policy: CompactPolicy) -> None:
        self._policy = policy
        self.state.refills = 0  # new limits: a pause for refilling is lifted

    @property
    def token_limit(self) -> int | None:
        """The token limit in tokens (a share of the model's window resolved), or None."""
        model = self._model()
        return self.policy.token_limit_for(context_window(model) if model else None)

    def over_limit(self, size: ContextSize) -> bool:
        """True when `size` is over the session's limit (characters, or tokens when set)."""
        return size.over(self.policy.context_limit, self.token_limit)

    @property
    def paused(self) -> bool:
        return self.state.consecutive_failures >= self.policy.max_failures or self.thrashing

    @property
    def thrashing(self) -> bool:
        """True when automatic compaction paused because the context kept refilling."""
        return 0 < self.policy.max_refills <= self.state.refills

    def _compaction_due(self, size: ContextSize) -> bool:
        """True when the over-limit strategies run at this size: over the limit, automatic
        compaction not paused, and not backing off after a failure (waiting for growth)."""
        if not self.over_limit(size) or self.paused or not self._of("over_limit"):
            return False
        return size.chars >= self.state.retry_after_chars

    def reset(self) -> None:
        """Forget the compaction state and every strategy's notes (the history was emptied)."""
        self.state = CompactState()
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
        self._note_refill(size)
        if not self._compaction_due(size):
            return
        for strategy in self._of("over_limit"):
            self._run(strategy, "auto", None)
            if not self.over_limit(self.history.size()):
                return
        size = self.history.size()
        if self.over_limit(size):
            # Still too big (a huge request carried verbatim, nothing to cut): wait for growth.
            self.state.retry_after_chars = max(self.state.retry_after_chars, self._retry_at(size))

    def _keep_pins(self) -> None:
        """After the API's own compaction (which keeps only its block and what follows), the pins
        it left out join the newest user message: the model has
        not seen it, so nothing sent before is rewritten, and text after tool results keeps
        the API's rules."""
        if not self._pins_due:
            return
        texts = self._pins(False)
        view = self.history.view()
        if not texts or not len(view) or view[-1].get("role") != "user":
            return
        self._pins_due = False
        missing = missing_pins(view, texts)
        if not missing:
            return
        last = view[-1]
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        blocks += [{"type": "text", "text": text} for text in missing]
        self.history.rewrite({len(view) - 1: {**last, "content": blocks}})
        self._emit(
            Notice(
                "pins_carried",
                f"{len(missing)} pinned text(s) were not in the history (the API's compaction "
                "keeps only its summary and what follows it); they were added to the newest "
                "message.",
            )
        )

    def _note_refill(self, size: ContextSize) -> None:
        """Thrash detection: over the limit again within two calls of an automatic full
        compaction is a refill; `max_refills` in a row pause automatic compaction."""
        state = self.state
        if state.calls_since_auto is None:
            return
        state.calls_since_auto += 1
        if state.calls_since_auto > REFILL_CALLS:
            state.calls_since_auto, state.refills = None, 0  # it held: the streak is over
            return
        if not self.over_limit(size) or self.paused:
            return
        state.calls_since_auto = None
        state.refills += 1
        if self.thrashing:
            limit = f"{self.policy.context_limit:,} characters" + (
                f" / {self.token_limit:,} tokens" if self.token_limit else ""
            )
            self._emit(
                Notice(
                    "auto_compaction_thrashing",
                    f"Automatic compaction is paused: the context was over the limit ({limit}) "
                    f"again within {REFILL_CALLS} calls after each of the last "
                    f"{state.refills} compactions, so compacting again would not help. Raise "
                    "context_limit / token_limit, choose a strategy that keeps less, or raise "
                    "max_refills; %compact (Session.compact) still works.",
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

    # -- server strategies (see evo_magic.compact.server) ---------------------------------

    def server_params(self, model: str, *, offline: bool = False) -> server.ServerParams:
        """What the server strategies add to the next request to `model`; those the capability
        table says it lacks (all of them for an `offline` stand-in, which has no server) give
        way to their fallbacks first (ValueError without one)."""
        if offline:
            lacking = server.server_strategies(self._strategies)
            source = "the offline model has no server"
        else:
            lacking = server.unsupported(self._strategies, model)
            source = "the capability table says so"
        if lacking:
            names = ", ".join(s.name for s in lacking)
            why = f"the model {model} does not offer {names} ({source})"
            if not self.fall_back(lacking, why):
                raise ValueError(f"{why}, and no fallback is configured")
        params = server.request_params(self._strategies)
        if self._block_betas and server.holds_compaction(self.history.view()):
            # A compaction block goes back with the beta that made it, whatever runs now.
            betas = tuple(dict.fromkeys([*params.betas, *sorted(self._block_betas)]))
            params = replace(params, betas=betas)
        return params

    def fall_back(self, failing: Sequence[Strategy], why: str) -> bool:
        """Replace each failing server strategy by its fallback from now on, saying so once;
        False (nothing changed) when one has no fallback."""
        chosen = server.replaced_by_fallbacks(self._strategies, failing)
        if chosen is None:
            return False
        for strategy in failing:
            self._fallback_for[id(strategy.fallback)] = strategy.name  # type: ignore[attr-defined]
        self.strategies = chosen
        ran = ", ".join(f"{s.fallback.name} for {s.name}" for s in failing)  # type: ignore[attr-defined]
        self._emit(Notice("server_fallback", f"Falling back to {ran} from now on: {why}."))
        return True

    def _rejected_for(self, strategy: Strategy, outcome: object) -> Strategy | None:
        """When the API refused an on-demand server strategy's feature (a failure naming it)
        and it has a fallback: the fallback, which takes over from now on; else None."""
        edit = server_edit(strategy)
        fallback = getattr(strategy, "fallback", None)
        if edit is None or fallback is None or not isinstance(outcome, CompactionFinished):
            return None
        if outcome.success or not server.names_feature(outcome.error or "", edit):
            return None
        self.fall_back([strategy], f"the API rejected {strategy.name}: {outcome.error}")
        return fallback

    def stands_in_for(self, name: str) -> str | None:
        """The server strategy that the configured strategy `name` is the fallback of."""
        return next(
            (self._fallback_for[id(s)] for s in self._strategies if s.name == name
             and id(s) in self._fallback_for),
            None,
        )  # fmt: skip

    def server_compacted(
        self,
        before: ContextSize,
        summary: str | None,
        usage: Usage,
        cost: float | None,
        after_tokens: int | None,
    ) -> CompactionFinished:
        """The last reply holds a server's compaction block: the history becomes what the server
        reads from now on (the reply from that block on, then the pending request verbatim),
        the original on disk first. A block with null content failed: it stays, as it came."""
        started = time.perf_counter()
        self._block_betas.add(server.COMPACT_BETA)
        name = next((s.name for s in server.server_strategies(self._strategies)), "server-compact")
        if summary is None:
            return self._failed(
                "server", None, before, started, name, "every_call",
                "the server's summary failed (its compaction block has null content)",
                _Run(usage, cost, 1), count=False,
            )  # fmt: skip
        messages = self.history.messages
        snapshot = self._snapshot(messages)
        new = [server.from_compaction(messages[-1])]
        pending = self.history.pending_request
        if messages[-1]["content"][-1].get("type") == "compaction" and pending:
            ctx = Context.for_messages(new, pending_request=pending)
            new += ctx.pending_request_message()
        self.history.replace(new)
        self._pins_due = True
        if self.cache is not None:
            self.cache.replaced()
        self.state.has_compacted = True
        self.state.last_summary = summary
        self.state.compact_count += 1
        after = self.history.size()
        if after_tokens:
            after = replace(after, tokens=after_tokens, tokens_exact=True)
        event = CompactionFinished(
            trigger="server", focus=None, before=before, after=after, success=True,
            duration=time.perf_counter() - started, summary=summary, snapshot_path=snapshot,
            summary_usage=usage, strategy=name, layer="every_call", summary_cost_usd=cost,
        )  # fmt: skip
        self._emit(event)
        return event

    def server_cleared(self, applied: Sequence[dict[str, Any]], sent: ContextSize) -> None:
        """What the server's clearing edits did to the prompt of the last call, as
        `MicroCompacted` events (the history itself is unchanged)."""
        for edit in applied:
            feature = edit.get("type")
            name = next(
                (
                    s.name
                    for s in server.server_strategies(self._strategies)
                    if (e := server_edit(s)) is not None and e.feature == feature
                ),
                str(feature),
            )
            tokens = int(edit.get("cleared_input_tokens") or 0)
            after = replace(sent, tokens=max(sent.tokens - tokens, 0))
            self._emit(
                MicroCompacted(
                    cleared_ids=(),
                    chars_freed=0,
                    before=sent,
                    after=after,
                    strategy=name,
                    cleared_tokens=tokens,
                    applied=dict(edit),
                )  # fmt: skip
            )

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
        the last failure; `CompactionSkipped` when there was nothing to compact. With `given`,
        its text is the summary (no summariser call): only the first strategy runs (the one
        `preview` shows), and it must ask for one summary.
        """
        candidates = [check_strategy(strategy)] if strategy else self._manual_strategies()
        if given is not None:
            candidates = candidates[:1]
        before = self.history.size()
        if candidates and len(self.history) == 0:
            return self._skipped(trigger, focus, candidates[-1].name, "the history is empty")
        refusal = self._request_refusal(trigger, candidates)
        if refusal:
            name = candidates[0].name if candidates else "none"
            return self._failed(
                trigger, focus, before, time.perf_counter(), name, "on_request", refusal
            )
        event: CompactionFinished | None = None
        for candidate in candidates:
            outcome = self._run(candidate, trigger, focus, given)
            fallback = self._rejected_for(candidate, outcome)
            if fallback is not None:
                outcome = self._run(fallback, trigger, focus, given)
            if isinstance(outcome, CompactionFinished):
                event = outcome
                if outcome.success:
                    break
        if event is None:
            reason = "no strategy found anything to do"
            return self._skipped(trigger, focus, candidates[-1].name, reason)
        return event

    def _skipped(
        self, trigger: str, focus: str | None, strategy: str, reason: str
    ) -> CompactionSkipped:
        """Nothing to compact: said (and recorded) once, not a failure, no back-off."""
        event = CompactionSkipped(trigger, focus, reason, strategy)
        self._emit(event)
        return event

    def _manual_strategies(self) -> list[Strategy]:
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
        if size.chars < self.state.retry_after_chars:
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
            check_strategy(strategy) if strategy else next(iter(self._manual_strategies()), None)
        )
        if chosen is None:
            raise ValueError("no strategy to preview: configure one or pass strategy=...")
        history = self.history
        before = history.size()
        view = history.view()
        run = _Run()
        ctx = self._context(chosen, "user", focus, before, view, run)
        ctx.memo = dict(ctx.memo)  # a preview leaves the strategy's notes as they were
        if not summarise:
            ctx._summarise = _stand_in
        try:
            result = chosen.compact(view, ctx)
            if result is None:
                return Preview(chosen.name, chosen.when, before, before, list(view), None)
            changes = None  # a requested compaction replaces the history
            if changes is not None:
                self._check_edits(changes)
                new = list(result)
            else:
                new = with_pins(list(result), ctx.pins)
                self._check_replacement(new, before, "user")
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            return Preview(
                chosen.name, chosen.when, before, before, list(view), _reason(chosen, exc)
            )
        after = history.projected_size(new, replaced=changes is None)
        return Preview(
            chosen.name,
            chosen.when,
            before,
            after,
            new,
            None,
            replaces=changes is None,
            original=list(view),
            summaries=tuple(ctx.summaries),
            stand_in=not summarise and bool(ctx.summaries),
        )

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
        layer = strategy.when
        if trigger != "every_call":  # a compaction asked for, or due over the limit
            self._emit(CompactionStarted(trigger, focus, before, strategy.name))
        if len(history) == 0:
            return None
        run = _Run()
        view = history.view()
        ctx = self._context(strategy, trigger, focus, before, view, run, given)
        try:
            result = strategy.compact(view, ctx)
            if given is not None and not run.summaries:
                raise CompactionRefused(
                    "it makes no summary, so there is none to replace with the given one"
                )
            if result is None:
                return None
            # Before a call, an every-call strategy edits in place; run on request, any strategy
            # replaces the history (a compaction the user asked for, snapshotted and checked).
            in_place = layer == "every_call" and trigger == "every_call"
            changes = _in_place_changes(result, view) if in_place else None
            if changes is not None:
                changes, restored = _restore_edited_pins(changes, view, ctx.pins)
                edits = self._check_edits(changes)
            else:
                new = list(result)
                restored = len(missing_pins(new, ctx.pins))
                new = with_pins(new, ctx.pins)
                self._check_replacement(new, before, trigger)
                # The original whole on disk before it is replaced (or no replacement).
                snapshot = self._snapshot(self.history.messages)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # any failure of a strategy is a failed compaction
            self._memos.pop(id(strategy), None)  # its notes may assume the result was applied
            reason = _reason(strategy, exc)
            return self._failed(trigger, focus, before, started, strategy.name, layer, reason, run)
        if restored:
            self._emit(
                Notice(
                    "pins_restored",
                    f"The strategy {strategy.name!r} left out {restored} pinned text(s); they "
                    "were put back verbatim (a pinned text is in every request).",
                )
            )
        if changes is not None:
            return self._apply_edits(strategy, changes, edits, before, ctx) if edits else None
        return self._apply_replacement(
            strategy, trigger, focus, new, before, started, ctx, run, snapshot, given
        )

    def _context(
        self,
        strategy: Strategy,
        trigger: str,
        focus: str | None,
        size: ContextSize,
        view: Sequence[Message],
        run: _Run,
        given: GivenSummary | None = None,
    ) -> Context:
        history = self.history
        if self._memo_generation != history.generation:
            self._memos.clear()
            self._memo_generation = history.generation
        memo = self._memos.setdefault(id(strategy), {})

        def summarise(messages: Sequence[Message], focus: str | None) -> str:
            if given is not None:
                return _given_text(given, run)
            summary = self._summarise(messages, focus)
            run.usage = run.usage + summary.usage
            run.summaries += 1
            cost = summary.cost_usd
            run.cost_usd = cost if run.summaries == 1 else add_costs(run.cost_usd, cost)
            return summary.text

        def server_summarise(messages: Sequence[Message], focus: str | None) -> dict[str, Any]:
            if self._server_summarise is None:
                raise RuntimeError("this session cannot ask the API for a summary")
            block, summary = self._server_summarise(messages, focus)
            self._block_betas.add(server.SUMMARIZE_BETA)
            run.usage = run.usage + summary.usage
            run.summaries += 1
            cost = summary.cost_usd
            run.cost_usd = cost if run.summaries == 1 else add_costs(run.cost_usd, cost)
            return block

        return Context(
            focus=focus,
            trigger=trigger,
            size=size,
            context_limit=self.policy.context_limit,
            token_limit=self.token_limit,
            recent_files=tuple(self.state.recent_files),
            pending_request=history.pending_request,
            memo=memo,
            tokens_per_char=history.tokens_per_char,
            compaction_due=self._compaction_due(size) and not self.state.consecutive_failures,
            cached_prefix=self.cache.prefix() if self.cache is not None else None,
            model=self._model(),
            auto_compaction=bool(self._of("over_limit")) and not self.paused,
            pins=self._pins(trigger != "every_call"),
            _summarise=summarise,
            _tool_name=history.tool_name,
            _tool_results=history.tool_results,
            _history=view,
            _save_output=self._save_output,
            _message_chars=history.message_chars,
            _read_file=self._read_file,
            _server_summarise=server_summarise,
        )

    # -- results in place ----------------------------------------------------------------

    def _check_edits(self, changes: dict[int, Message]) -> list[dict[str, Any]]:
        """The block edits `changes` make; CompactionRefused when one is not allowed."""
        view = self.history.view()
        pending = self.history.pending_request
        edits: list[dict[str, Any]] = []
        for index, message in changes.items():
            if not 0 <= index < len(view):
                raise CompactionRefused(f"edit of message {index}, which does not exist")
            problem = _edit_problem(view[index], message, index, pending)
            if problem:
                raise CompactionRefused(problem)
            edits += _block_edits(index, view[index], message)
        return edits

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
        ids = (_block_id(edit["block"]) for edit in edits)
        cleared = tuple(dict.fromkeys(i for i in ids if i))
        freed = before.chars - after.chars
        event = MicroCompacted(
            cleared_ids=cleared,
            chars_freed=freed,
            before=before,
            after=after,
            strategy=strategy.name,
            edits_json=to_json(edits),
            cleared_tokens=self.history.tokens_of_chars(max(freed, 0)),
            cache_invalidated_tokens=invalidated,
        )
        self._failures.pop(id(strategy), None)
        self._emit(event)
        return event

    # -- results that replace the history ----------------------------------------------

    def _check_replacement(self, new: list[Message], before: ContextSize, trigger: str) -> None:
        problem = history_problem(new)
        if problem:
            raise CompactionRefused(f"the result is not a valid history: {problem}")
        view = self.history.view()
        if view[-1]["role"] == "user" and new[-1]["role"] != "user":
            raise CompactionRefused(
                "the result does not end with the user's turn, as the history did"
            )
        pending = self.history.pending_request
        if pending and not any(holds_text(m, pending) for m in new if m["role"] == "user"):
            raise CompactionRefused("the result drops the user's pending request")
        if trigger != "every_call":  # a compaction must make the history smaller
            chars = message_chars(new)
            if chars >= before.chars:
                raise CompactionRefused(
                    f"the result ({chars:,} characters) would not be smaller than the history "
                    f"({before.chars:,})"
                )

    def _apply_replacement(
        self,
        strategy: Strategy,
        trigger: str,
        focus: str | None,
        new: list[Message],
        before: ContextSize,
        started: float,
        ctx: Context,
        run: _Run,
        snapshot: str,
        given: GivenSummary | None = None,
    ) -> CompactionFinished:
        self.adopt(new, ctx.summaries[-1] if ctx.summaries else None)
        state = self.state
        if trigger == "auto":
            state.calls_since_auto = 0
        elif trigger == "user":
            state.refills, state.calls_since_auto = 0, None  # by hand: a pause is lifted
        self._failures.pop(id(strategy), None)
        after = self.history.size()
        event = CompactionFinished(
            trigger=trigger,
            focus=focus,
            before=before,
            after=after,
            success=True,
            duration=time.perf_counter() - started,
            summary=ctx.summaries[-1] if ctx.summaries else "",
            snapshot_path=snapshot,
            summary_usage=run.usage,
            strategy=strategy.name,
            layer=strategy.when,
            summary_cost_usd=run.cost_usd,
            details=dict(ctx.details),
            fallback_for=self._fallback_for.get(id(strategy)),
            summary_edited=given is not None,
            summary_proposed=given.proposed if given is not None else None,
        )
        self._emit(event)
        return event

    def adopt(self, new: Sequence[Message], summary: str | None = None) -> None:
        """Replace the history with `new`, the result of a successful compaction (here, or one
        recorded that replay applies): the cache holds none of it, the state counts it."""
        self.history.replace(new)
        self._pins_due = True  # a replayed server compaction holds none: looked at once
        if self.cache is not None:
            self.cache.replaced()
        state = self.state
        state.has_compacted = True
        if summary:
            state.last_summary = summary
        state.compact_count += 1
        state.consecutive_failures = 0
        state.retry_after_chars = 0
        after = self.history.size()
        if self.over_limit(after):
            state.retry_after_chars = self._retry_at(after)

    # -- failures -------------------------------------------------------------------------

    def _failed(
        self,
        trigger: str,
        focus: str | None,
        before: ContextSize,
        started: float,
        strategy: str,
        layer: str,
        reason: str,
        run: _Run | None = None,
        *,
        count: bool = True,
    ) -> CompactionFinished:
        state = self.state
        automatic = trigger in ("auto", "model")
        if count and automatic:
            state.consecutive_failures += 1
            state.retry_after_chars = self._retry_at(before)
        event = CompactionFinished(
            trigger=trigger,
            focus=focus,
            before=before,
            after=before,
            success=False,
            duration=time.perf_counter() - started,
            error=reason,
            summary_usage=run.usage if run else Usage(),
            strategy=strategy,
            layer=layer,
            summary_cost_usd=run.cost_usd if run else None,
            fallback_for=self.stands_in_for(strategy),
        )
        self._emit(event)
        if count and automatic and state.consecutive_failures == self.policy.max_failures:
            self._emit(
                Notice(
                    "auto_compaction_paused",
                    f"Automatic compaction failed {state.consecutive_failures} times in a row and "
                    "is paused; compact by hand (Session.compact / %compact) or reset the session.",
                )
            )
        if count and trigger == "every_call":
            self._every_call_failed(strategy)
        return event

    def _every_call_failed(self, name: str) -> None:
        strategy = next((s for s in self._strategies if s.name == name), None)
        if strategy is None:
            return
        failures = self._failures[id(strategy)] = self._failures.get(id(strategy), 0) + 1
        if failures == self.policy.max_failures:
            self._emit(
                Notice(
                    "strategy_paused",
                    f"The strategy {name!r} failed {failures} times in a row and no longer runs "
                    "before each call; set the strategies again or reset the session to retry it.",
                )
            )

    def _retry_at(self, size: ContextSize) -> int:
        return size.chars + max(1, int(self.policy.context_limit * RETRY_GROWTH))


# -- helpers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GivenSummary:
    """A summary written or edited by a person, to apply instead of the summariser's."""

    text: str
    proposed: str | None = None
    """The summariser's proposal it was edited from (None: written without one)."""


def _given_text(given: GivenSummary, run: _Run) -> str:
    """The given summary, as the strategy's one summary; CompactionRefused when it is empty or
    the strategy asks for a second one (a given text can stand for one summary only)."""
    if run.summaries:
        raise CompactionRefused("it asks for more than one summary; a given summary is one")
    if not given.text.strip():
        raise CompactionRefused("the given summary is empty")
    run.summaries += 1
    return given.text.strip()


STAND_IN = "[summary stand-in: a summary of {chars:,} characters of conversation goes here]"


def _stand_in(messages: Sequence[Message], focus: str | None) -> str:
    """A summary that costs nothing, for previews: says how much it would summarise."""
    return STAND_IN.format(chars=message_chars(list(messages)))


@dataclass(frozen=True)
class Preview:
    """What a compaction would do now (see `Compactor.preview`)."""

    strategy: str
    when: str
    before: ContextSize
    after: ContextSize
    messages: list[Message]
    """The history it would leave (the current one when it would do nothing or fail)."""
    error: str | None
    """Why the compaction would be refused, or None."""
    replaces: bool = False
    """True when the history would be replaced (a new epoch), False for edits in place."""
    original: list[Message] = field(default_factory=list)
    summaries: tuple[str, ...] = ()
    stand_in: bool = False
    """True when the summaries are stand-ins (no model was called)."""
    input_tokens: int | None = None
    """A server strategy's preview: the prompt's tokens with its edits (`count_tokens`)."""
    original_input_tokens: int | None = None
    """A server strategy's preview: the prompt's tokens without them, as the API reports."""

    @property
    def acts(self) -> bool:
        return self.error is None and self.messages != self.original and bool(self.original)

    def changed_blocks(self) -> list[tuple[int, int, str]]:
        """For edits in place: `(message index, block index, tool_use id)` of each block the
        strategy would rewrite."""
        if self.replaces:
            return []
        changed = []
        for index, (old, new) in enumerate(zip(self.original, self.messages, strict=True)):
            if old is new:
                continue
            for position, (a, b) in enumerate(zip(_content(old), _content(new), strict=False)):
                if a != b:
                    changed.append((index, position, _block_id(b) or ""))
        return changed

    def dropped(self) -> list[int]:
        """For replacements: indices of the messages that would not be kept verbatim."""
        if not self.replaces:
            return []
        kept = {id(m) for m in self.messages}
        return [i for i, m in enumerate(self.original) if id(m) not in kept]

    def __repr__(self) -> str:
        return self.text()

    def text(self) -> str:
        """The preview as plain text: what would go, what would stay, sizes before and after."""
        head = f"preview of {self.strategy} ({self.when})"
        if self.error:
            return f"{head}: would FAIL, history kept: {self.error}"
        if not self.acts:
            return f"{head}: nothing to do now"
        sizes = f"{size(self.before)} -> {size(self.after)}"
        if self.replaces:
            dropped = self.dropped()
            detail = f"replaces {len(dropped)} of {len(self.original)} messages"
            if self.summaries:
                kind = "a stand-in" if self.stand_in else "a real"
                detail += f" with {kind} summary"
        else:
            detail = f"rewrites {plural(len(self.changed_blocks()), 'block')}"
        return f"{head}: {detail}; {sizes}"


def _content(message: Message) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else [content]


def _reason(strategy: Strategy, exc: Exception) -> str:
    if isinstance(exc, CompactionRefused):
        return f"{strategy.name}: {exc}"
    known = type(exc).__name__ in ("ModelError", "SummaryError")
    detail = str(exc) if known else f"{type(exc).__name__}: {exc}"
    return f"{strategy.name}: {detail}" if known else f"{strategy.name} raised {detail}"


def _in_place_changes(
    result: Sequence[Message], view: Sequence[Message]
) -> dict[int, Message] | None:
    """The messages a same-length result changes, when it only rewrites messages in place;
    None when it changes the history's shape (a replacement)."""
    if isinstance(result, Edited) and result.base is view:
        return {i if i >= 0 else i + len(view): m for i, m in result.changes.items()}
    if len(result) != len(view):
        return None
    return {i: new for i, (old, new) in enumerate(zip(view, result, strict=True)) if new is not old}


def _restore_edited_pins(
    changes: dict[int, Message], view: Sequence[Message], pins: Sequence[str]
) -> tuple[dict[int, Message], int]:
    """In-place edits with every pinned block an edited message held put back at its end;
    and how many were put back."""
    if not pins:
        return changes, 0
    restored = 0
    fixed = dict(changes)
    for index, message in changes.items():
        if not 0 <= index < len(view) or not isinstance(message, dict):
            continue  # refused by the checks that follow
        held = [text for text in pins if not missing_pins([view[index]], [text])]
        lost = missing_pins([message], held)
        if lost and message.get("role") == "user":
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            added = [{"type": "text", "text": text} for text in lost]
            fixed[index] = {**message, "content": [*(blocks or []), *added]}
            restored += len(lost)
    return fixed, restored


def _edit_problem(old: Message, new: Any, index: int, pending: str | None) -> str | None:
    """Why `new` cannot replace `old` in place: an edit may change what blocks say, never the
    message's role nor which calls and results it holds."""
    problem = message_problem(new, index)
    if problem:
        return problem
    if new["role"] != old["role"]:
        return f"message {index} changed role"
    if _pairs(old) != _pairs(new):
        return f"message {index}: its tool calls or results changed (ids must stay, in order)"
    dropped = pending and holds_text(old, pending) and not holds_text(new, pending)
    return f"message {index}: the pending request was removed" if dropped else None


def _pairs(message: Message) -> list[tuple[str, Any]]:
    """The tool calls and results of a message, in order: what pairs it with its neighbours."""
    content = message["content"]
    if isinstance(content, str):
        return []
    return [
        (kind, block.get("id") if kind == "tool_use" else block.get("tool_use_id"))
        for block in content
        if (kind := block.get("type")) in ("tool_use", "tool_result")
    ]


def _block_edits(index: int, old: Message, new: Message) -> list[dict[str, Any]]:
    """`{index, block_index, block}` for each block of `new` that differs from `old`'s."""
    old_blocks, new_blocks = content_blocks(old), content_blocks(new)
    kept = len(old_blocks)
    if len(new_blocks) > kept and old_blocks == new_blocks[:kept]:
        # Blocks added after the old ones (a note for the model): only they are new.
        added = range(kept, len(new_blocks))
        return [{"index": index, "block_index": j, "block": new_blocks[j]} for j in added]
    if len(old_blocks) != len(new_blocks):
        return [{"index": index, "block_index": j, "block": b} for j, b in enumerate(new_blocks)]
    return [
        {"index": index, "block_index": j, "block": b}
        for j, (a, b) in enumerate(zip(old_blocks, new_blocks, strict=True))
        if a is not b and a != b
    ]


def _block_id(block: dict[str, Any]) -> str | None:
    return block.get("tool_use_id") or (
        block.get("id") if block.get("type") == "tool_use" else None
    )
