"""Is a history one the Messages API accepts? The check every strategy's result passes.

The rules (those of the real API): at least one message, the first from the user (or an
assistant message opening with a server's `compaction` block, which stands for all before it);
every message
has non-empty content; no empty or whitespace-only text block; tool_use blocks only from the
assistant, with a unique id of letters, digits, `_` and `-`, a name and an object input;
tool_result blocks only from the user; consecutive messages of one role count as one turn, and
every tool_use of an assistant turn is answered by a tool_result at the start of the very next
turn, which answers nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_ID = re.compile(r"[A-Za-z0-9_-]+")


def history_problem(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """Why the API would reject `messages` as a request's history, or None when it would not."""
    if not messages:
        return "the history is empty"
    if messages[0].get("role") != "user" and not _opens_with_compaction(messages[0]):
        return "the first message is not from the user"
    seen_ids: set[str] = set()
    open_calls: list[str] = []
    previous_role = None
    for index, message in enumerate(messages):
        problem = message_problem(message, index, seen_ids)
        if problem:
            return problem
        role = message["role"]
        blocks = _blocks(message)
        if role != previous_role:
            # A new turn: the previous assistant turn's calls must be answered first here.
            problem = _answers_problem(index, blocks if role == "user" else [], open_calls)
            if problem:
                return problem
            open_calls = []
        elif role == "user" and any(b.get("type") == "tool_result" for b in blocks):
            return f"message {index}: tool results answer no call (they must follow the call)"
        if role == "assistant":
            open_calls += [b["id"] for b in blocks if b.get("type") == "tool_use"]
        previous_role = role
    if open_calls:
        return f"tool call(s) {', '.join(open_calls)} have no tool_result"
    return None


def _opens_with_compaction(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return (
        isinstance(content, list)
        and bool(content)
        and isinstance(content[0], Mapping)
        and content[0].get("type") == "compaction"
    )


def message_problem(message: Any, index: int, seen_ids: set[str] | None = None) -> str | None:
    """What is wrong with one message on its own (None: nothing). Adds its tool_use ids to
    `seen_ids` and refuses one already there."""
    if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
        return f"message {index} is not a user or assistant message"
    content = message.get("content")
    if isinstance(content, str):
        return None if content.strip() else f"message {index} has no text"
    if not isinstance(content, list) or not content:
        return f"message {index} has no content"
    for position, block in enumerate(content):
        problem = _block_problem(block, message["role"], seen_ids)
        if problem:
            return f"message {index}, block {position}: {problem}"
    return None


def _block_problem(block: Any, role: str, seen_ids: set[str] | None) -> str | None:
    """What is wrong with one content block of a `role` message (see `_BLOCK_RULES`)."""
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        return "not a content block"
    rule = _BLOCK_RULES.get(block["type"])
    return None if rule is None else rule(block, role, seen_ids)


def _text_problem(block: Mapping[str, Any], role: str, seen_ids: set[str] | None) -> str | None:
    if isinstance(block.get("text"), str) and block["text"].strip():
        return None
    return "empty text"


def _tool_use_problem(block: Mapping[str, Any], role: str, seen_ids: set[str] | None) -> str | None:
    """Only from the assistant, a valid id never used before, a name and an object input."""
    if role != "assistant":
        return "a tool_use outside an assistant message"
    block_id = block.get("id")
    if not isinstance(block_id, str) or not _ID.fullmatch(block_id):
        return f"tool_use id {block_id!r} is not valid"
    if not isinstance(block.get("name"), str) or not isinstance(block.get("input"), dict):
        return f"tool_use {block_id} needs a name and an object input"
    if seen_ids is not None:
        if block_id in seen_ids:
            return f"tool_use id {block_id} is used twice"
        seen_ids.add(block_id)
    return None


def _tool_result_problem(
    block: Mapping[str, Any], role: str, seen_ids: set[str] | None
) -> str | None:
    if role != "user":
        return "a tool_result outside a user message"
    if not isinstance(block.get("tool_use_id"), str):
        return "a tool_result without tool_use_id"
    return None


_BLOCK_RULES: dict[str, Callable[[Mapping[str, Any], str, set[str] | None], str | None]] = {
    "text": _text_problem,
    "tool_use": _tool_use_problem,
    "tool_result": _tool_result_problem,
}
"""The rules by kind of block; a block of another kind passes."""


def _answers_problem(index: int, blocks: list[Mapping[str, Any]], calls: list[str]) -> str | None:
    """The turn starting at message `index` must open with results for exactly `calls`."""
    leading = []
    for block in blocks:
        if block.get("type") != "tool_result":
            break
        leading.append(block["tool_use_id"])
    if any(b.get("type") == "tool_result" for b in blocks[len(leading) :]):
        return f"message {index}: tool results must come before any other block"
    missing = [call for call in calls if call not in leading]
    if missing:
        return f"tool call(s) {', '.join(missing)} are not answered by message {index}"
    extra = [result for result in leading if result not in calls]
    if extra:
        return f"message {index}: tool result(s) {', '.join(extra)} answer no call"
    return None


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content
