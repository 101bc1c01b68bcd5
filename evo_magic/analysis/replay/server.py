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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo_magic.compact.server_edits import Memo, apply_edits
from evo_magic.measure import to_json
from evo_magic.messages import Message


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
