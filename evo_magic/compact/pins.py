"""Pinned texts: what is part of every request, verbatim, whatever a strategy does.

A pin lives in the history as a user text block of its own (`pin_block`): appended at the
history's end when it is pinned (the cached prefix stays as it is), and, after every full
compaction, right after the compacted header (the replacement rewrites the cache anyway). The
compactor checks every result against the active pins and puts back any a strategy dropped
(`with_pins`); unpinning stops the protection, and the text leaves the context with the next
full compaction. Living in the history, not in the system prompt, a pin keeps the API's rules
(a user text block, never empty, never between a call and its result) and the prompt cache
(pinning never rewrites what was sent before).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.compacted import FILE_PIN_PREFIX, PIN_PREFIX

Message = dict[str, Any]


@dataclass(frozen=True)
class Pin:
    """One pinned text (or file: `path`, its text as last read)."""

    id: int
    text: str
    path: str | None = None

    @property
    def block_text(self) -> str:
        """The text of the block that carries the pin in a request."""
        if self.path is not None:
            return FILE_PIN_PREFIX.format(path=self.path) + self.text
        return PIN_PREFIX + self.text


def pin_message(pin: Pin) -> Message:
    """The user message that brings a new pin into the history."""
    return {"role": "user", "content": [{"type": "text", "text": pin.block_text}]}


def missing_pins(messages: Sequence[Mapping[str, Any]], texts: Sequence[str]) -> list[str]:
    """The pin block texts of `texts` no user text block of `messages` holds exactly."""
    present = {
        block.get("text")
        for message in messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, Mapping) and block.get("type") == "text"
    }
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            present.add(message["content"])
    return [text for text in texts if text not in present]


def with_pins(messages: Sequence[Message], texts: Sequence[str]) -> list[Message]:
    """`messages` with every pin of `texts` they lack put back, each as its own text block
    right after the first block of the first message (the compacted header); a new list, the
    messages themselves untouched. A first message that is not the user's gets a user message
    of the pins before it."""
    result = list(messages)
    missing = missing_pins(result, texts)
    if not missing:
        return result
    blocks = [{"type": "text", "text": text} for text in missing]
    first = result[0] if result else None
    if first is None or first.get("role") != "user":
        return [{"role": "user", "content": blocks}, *result]
    content = first["content"]
    content = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    at = 1 if content and content[0].get("type") == "text" else 0
    result[0] = {**first, "content": [*content[:at], *blocks, *content[at:]]}
    return result
