"""One model call of a replayed conversation: what the history would send, measured in tokens
(calibrated on the recorded call), what the modelled server makes of it, what an observer is
told, what the modelled prompt cache reads and writes and what it costs, and its row of
`Replay.calls`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evo_magic.analysis.conversation import Call
from evo_magic.analysis.replay.calibration import Calibration, tokens_of
from evo_magic.analysis.replay.options import ReplayedCall
from evo_magic.analysis.replay.pricing import Pricing
from evo_magic.analysis.replay.reasoning import RETURNS_REASONING, SentReasoning
from evo_magic.analysis.replay.recording import Recording
from evo_magic.analysis.replay.server import ServerCall, ServerPart
from evo_magic.analysis.replay.tally import Tally
from evo_magic.analysis.replay.thinking import ThinkingChars
from evo_magic.catalog import context_window
from evo_magic.compact.compactor import Compactor
from evo_magic.compact.server import server_strategies
from evo_magic.history import History
from evo_magic.messages import Message
from evo_magic.models.base import note_chars
from evo_magic.prompt_cache import Spot
from evo_magic.usage import Usage


@dataclass(frozen=True)
class Prompt:
    """What one call sends, measured."""

    messages: Sequence[Message]
    """The history as sent (before the modelled server's edits)."""
    chars: int
    sent_tokens: int
    """Tokens of the whole prompt as sent."""
    tokens: int
    """Tokens the model reads (after the modelled server's edits)."""
    exact: bool
    """True when `tokens` is the recorded count of this very prompt."""
    recorded_tokens: int | None
    """What the recorded call's usage counted."""
    reasoning_tokens: int = 0
    """Reasoning the request sends back, in tokens (a Codex turn's: see `SentReasoning`)."""


@dataclass(frozen=True)
class Cost:
    """What one call reads from the modelled cache, writes to it and costs."""

    model: str
    spots: list[Spot]
    usage: Usage
    usd: float | None


class Calls:
    """The model calls of one run, in order: each one's row (`rows`); on the calibration pass
    (no `calibration`) what calibrates the others (`points`, `reference`)."""

    def __init__(
        self,
        recording: Recording,
        label: str,
        recorded_mode: bool,
        calibration: Calibration | None,
        on_call: Callable[[ReplayedCall], None] | None,
        parts: tuple[History, Compactor, Pricing, ServerPart, Tally],
        added_tool_chars: Callable[[], int] = lambda: 0,
    ):
        self._recording = recording
        self._label = label
        self._recorded_mode = recorded_mode
        self._calibration = calibration
        self._on_call = on_call
        self._history, self._compactor, self._pricing, self._server, self._tally = parts
        self.rows: list[dict[str, Any]] = []
        self.points: list[tuple[int, int]] = []
        """(characters, recorded tokens) of each call: the conversation's rate is fitted on
        them."""
        self.reference: dict[int, tuple[str, int]] = {}
        """Per call: the recorded request's digest and characters, as rebuilt."""
        self.stretch_points: list[tuple[int, int, int, int]] = []
        """(characters, thinking characters, recorded tokens, compactions before it) of each
        call."""
        self.stretch_of: dict[int, int] = {}
        """Per call: how many compactions came before it (its stretch)."""
        self.identical = True
        """True while every call so far sent what the recorded session sent."""
        self._windows: dict[str, int | None] = {}
        self._added_tool_chars = added_tool_chars
        """Characters of the tool definitions the replayed strategies offer that the recorded
        requests did not hold (they are in every request while offered)."""
        self.reasoning = SentReasoning(recording.source in RETURNS_REASONING)
        self._thinking = ThinkingChars()
        """The reasoning the next call sends back, which its characters do not show."""

    def replay(self, item: Call) -> None:
        """The recorded call `item`, sent with the history as it stands (none: no call)."""
        history = self._history
        if not len(history):
            return
        recorded = self._recording.calls.get(item.call or -1, {})
        view = history.view()
        chars = history.size().chars
        reasoning = self.reasoning.tokens
        sent, exact = self._measure(item.call, (chars, reasoning), recorded)
        if added := self._added_tool_chars():  # (negative: fewer tools than recorded)
            sent, exact = sent + round(added * self._pricing.rate), False
            self.identical = False
        history.anchor(chars, sent)
        if not self._recorded_mode and (note := note_chars(self._compactor.turn_note)):
            # The strategies' note for this call only: in the prompt, never in the history.
            sent, exact = sent + round(note * self._pricing.rate), False
            self.identical = False
        served = self._server.serve(view, chars, sent)
        tokens, exact = self._served_tokens(served, sent, exact, recorded)
        if served is not None:
            self._pricing.served_chain.update(served.messages)
        self._tell(item, served.messages if served is not None else view)
        prompt = Prompt(view, chars, sent, tokens, exact, recorded.get("tokens"), reasoning)
        cost = self._cost(prompt, served, recorded)
        self.rows.append(self._row(item, prompt, served, cost))
        self._tally.row_written()
        self.reasoning.answered(item)

    def _measure(
        self,
        call: int | None,
        size: tuple[int, int],
        recorded: dict[str, Any],
    ) -> tuple[int, bool]:
        """Tokens of the prompt of `size` (characters, reasoning tokens sent back) as sent,
        and whether they are the recorded count: on the calibration pass the recorded ones
        (noted to calibrate on), else calibrated."""
        chars, reasoning = size
        chain = self._pricing.follow(self._history)
        digest = chain.key().hex()
        # The whole prompt as sent: the recorded usage is the message iteration's when the
        # server compacted during the call (its compaction iteration read the prompt).
        prompt_recorded = recorded.get("prompt_tokens") or recorded.get("tokens")
        number = call if call is not None else -1
        calibration = self._calibration
        if calibration is None:
            stretch = self._tally.compactions
            if prompt_recorded:
                # The characters are fitted on what they count: the reasoning sent back is
                # counted apart (`SentReasoning`).
                counted = prompt_recorded - reasoning
                self.points.append((chars, counted))
                thinking = self._thinking.of(self._history)
                self.stretch_points.append((chars, thinking, counted, stretch))
            self.reference[number] = (digest, chars)
            self.stretch_of[number] = stretch
            return prompt_recorded or tokens_of(chars, None), bool(prompt_recorded)
        self.identical = self.identical and calibration.same_request(number, digest)
        return calibration.tokens(number, digest, chars, prompt_recorded)

    def _served_tokens(
        self, served: ServerCall | None, sent: int, exact: bool, recorded: dict[str, Any]
    ) -> tuple[int, bool]:
        """Tokens the model reads, and whether they are the recorded count."""
        tokens_recorded = recorded.get("tokens")
        if served is not None:
            if self._recorded_mode and tokens_recorded:
                return tokens_recorded, exact  # what the server counted after its edits
            return served.tokens, exact and served.tokens == sent
        if self._recorded_mode and recorded.get("server_compaction") is not None:
            # The server compacted during the call: the call is its message iteration, and
            # its compaction iteration is the call's summary cost.
            tokens = tokens_recorded or sent
            self._server.recorded_compaction(recorded["server_compaction"], sent, tokens)
            return tokens, exact
        return sent, exact

    def _tell(self, item: Call, prompt: Sequence[Message]) -> None:
        """What compacted since the previous call, to the observer with what the model reads
        (not on the calibration pass)."""
        changes = self._tally.take_changes()
        if self._calibration is not None and self._on_call is not None:
            rec = self._recording
            self._on_call(
                ReplayedCall(self._label, rec.session_id, rec.agent_id, item.call, prompt, changes)
            )

    def _cost(self, prompt: Prompt, served: ServerCall | None, recorded: dict[str, Any]) -> Cost:
        """The call under the modelled cache, priced; the live tracker told what came back."""
        pricing = self._pricing
        pricing.advance(recorded.get("timestamp"))
        spots = pricing.spots(prompt.messages)
        # After a compaction the model reads the block alone: no breakpoint of the request
        # is in it (the tools and system prompt stay cached).
        compacted = served is not None and served.compacted
        chain = pricing.served_chain if served is not None else None
        usage = pricing.usage(prompt.tokens, [] if compacted else spots, chain=chain)
        usage = replace(usage, output_tokens=recorded.get("output_tokens") or 0)
        model = pricing.model or recorded.get("model") or ""
        # What cache-aware strategies weigh next: the usage the server reported for this very
        # request when the run has sent what the session sent (under "recorded", always),
        # else the modelled one.
        same = self._recorded_mode or (
            self.identical and (served is None or served.tokens == prompt.sent_tokens)
        )
        reported = recorded.get("usage") if same else None
        pricing.after_call(reported if reported is not None else usage, len(prompt.messages), model)
        return Cost(model, spots, usage, pricing.cost(usage, model))

    def _row(
        self, item: Call, prompt: Prompt, served: ServerCall | None, cost: Cost
    ) -> dict[str, Any]:
        """The call's row of `Replay.calls` (see `results.CALL_COLUMNS`)."""
        recording, tally, usage = self._recording, self._tally, cost.usage
        window = self._window(cost.model)
        server_modelled = served is not None or (
            not self._recorded_mode and bool(server_strategies(self._compactor.strategies))
        )
        calibration = self._calibration
        return {
            "strategy": self._label,
            "session_id": recording.session_id,
            "agent_id": recording.agent_id,
            "source": recording.source,
            "call": item.call,
            "model": cost.model or None,
            "context_messages": len(prompt.messages),
            "context_chars": prompt.chars,
            "context_tokens": prompt.tokens,
            "sent_tokens": prompt.sent_tokens,
            "tokens_exact": prompt.exact,
            "context_window": window,
            "over_window": None if window is None else prompt.tokens > window,
            "breakpoints": tuple((s.index, s.block or 0) for s in cost.spots),
            "input_tokens": usage.input_tokens,
            "cache_read_tokens": usage.cache_read_input_tokens,
            "cache_write_tokens": usage.cache_creation_input_tokens,
            "output_tokens": usage.output_tokens,
            "cost_usd": cost.usd,
            "summary_cost_usd": tally.summary_cost,
            "cleared_tokens": tally.cleared_tokens,
            "compactions_so_far": tally.compactions,
            "server_modelled": server_modelled,
            "recorded_tokens": prompt.recorded_tokens,
            "estimated_tokens": (
                None if calibration is None else self._estimate(calibration, item, prompt)
            ),
        }

    def _estimate(self, calibration: Calibration, item: Call, prompt: Prompt) -> int:
        """The fit's tokens of `prompt` alone (thinking at its own rate, see `Stretches`), with
        the reasoning it sends back (`prompt` is the history as it stands)."""
        thinking = self._thinking.of(self._history)
        return calibration.estimate(prompt.chars, item.call, thinking) + prompt.reasoning_tokens

    def _window(self, model: str) -> int | None:
        """The context window of `model` (looked up once)."""
        if model not in self._windows:
            self._windows[model] = context_window(model)
        return self._windows[model]
