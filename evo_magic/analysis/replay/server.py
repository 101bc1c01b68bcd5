"""Replay's modelled server: what the API's context management would do to a replayed prompt.

The server strategies of a setting (`ServerClearThinking`, `ServerClearToolUses`,
`ServerCompact`) edit no history: the live loop sends their edits and the server applies them.
Replay builds the same edits (`ServerSide.params`, the code the live loop sends, which
also hands a strategy the capability table says the model lacks over to its fallback) and
applies them with the one implementation of their rules (`compact.server_edits`; the test
suite's loopback fake applies the documented rules, written again on their own, to check it)
to the prompt each call would send, counted in tokens as the API counts it (the whole prompt,
calibrated on the recorded usage). What the server cleared is not in the prompt the model reads,
so the prompt cache is modelled on the edited prompt: a clearing changes the prefix from the
first cleared result on (a cache write there, read again by the next calls while the same
results stay cleared), as the context editing docs say.

A compaction (the prompt reaching `compact_20260112`'s trigger) is modelled as the API's
iterations: a `compaction` iteration that reads the whole prompt and writes a stand-in summary
(the recorded summary where the session summarised the same history, else the recorded median
size), priced as the live loop prices `usage.iterations`' compaction entry (the call's
`summary_cost_usd`), then the `message` iteration on the compacted context (the block alone:
system and tools still cached). The history then becomes what the API keeps: the compaction
block, then what follows (the reply, merged into the block's message as the live loop does).

`ModelledServer` applies the edits call after call; `ServerPart` is the server within one run
(which edits are sent, the clearings reported by the live `ServerSide.cleared`, the
compaction's events and cost, the history it leaves once the reply comes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evo_magic.analysis.replay.calibration import Calibration, tokens_of
from evo_magic.analysis.replay.options import Skipped
from evo_magic.analysis.replay.pricing import Pricing, tokens_per_char
from evo_magic.analysis.replay.summaries import Summaries
from evo_magic.analysis.replay.tally import Tally
from evo_magic.catalog import COMPACT_EDIT
from evo_magic.compact.compactor import Compactor
from evo_magic.compact.server import request_params, server_strategies
from evo_magic.compact.server_edits import Memo, apply_edits
from evo_magic.events import CompactionFinished
from evo_magic.history import History
from evo_magic.measure import ContextSize, TokenAnchor, anchored_tokens, list_chars, to_json
from evo_magic.messages import Message
from evo_magic.summariser import Summary
from evo_magic.usage import Usage


@dataclass
class ServerCall:
    """What the modelled server did to one call's prompt."""

    messages: Sequence[Message]
    """The prompt the model reads (the edited one; after a compaction, the block alone)."""
    tokens: int
    """Its tokens (the message iteration's input, as the API counts it)."""
    applied: list[dict[str, Any]] = field(default_factory=list)
    """The clearing edits applied, as the API reports `applied_edits`."""
    compacted: bool = False
    compact_tokens: int = 0
    """The prompt's tokens when it compacted (the compaction iteration's input)."""
    instructions: str | None = None


class ModelledServer:
    """Applies a setting's server edits call after call. Each edited message stays the same
    object while its edit stays the same (the prompt cache's chain then rehashes, and the
    counting measures, only what changed)."""

    def __init__(self) -> None:
        self.memo: Memo = {}
        self._chars: dict[int, tuple[Message, int]] = {}

    def call(
        self,
        view: Sequence[Message],
        edits: list[dict[str, Any]],
        count: Callable[[Sequence[Message]], int],
    ) -> ServerCall:
        """The call's prompt `view` after `edits`; `count` gives a prompt's tokens."""
        edited = apply_edits(view, edits, lambda messages: count(messages), memo=self.memo)
        messages = edited.messages
        tokens = count(messages) if edited.applied else count(view)
        done = ServerCall(messages, tokens, edited.applied)
        if edited.compact is not None:
            done.compacted = True
            done.compact_tokens = edited.compact_tokens
            done.instructions = (edited.compact.get("instructions") or "").strip() or None
        return done

    def chars(self, message: Message) -> int:
        """Characters of an edited message's JSON, measured once per message."""
        found = self._chars.get(id(message))
        if found is None or found[0] is not message:
            found = self._chars[id(message)] = (message, chars_of(message))
        return found[1]


