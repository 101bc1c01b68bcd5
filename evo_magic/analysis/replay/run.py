"""One recorded conversation under one strategy setting: the live loop's own parts (the
`History`, the `Compactor`, the `PrefixTracker`, `place_breakpoints`) fed with what was recorded,
each model call measured, its breakpoints placed and its usage modelled."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from evo_magic.analysis.conversation import Call, Compaction
from evo_magic.analysis.replay.calibration import Calibration, tokens_of
from evo_magic.analysis.replay.options import (
    RECORDED,
    Chosen,
    ReplayedCall,
    ReplaySettings,
    Skipped,
)
from evo_magic.analysis.replay.recording import Recording, first_model
from evo_magic.analysis.replay.server import (
    ModelledServer,
    ServerCall,
    chars_of,
    stand_in_block,
    without_compaction,
)
from evo_magic.analysis.replay.summaries import Summaries
from evo_magic.analysis.replay.timeline import Change
from evo_magic.catalog import COMPACT_EDIT, context_window
from evo_magic.compact.base import Strategy
from evo_magic.compact.compactor import CompactionServices, Compactor
from evo_magic.compact.layout import is_pin_text
from evo_magic.compact.pins import Pin
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.server import request_params, server_strategies
from evo_magic.cost import Price, PriceTable, call_cost
from evo_magic.events import CompactionFinished, Event, MicroCompacted
from evo_magic.history import History
from evo_magic.measure import ContextSize, TokenAnchor, TokenRate, anchored_tokens, list_chars
from evo_magic.messages import blocks_of_type, first_text
from evo_magic.prompt_cache import (
    Breakpoint,
    CacheRequest,
    CacheSettings,
    PrefixCache,
    PrefixChain,
    PrefixTracker,
    Spot,
    min_cacheable_tokens,
    place_breakpoints,
    start_key,
)
from evo_magic.strategies import default_pipeline
from evo_magic.strategies.registry import NotRebuildable, rebuild
from evo_magic.summariser import Summary
from evo_magic.tools.files import touched_path
from evo_magic.transcript import default_outputs_shown, output_shown
from evo_magic.usage import Usage


class Run:
    """One conversation under one strategy setting (see the module docstring)."""

    def __init__(
        self,
        recording: Recording,
        label: str,
        chosen: Chosen,
        settings: ReplaySettings,
        calibration: Calibration | None,
    ):
        self.recording = recording
        self.label = label
        self.chosen = chosen
        self.recorded_mode = chosen == RECORDED
        self.settings = settings
        self.calibration = calibration
        self.cleared_tokens = 0
        self.compactions = 0
        self.changes: list[Event] = []  # since the previous call, for `on_call`
        self.history = History(self._observe)
        self.policy = settings.policy or CompactPolicy()
        self.cache_settings = settings.cache or CacheSettings()
        self.prices = settings.prices or _default_prices()
        self.decision_prices = self.prices
        self.summaries = Summaries(
            recording.summaries,
            settings.stand_in_tokens,
            settings.summariser,
            settings.cache_dir,
            self.policy,
            self._tokens_of,
            self._in_context_usage,
        )
        self.summary_cost: float | None = 0.0
        self.now = 0.0
        self.tracker = PrefixTracker(clock=lambda: self.now)
        self.pins: dict[int, Pin] = {}
        """The pins the session had at this point (from its pin and unpin records)."""
        self.outputs = default_outputs_shown(recording.session_id)
        """The folder saved outputs are shown in (the session's own, once its start is read)."""
        services = CompactionServices(
            emit=self._observe,
            summarise=self.summaries,
            save_output=lambda tool_use_id, text: output_shown(self.outputs, tool_use_id),
            model=lambda: self.model or None,
            server_summarise=self._server_summarise,
            pins=lambda reread: tuple(pin.block_text for pin in self.pins.values()),
        )
        self.compactor = Compactor(self.history, services, policy=self.policy, cache=self.tracker)
        self.server = ModelledServer()
        self._replacing_epoch: tuple[int, int] = (-1, -1)
        self._server_cleared = 0
        """Tokens the modelled server cleared from the previous call's prompt."""
        self._charged: set[tuple[int, int]] = set()
        """Recorded server compactions whose iteration is charged already."""
        self._server_block: dict[str, Any] | None = None
        """A modelled compaction's block, waiting for the reply it opens."""
        self._turn: int | None = None
        """The turn of the latest request (a new turn is a new request)."""
        self._stop_reason: str | None = None
        """Why the reply to the latest recorded call ended (whether it answered the request)."""
        if isinstance(chosen, list):
            self.compactor.strategies = chosen
        elif chosen is None:
            self.compactor.configure(default_pipeline())
        model = settings.model or first_model(recording) or ""
        self.model = model
        self._windows: dict[str, int | None] = {}
        self.chain = PrefixChain(start_key(model))
        self.served_chain = PrefixChain(start_key(model))
        """The prompt the modelled server leaves (the cache sees it; `chain` is what is sent)."""
        self.cache = PrefixCache(min_tokens=min_cacheable_tokens(model) or 0)
        self.identical = True
        """True while every call so far sent what the recorded session sent."""
        self.rows: list[dict[str, Any]] = []
        self.points: list[tuple[int, int]] = []
        self.reference: dict[int, tuple[str, int]] = {}
        self.unrebuilt: list[str] = []
        self._prices_seen: dict[tuple[int, str], Price | None] = {}

    # -- the settings timeline ---------------------------------------------------------------

    def _apply(self, change: Change) -> None:
        """A recorded setting, from here on: under "recorded" every one; under another setting
        the policy, caching and prices (unless replay was given its own), never strategies.
        Prices given to replay cost every call; the recorded ones still steer the decisions
        under "recorded" (the cache-aware rule weighs them)."""
        name, value = change.name, change.value
        if name in ("pin", "unpin"):  # part of the conversation: under every setting
            if isinstance(value, Pin):
                self.pins[value.id] = value
            else:
                self.pins.pop(value, None)
            return
        if name == "strategies":
            if self.recorded_mode:
                self._recorded_strategies(value)
            return
        if name == "outputs":  # where this session's saved outputs are: as live showed them
            self.outputs = value
            return
        if getattr(self.settings, name) is not None and not self.recorded_mode:
            return
        if name == "policy":
            self.policy = value
            self.compactor.policy = value
            self.summaries.use_policy(value)
        elif name == "cache":
            self.cache_settings = value
        elif name == "prices":
            self.decision_prices = value
            if self.settings.prices is None:
                self.prices = value

    def _recorded_strategies(self, described: list[dict[str, Any]] | None) -> None:
        """The session's own strategies, rebuilt from the registry; the every-call ones run
        (the others' compactions are recorded, and replayed as they happened)."""
        if described is None:  # schema 1: the seed's pipeline; its compactions are recorded
            self.compactor.strategies = []
            return
        made = []
        for item in described:
            try:
                made.append(rebuild(item, trust=self.settings.trust))
            except NotRebuildable as exc:
                self.unrebuilt.append(str(exc))
        # A record is written only when they changed: they start afresh, as they did live.
        self.compactor.strategies = [s if s.when == "every_call" else _Recorded(s) for s in made]

    # -- events --------------------------------------------------------------------------

    def _observe(self, event: Event) -> None:
        if isinstance(event, MicroCompacted):
            self.cleared_tokens += event.cleared_tokens
            self.changes.append(event)
        elif isinstance(event, CompactionFinished):
            if event.success:
                self.changes.append(event)
                self.compactions += 1
                self.cleared_tokens += max(event.before.tokens - event.after.tokens, 0)
            if event.summary_usage.output_tokens or event.summary_usage.input_tokens:
                self._charge_summary(event.summary_usage)

    def _charge_summary(self, usage: Usage) -> None:
        """Add a summarisation call to the cost of the next call's row (NA without a price)."""
        priced = call_cost(usage, self.model, self.prices)
        if priced is None or self.summary_cost is None:
            self.summary_cost = None
        else:
            self.summary_cost += priced.total

    def _in_context_usage(
        self, messages: Sequence[dict[str, Any]], instructions: int, output: int
    ) -> Usage | None:
        """The usage of a summary asked in the conversation of `messages` when they are the
        whole history (None otherwise: a part is asked as text): the agent's prompt as it
        stands, with the breakpoints the live loop places, then `instructions` tokens."""
        if not len(self.history) or not self.history.is_whole(messages):
            return None
        view = self.history.view()
        self.chain.update(view)
        spots = self._spots(view, mark_newest=False)
        usage = self._cache_usage(self.history.size().tokens, spots, instructions)
        return replace(usage, output_tokens=output)

    def _tokens_of(self, chars: int) -> int:
        return tokens_of(chars, self.calibration)

    # -- the conversation ----------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        """Replay every item; the rows of the calls. Raises Skipped under "recorded" when the
        session's strategies cannot be rebuilt."""
        replacing: list[dict[str, Any]] = []
        summary: str | None = None
        trigger: str | None = None
        timeline = list(self.recording.timeline)
        lines = self.recording.lines or [None] * len(self.recording.items)
        for item, line in zip(self.recording.items, lines, strict=True):
            while timeline and line is not None and timeline[0].line < line:
                self._apply(timeline.pop(0))
            if self.unrebuilt and self.recorded_mode and self.calibration is not None:
                raise Skipped(self.unrebuilt[0])
            if isinstance(item, Compaction):
                summary, trigger = item.summary, item.trigger
                self._replacing_epoch = (item.segment, item.epoch)
                if not self.recorded_mode and (item.segment, item.epoch) in self.recording.requests:
                    # The user asked for a compaction here: every setting is asked the same.
                    self.compactor.request(
                        "user", self.recording.requests[(item.segment, item.epoch)]
                    )
                continue
            if isinstance(item, Call):
                # A compaction over the limit ran inside this call's preparation, after the
                # every-call strategies: the history it left is what was sent.
                automatic = bool(replacing) and self.recorded_mode and trigger == "auto"
                replacing = self._flush(replacing, summary)
                self._call(item, prepare=not automatic)
                continue
            opening = self.recording.opening.get((item.segment, item.epoch))
            message = item.as_api()
            if not self.recorded_mode:
                # The server's block is the recorded session's; this setting did not get it.
                stripped = without_compaction(message)
                if stripped is None:
                    continue
                message = stripped
            kept: dict[str, Any] | None = message
            if item.epoch > 0 and opening is not None and item.index < opening:
                replacing.append(message)  # a message of the history that replaced the old one
                continue
            if item.epoch > 0 and summary:
                # Sources that merge the summary into the next message: its blocks that hold
                # the summary are the replacement, the rest joined afterwards.
                parts = [b for b in message["content"] if b.get("text") == summary]
                if parts:
                    replacing.append({"role": message["role"], "content": parts})
                    rest = [b for b in message["content"] if b.get("text") != summary]
                    kept = {"role": message["role"], "content": rest} if rest else None
            replacing = self._flush(replacing, summary)
            if kept is not None:
                self._append(kept, item.kind, item.turn)
        return self.rows

    def _flush(self, replacing: list[dict[str, Any]], summary: str | None) -> list[dict[str, Any]]:
        """Apply a recorded replacement when replaying what was recorded (else drop it)."""
        if replacing and self.recorded_mode:
            self._replace(replacing, summary)
        return []

    def _replace(self, messages: list[dict[str, Any]], summary: str | None) -> None:
        before = self.history.size()
        if self._replacing_epoch in self._charged:
            # A server compaction, counted and charged on its call's row already.
            self.compactor.adopt(messages, summary)
            self.changes.append(
                CompactionFinished("server", None, before, self.history.size(), True, 0.0,
                                   strategy="recorded")
            )  # fmt: skip
            return
        if summary:  # the recorded compaction paid for a summary of the history it replaced
            self._charge_summary(self.summaries.estimate_usage(self.history.view(), None, summary))
        self.compactor.adopt(messages, summary)
        self.compactions += 1
        after = self.history.size()
        self.cleared_tokens += max(before.tokens - after.tokens, 0)
        self.changes.append(
            CompactionFinished("recorded", None, before, after, True, 0.0, strategy="recorded")
        )

    def _append(self, message: dict[str, Any], kind: str | None, turn: int | None = None) -> None:
        if self._server_block is not None:
            message = self._after_server_compaction(message)
            if message is None:
                return
        requested = self._note_tool_results(message)
        text = self._request(message, kind, turn)
        if text is not None:
            self.history.begin_request(text, message)
        else:
            self.history.append(message)
        if message["role"] == "assistant":
            self.history.answered(self._stop_reason)
        if requested is not None and not self.recorded_mode:
            self.compactor.request("model", requested or None)

    def _request(self, message: dict[str, Any], kind: str | None, turn: int | None) -> str | None:
        """The request `message` makes, as live began one (None: it makes none): a person's
        prompt that opens a new turn (a session counts its turns by request, so the notes it
        adds within a turn, such as the one after a reply cut at max_tokens, are no request;
        where a format counts no turns, every prompt), and no pin."""
        if message["role"] != "user" or kind != "prompt":
            return None
        if turn is not None:
            if turn == self._turn:
                return None
            self._turn = turn
        text = first_text(message)
        return None if text is None or is_pin_text(text) else text

    def _note_tool_results(self, message: dict[str, Any]) -> str | None:
        """What the live session did as these results came back: the recent files (as the
        file tools note them), and the focus ("" for none) when they answer a call of the
        `compact` tool (the model asked for a compaction after this batch), else None."""
        requested = None
        for block in blocks_of_type(message, "tool_result"):
            call = self.history.tool_use(block.get("tool_use_id", ""))
            if call is None:
                continue
            name, tool_input = call.get("name"), call.get("input")
            if name == "compact" and requested is None:
                requested = str((tool_input or {}).get("focus") or "")
            path = None if block.get("is_error") else touched_path(name, tool_input)
            if path is not None:
                self.compactor.state.note_file(path, self.compactor.policy.max_recent_files)
        return requested

    # -- one call --------------------------------------------------------------------------

    def _call(self, item: Call, *, prepare: bool = True) -> None:
        recorded = self.recording.calls.get(item.call or -1, {})
        self._stop_reason = item.stop_reason  # of the reply that follows
        if self._server_block is not None:  # a modelled compaction that no reply followed
            self._after_server_compaction(None)
        if prepare and (not self.recorded_mode or self.compactor.strategies):
            self.compactor.before_call()
        history = self.history
        if not len(history):
            return
        view = history.view()
        self.chain.update(view)
        chars = history.size().chars
        digest = self.chain.key().hex()
        tokens_recorded = recorded.get("tokens")
        # The whole prompt as sent: the recorded usage is the message iteration's when the
        # server compacted during the call (its compaction iteration read the prompt).
        prompt_recorded = recorded.get("prompt_tokens") or tokens_recorded
        call = item.call if item.call is not None else -1
        if self.calibration is None:
            if prompt_recorded:
                self.points.append((chars, prompt_recorded))
            self.reference[call] = (digest, chars)
            tokens = prompt_recorded or tokens_of(chars, None)
            exact = bool(prompt_recorded)
        else:
            tokens, exact = self.calibration.tokens(call, digest, chars, prompt_recorded)
            self.identical = self.identical and self.calibration.same_request(call, digest)
        history.anchor(chars, tokens)
        sent_tokens = tokens
        served = self._serve(view, chars, tokens)
        prompt = served.messages if served is not None else view
        if served is not None:
            if self.recorded_mode and tokens_recorded:
                tokens = tokens_recorded  # what the server counted after its edits
            else:
                tokens, exact = served.tokens, exact and served.tokens == sent_tokens
            self.served_chain.update(prompt)
        elif self.recorded_mode and recorded.get("server_compaction") is not None:
            # The server compacted during the call: the call is its message iteration, and
            # its compaction iteration is the call's summary cost.
            tokens = tokens_recorded or tokens
            key = recorded["server_compaction"]
            if key in self.recording.server_usage and key not in self._charged:
                self._charged.add(key)  # counted here, its replacement applied when it comes
                self._charge_summary(self.recording.server_usage[key])
                self.compactions += 1
                self.cleared_tokens += max(sent_tokens - tokens, 0)
        changes, self.changes = tuple(self.changes), []
        if self.calibration is not None and self.settings.on_call is not None:
            rec = self.recording
            self.settings.on_call(
                ReplayedCall(self.label, rec.session_id, rec.agent_id, item.call, prompt, changes)
            )
        # Calls come in record order; a clock that ran backwards does not move time back.
        self.now = max(self.now, float(recorded.get("timestamp") or self.now))
        spots = self._spots(view)
        # After a compaction the model reads the block alone: no breakpoint of the request
        # is in it (the tools and system prompt stay cached).
        compacted = served is not None and served.compacted
        output = recorded.get("output_tokens") or 0
        chain = self.served_chain if served is not None else None
        usage = self._cache_usage(tokens, [] if compacted else spots, chain=chain)
        usage = replace(usage, output_tokens=output)
        model = self.model or recorded.get("model") or ""
        priced = call_cost(usage, model, self.prices)
        price = self._price(model)
        # What cache-aware strategies weigh next: the usage the server reported for this very
        # request when the run has sent what the session sent (under "recorded", always),
        # else the modelled one.
        same = self.recorded_mode or (
            self.identical and (served is None or served.tokens == sent_tokens)
        )
        reported = recorded.get("usage") if same else None
        seen = reported if reported is not None else usage
        self.tracker.after_call(seen, len(view), self.cache_settings, price)
        if model not in self._windows:
            self._windows[model] = context_window(model)
        window = self._windows[model]
        self.rows.append(
            {
                "strategy": self.label,
                "session_id": self.recording.session_id,
                "agent_id": self.recording.agent_id,
                "source": self.recording.source,
                "call": item.call,
                "model": model or None,
                "context_messages": len(view),
                "context_chars": chars,
                "context_tokens": tokens,
                "sent_tokens": sent_tokens,
                "tokens_exact": exact,
                "context_window": window,
                "over_window": None if window is None else tokens > window,
                "breakpoints": tuple((s.index, s.block or 0) for s in spots),
                "input_tokens": usage.input_tokens,
                "cache_read_tokens": usage.cache_read_input_tokens,
                "cache_write_tokens": usage.cache_creation_input_tokens,
                "output_tokens": output,
                "cost_usd": None if priced is None else priced.total,
                "summary_cost_usd": self.summary_cost,
                "cleared_tokens": self.cleared_tokens,
                "compactions_so_far": self.compactions,
                "server_modelled": served is not None
                or (not self.recorded_mode and bool(server_strategies(self.compactor.strategies))),
                "recorded_tokens": tokens_recorded,
                "estimated_tokens": None
                if self.calibration is None
                else self.calibration.estimate(chars),
            }
        )
        self.cleared_tokens = 0
        self.summary_cost = 0.0

    # -- the modelled server (see `server`) --------------------------------------------------

    def _serve(self, view: Sequence[dict[str, Any]], chars: int, tokens: int) -> ServerCall | None:
        """What the modelled server does to this call's prompt (None: no server strategy). Its
        clearings and compaction are events of this call, its compaction iteration part of the
        call's summary cost. Under "recorded" only the clearing is modelled (for the prompt
        cache; the tokens are the recorded ones): the session's compactions are recorded, and
        its strategies ran as recorded (no capability table is asked)."""
        strategies = server_strategies(self.compactor.strategies)
        if not strategies:
            return None
        if self.recorded_mode:
            edits = request_params(strategies).edits
            edits = [edit for edit in edits if edit.get("type") != COMPACT_EDIT]
        else:
            try:  # as live: a model the table says lacks one hands over to its fallback
                edits = self.compactor.server.params(self.model).edits
            except ValueError as exc:
                raise Skipped(str(exc)) from None
        if not edits:
            return None
        count = self._counter(view, chars, tokens)
        served = self.server.call(view, edits, count)
        cleared = sum(int(a.get("cleared_input_tokens") or 0) for a in served.applied)
        # Cleared again on every call while configured: the row counts what is newly cleared.
        self.cleared_tokens += max(cleared - self._server_cleared, 0)
        self._server_cleared = cleared
        sent = ContextSize(len(view), chars, tokens)
        for applied in served.applied:
            freed = int(applied.get("cleared_input_tokens") or 0)
            after = replace(sent, tokens=max(tokens - freed, 0))
            name = self.compactor.server.name_of(applied.get("type"))
            event = MicroCompacted((), 0, sent, after, name, cleared_tokens=freed, applied=applied)
            self.changes.append(event)
        if served.compacted:
            served = self._compact(view, served, count)
        return served

    def _counter(self, view: Sequence[dict[str, Any]], chars: int, tokens: int) -> Any:
        """Tokens of a prompt of other messages than `view` (`chars` characters, `tokens`
        tokens): the change in characters at the conversation's rate."""
        rate = self.calibration.tokens_per_char if self.calibration else TokenRate().rate
        anchor = TokenAnchor(chars, tokens, rate)  # the live history's rule, from this call
        history = self.history
        measure = self.server.chars

        def count(messages: Sequence[dict[str, Any]]) -> int:
            if len(messages) == len(view):
                delta = sum(
                    measure(m) - history.message_chars(i)
                    for i, m in enumerate(messages)
                    if m is not view[i]
                )
            else:
                total = sum(chars_of(m) for m in messages)
                delta = list_chars(total, len(messages)) - chars
            return max(anchored_tokens(chars + delta, anchor), 1)

        return count

    def _compact(
        self, view: Sequence[dict[str, Any]], served: ServerCall, count: Callable[..., int]
    ) -> ServerCall:
        """The server's compaction at this call: a compaction iteration reading the prompt
        and writing the summary (charged to this call's summary cost), then the message
        iteration on the block alone; the history becomes the block and the reply."""
        summary = self.summaries(list(view), served.instructions)
        block = stand_in_block(summary.text)
        self.served_chain.update(served.messages)
        spots = self._spots(view)
        read = self._cache_usage(served.compact_tokens, spots, chain=self.served_chain)
        usage = replace(read, output_tokens=self._tokens_of(len(summary.text)))
        tokens = count([block])
        before = ContextSize(len(view), self.history.size().chars, served.compact_tokens)
        after = ContextSize(1, list_chars(chars_of(block), 1), tokens)
        self._observe(
            CompactionFinished(
                "server", served.instructions, before, after, True, 0.0,
                summary=summary.text, summary_usage=usage,
                strategy=self.compactor.server.name_of("compact_20260112"), layer="every_call",
            )
        )  # fmt: skip
        self._server_block = block
        self._server_cleared = 0
        return replace(served, messages=[block], tokens=tokens)

    def _after_server_compaction(self, message: dict[str, Any] | None) -> dict[str, Any] | None:
        """The history a modelled compaction leaves, once its reply comes (`message`; None:
        none came): the block and the reply as one message, as the live loop keeps them.
        Returns what is still to append (None: nothing)."""
        block, self._server_block = self._server_block, None
        assert block is not None
        if message is not None and message.get("role") == "assistant":
            merged = {"role": "assistant", "content": [*block["content"], *message["content"]]}
            self.compactor.adopt([merged], block["content"][0]["content"], trigger="server")
            self.history.answered(self._stop_reason)
            return None
        self.compactor.adopt([block], block["content"][0]["content"], trigger="server")
        return message

    def _server_summarise(
        self, messages: Sequence[dict[str, Any]], focus: str | None
    ) -> tuple[dict[str, Any], Summary]:
        """`ServerSummarise` asked (a recorded `%compact` under a setting that has it): the
        modelled server's block, priced as one request that reads the conversation (from the
        modelled cache) and writes the summary."""
        summary = self.summaries(messages, focus)
        output = self._tokens_of(len(summary.text))
        usage = self._in_context_usage(messages, 0, output) or summary.usage
        block = stand_in_block(summary.text)["content"][0]
        return block, Summary(summary.text, usage, summary.model)

    def _spots(self, view: Sequence[dict[str, Any]], *, mark_newest: bool = True) -> list[Spot]:
        """The conversation's cache breakpoints, placed by the live rule."""
        placed = place_breakpoints(
            view,
            settings=self.cache_settings,
            edited_from=self.tracker.edited_from,
            mark_newest=mark_newest,
        )
        return [spot for spot in placed.breakpoints if spot.section == "messages"]

    def _price(self, model: str) -> Price | None:
        if not model:
            return None
        key = (id(self.decision_prices), model)
        if key not in self._prices_seen:
            self._prices_seen[key] = self.decision_prices.lookup(model)
        return self._prices_seen[key]

    def _cache_usage(
        self,
        tokens: int,
        spots: list[Spot],
        summary: int = 0,
        chain: PrefixChain | None = None,
    ) -> Usage:
        """The usage of a call of `tokens` prompt tokens under the modelled prompt cache, with
        the tools and system prompt cached at their end and the conversation (`chain`: the
        one sent, else the prompt the modelled server left) at `spots`. With
        `summary` tokens, a summary asked after the conversation: its instructions end the
        prompt."""
        settings = self.cache_settings
        if not settings.enabled:
            return Usage(input_tokens=tokens + summary)
        scale = self.calibration.tokens_per_char if self.calibration else TokenRate().rate
        chain = chain or self.chain
        # What is not messages (tools, system prompt), as the history's anchor counts it.
        overhead = TokenAnchor(chain.chars, tokens, scale).overhead_tokens

        breakpoints = [Breakpoint(overhead, chain.start, settings.prefix_ttl)]
        breakpoints += [chain.breakpoint(spot, overhead, scale) for spot in spots]
        prompt = max(tokens, overhead + round(scale * chain.chars)) + summary
        return self.cache.call(CacheRequest(self.now, prompt, tuple(breakpoints))).to_usage()


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


def _default_prices() -> PriceTable:
    from evo_magic.cost import price_table

    return price_table(None)
