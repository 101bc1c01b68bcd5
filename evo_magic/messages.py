"""The shape of a Messages API message, read: its blocks, its text, its tool calls.

Every part of the project that looks inside a message (the history, the compactor, the
strategies' context, the meter, replay) reads it with these, so that string content, stray
non-dict blocks and missing fields are treated one way everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evo_magic.measure import to_json

Message = dict[str, Any]
"""A message in the Messages API's parameter shape: `{"role": ..., "content": ...}`."""


def as_blocks(content: Any) -> list[Any]:
    """A message's content as a list of its blocks, as they are: a string is one text block,
    nothing else is dropped or changed (what a rewrite of the message starts from)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def with_blocks(message: Mapping[str, Any], blocks: Iterable[dict[str, Any]]) -> Message:
    """A new `message` with `blocks` after its own (after any tool results, as the API
    requires of text that joins a results message)."""
    return {**message, "content": [*as_blocks(message.get("content")), *blocks]}


def content_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The blocks of a message; string content counts as one text block."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


def blocks_of_type(message: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    """The blocks of a message of one type (`text`, `tool_use`, `tool_result`, ...)."""
    return [block for block in content_blocks(message) if block.get("type") == kind]


THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
"""Blocks of the model's reasoning: sent back with its turn, counted by the server at a rate
of their own (the text kept in a transcript is often a summary of what the model thought)."""


def thinking_chars(messages: Iterable[Mapping[str, Any]]) -> int:
    """Characters of the JSON encoding of the thinking blocks in `messages`."""
    return sum(
        len(to_json(block))
        for message in messages
        for block in content_blocks(message)
        if block.get("type") in THINKING_BLOCKS
    )


def without_unsigned_thinking(messages: Iterable[Message]) -> list[Message]:
    """`messages` without the thinking blocks that carry no signature (rebuilt from a
    transcript that kept none): the API refuses them. A message that holds none is returned
    itself; one of such thinking alone keeps a text block saying so (the API refuses an empty
    message)."""
    out: list[Message] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(_unsigned(b) for b in content):
            out.append(message)
            continue
        kept = [block for block in content if not _unsigned(block)]
        out.append({**message, "content": kept or [{"type": "text", "text": "[thinking]"}]})
    return out


def _unsigned(block: Any) -> bool:
    return (
        isinstance(block, dict) and block.get("type") == "thinking" and not block.get("signature")
    )


def has_text(message: Mapping[str, Any]) -> bool:
    """True when the message holds text (a request or a summary, not only tool results)."""
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    return bool(blocks_of_type(message, "text"))


def holds_text(message: Mapping[str, Any], text: str) -> bool:
    """True when one of the message's text blocks contains `text`."""
    return any(text in (block.get("text") or "") for block in blocks_of_type(message, "text"))


def first_text(message: Mapping[str, Any]) -> str | None:
    """The text of the message's first text block, if it has one."""
    texts = blocks_of_type(message, "text")
    return texts[0].get("text") if texts else None


def calls_tools(message: Mapping[str, Any]) -> bool:
    """True when the message holds a tool call (the turn goes on after its results)."""
    return bool(blocks_of_type(message, "tool_use"))


def tool_uses(messages: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every tool_use block of the assistant messages, by its id (its name and input)."""
    found: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for block in blocks_of_type(message, "tool_use"):
            found[str(block.get("id", ""))] = block
    return found


def tool_names(messages: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The tool each tool_use id of the assistant messages called."""
    return {key: str(block.get("name", "")) for key, block in tool_uses(messages).items()}