def stand_in_block(summary: str) -> Message:
    """The assistant message a modelled compaction leaves: its compaction block (the real one
    also carries an opaque `encrypted_content` and a `signature`, not modelled)."""
    return {"role": "assistant", "content": [{"type": "compaction", "content": summary}]}


def without_compaction(message: Message) -> Message | None:
    """A recorded reply as it would be without the server's compaction (its blocks after the
    compaction block; None when the block was all of it): a setting that did not compact there
    never got that block."""
    content = message.get("content")
    if message.get("role") != "assistant" or not isinstance(content, list):
        return message
    kept = [b for b in content if not (isinstance(b, dict) and b.get("type") == "compaction")]
    if len(kept) == len(content):
        return message
    return {**message, "content": kept} if kept else None


def chars_of(message: Message) -> int:
    """Characters of one message's JSON (as the history measures it)."""
    return len(to_json(message))


class ServerPart:
    """The modelled server in one run: the edits its setting sends, what they clear (events of
    the call), its compaction modelled as the API's iterations (priced in the call's summary
    cost), the history a compaction leaves once its reply comes, a summary asked on demand
    (`ServerSummarise`), and under "recorded" the compactions the server really made."""

    def __init__(
        self,
        recorded_mode: bool,
        calibration: Calibration | None,
        parts: tuple[History, Compactor, Summaries, Pricing, Tally],
        recorded_usage: dict[tuple[int, int], Usage],
    ):
        self._recorded_mode = recorded_mode
        self._calibration = calibration
        self._history, self._compactor, self._summaries, self._pricing, self._tally = parts
        self._recorded_usage = recorded_usage
        """The compaction iterations of the server's recorded compactions, by their epoch."""
        self._server = ModelledServer()
        self._cleared = 0
        """Tokens the modelled server cleared from the previous call's prompt."""
        self._block: Message | None = None
        """A modelled compaction's block, waiting for the reply it opens."""
        self._charged: set[tuple[int, int]] = set()
        """Recorded server compactions whose iteration is charged already."""

    @property
    def pending(self) -> bool:
        """True while a modelled compaction waits for its reply."""
        return self._block is not None

    def serve(self, view: Sequence[Message], chars: int, tokens: int) -> ServerCall | None:
        """What the modelled server does to this call's prompt (None: no server strategy). Its
        clearings and compaction are events of this call, its compaction iteration part of the
        call's summary cost. Under "recorded" only the clearing is modelled (for the prompt
        cache; the tokens are the recorded ones): the session's compactions are recorded, and
        its strategies ran as recorded (no capability table is asked)."""
        edits = self._edits()
        if not edits:
            return None
        count = self._counter(view, chars, tokens)
        served = self._server.call(view, edits, count)
        cleared = sum(int(a.get("cleared_input_tokens") or 0) for a in served.applied)
        # Cleared again on every call while configured: the row counts what is newly cleared.
        self._tally.cleared_tokens += max(cleared - self._cleared, 0)
        self._cleared = cleared
        # The clearings as the live loop reports the API's `applied_edits`: its own events.
        self._compactor.server.cleared(served.applied, ContextSize(len(view), chars, tokens))
        if served.compacted:
            served = self._compact(view, served, count)
        return served

    def _edits(self) -> list[dict[str, Any]]:
        """The edits the setting's server strategies send on this call (none: no server)."""
        strategies = server_strategies(self._compactor.strategies)
        if not strategies:
            return []
        if self._recorded_mode:
            edits = request_params(strategies).edits
            return [edit for edit in edits if edit.get("type") != COMPACT_EDIT]
        try:  # as live: a model the table says lacks one hands over to its fallback
            return self._compactor.server.params(self._pricing.model).edits
        except ValueError as exc:
            raise Skipped(str(exc)) from None

    def _counter(
        self, view: Sequence[Message], chars: int, tokens: int
    ) -> Callable[[Sequence[Message]], int]:
        """Tokens of a prompt of other messages than `view` (`chars` characters, `tokens`
        tokens): the change in characters at the conversation's rate."""
        rate = tokens_per_char(self._calibration)
        anchor = TokenAnchor(chars, tokens, rate)  # the live history's rule, from this call
        history = self._history
        measure = self._server.chars

        def count(messages: Sequence[Message]) -> int:
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
        self, view: Sequence[Message], served: ServerCall, count: Callable[..., int]
    ) -> ServerCall:
        """The server's compaction at this call: a compaction iteration reading the prompt
        and writing the summary (charged to this call's summary cost), then the message
        iteration on the block alone; the history becomes the block and the reply."""
        pricing = self._pricing
        summary = self._summaries(list(view), served.instructions)
        block = stand_in_block(summary.text)
        pricing.served_chain.update(served.messages)
        spots = pricing.spots(view)
        read = pricing.usage(served.compact_tokens, spots, chain=pricing.served_chain)
        usage = replace(read, output_tokens=tokens_of(len(summary.text), self._calibration))
        tokens = count([block])
        before = ContextSize(len(view), self._history.size().chars, served.compact_tokens)
        after = ContextSize(1, list_chars(chars_of(block), 1), tokens)
        self._tally.observe(
            CompactionFinished(
                "server", served.instructions, before, after, True, 0.0,
                summary=summary.text, summary_usage=usage,
                strategy=self._compactor.server.name_of(COMPACT_EDIT), layer="every_call",
            )
        )  # fmt: skip
        self._block = block
        self._cleared = 0
        return replace(served, messages=[block], tokens=tokens)

    def after_compaction(self, message: Message | None, stop_reason: str | None) -> Message | None:
        """The history a modelled compaction leaves, once its reply comes (`message`, which
        ended for `stop_reason`; None: none came): the block and the reply as one message, as
        the live loop keeps them. Returns what is still to append (None: nothing)."""
        block, self._block = self._block, None
        assert block is not None
        if message is not None and message.get("role") == "assistant":
            merged = {"role": "assistant", "content": [*block["content"], *message["content"]]}
            self._compactor.adopt([merged], block["content"][0]["content"], trigger="server")
            self._history.answered(stop_reason)
            return None
        self._compactor.adopt([block], block["content"][0]["content"], trigger="server")
        return message

    def summarise(self, messages: Sequence[Message], focus: str | None) -> tuple[Message, Summary]:
        """`ServerSummarise` asked (a recorded `%compact` under a setting that has it): the
        modelled server's block, priced as one request that reads the conversation (from the
        modelled cache) and writes the summary."""
        summary = self._summaries(messages, focus)
        output = tokens_of(len(summary.text), self._calibration)
        in_context = self._pricing.in_context_usage(self._history, messages, 0, output)
        block = stand_in_block(summary.text)["content"][0]
        return block, Summary(summary.text, in_context or summary.usage, summary.model)

    def recorded_compaction(self, epoch: tuple[int, int], sent: int, tokens: int) -> None:
        """Under "recorded", the server compacted during this call (ending `epoch`): the call
        is its message iteration (`tokens`; `sent` before), its compaction iteration the call's
        summary cost, counted once (its replacement is applied when it comes)."""
        if epoch in self._recorded_usage and epoch not in self._charged:
            self._charged.add(epoch)
            self._tally.charge_summary(self._recorded_usage[epoch])
            self._tally.compacted(max(sent - tokens, 0))

    def charged(self, epoch: tuple[int, int]) -> bool:
        """True when the recorded server compaction ending `epoch` is counted already."""
        return epoch in self._charged
