"""What the real Messages API accepts in ``messages``: roles, content blocks (text, tool use and
result, media, thinking, compaction), a block's ``cache_control`` shape, and the pairing of
every tool_use with its tool_result. Error messages follow the API's wording closely."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from support.fake_api.cache import CACHE_TTL_SECONDS, UNMARKABLE_BLOCKS
from support.fake_api.script import text

_ROLES = ("user", "assistant")

_BLOCK_TYPES = frozenset(
    {
        "text",
        "tool_use",
        "tool_result",
        "image",
        "thinking",
        "redacted_thinking",
        "document",
        "compaction",
    }
)

_TOOL_RESULT_CONTENT_TYPES = frozenset({"text", "image"})

_TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


@dataclass
class _Turn:
    """Consecutive messages of one role, merged as the real API does.

    ``blocks`` holds ``(path, block)`` pairs where ``path`` is like ``messages.2.content.0``,
    pointing into the original (unmerged) request.
    """

    role: str
    first_index: int
    blocks: list[tuple[str, dict]] = field(default_factory=list)


def validate_messages(messages: list) -> str | None:
    """The ``messages`` part of `validate_request`: None if valid, else the error message."""
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    for i, message in enumerate(messages):
        if (error := _check_message(i, message)) is not None:
            return error
    if messages[0]["role"] != "user" and not _opens_with_compaction(messages[0]):
        return 'messages: first message must use the "user" role'
    turns = _merge_turns(messages)
    checks = (_check_block_roles, _check_unique_tool_use_ids, _check_tool_pairing)
    for check in checks:
        if (error := check(turns)) is not None:
            return error
    return None


def _opens_with_compaction(message: dict) -> bool:
    """A history may start with the assistant message holding a compaction block (which
    stands for everything before it)."""
    content = message.get("content")
    return isinstance(content, list) and bool(content) and content[0].get("type") == "compaction"


def _check_message(i: int, message: Any) -> str | None:
    path = f"messages.{i}"
    if not isinstance(message, dict):
        return f"{path}: Input should be a valid dictionary"
    if message.get("role") not in _ROLES:
        return f"{path}.role: Input should be 'user' or 'assistant'"
    if "content" not in message:
        return f"{path}.content: Field required"
    content = message["content"]
    if isinstance(content, str):
        if not content:
            return _empty_content_error(path)
        if not content.strip():
            return f"{path}.content: text content blocks must contain non-whitespace text"
        return None
    if not isinstance(content, list):
        return f"{path}.content: Input should be a valid string or a list of content blocks"
    if not content:
        return _empty_content_error(path)
    for j, block in enumerate(content):
        if (error := _check_block(f"{path}.content.{j}", block)) is not None:
            return error
    return None


def _empty_content_error(path: str) -> str:
    return (
        f"{path}: all messages must have non-empty content except for the optional final "
        "assistant message"
    )


def _check_block(path: str, block: Any) -> str | None:
    if not isinstance(block, dict):
        return f"{path}: Input should be a valid dictionary"
    kind = block.get("type")
    if kind not in _BLOCK_TYPES:
        expected = ", ".join(f"'{t}'" for t in sorted(_BLOCK_TYPES))
        return (
            f"{path}: Input tag '{kind}' found using 'type' does not match any of the "
            f"expected tags: {expected}"
        )
    if kind in UNMARKABLE_BLOCKS and block.get("cache_control") is not None:
        return f"{path}.{kind}.cache_control: Extra inputs are not permitted"
    if (error := check_marker(path, block)) is not None:
        return error
    if kind == "text":
        return check_text_block(path, block)
    if kind == "tool_use":
        return _check_tool_use_block(path, block)
    if kind == "tool_result":
        return _check_tool_result_block(path, block)
    if kind in ("image", "document"):
        return _check_media_block(path, block)
    if kind == "thinking":
        for name in ("thinking", "signature"):
            if not isinstance(block.get(name), str):
                return f"{path}.thinking.{name}: Field required"
    return None


def _check_media_block(path: str, block: dict) -> str | None:
    """An image or document needs its source: base64 data with its media type, or a URL."""
    source = block.get("source")
    if not isinstance(source, dict):
        return f"{path}.source: Field required"
    if source.get("type") == "url":
        return None if isinstance(source.get("url"), str) else f"{path}.source.url: Field required"
    if source.get("type") not in ("base64", "text", "content", "file"):
        kind = source.get("type")
        return (
            f"{path}.source: Input tag '{kind}' found using 'type' does not match any of the tags"
        )
    if source.get("type") == "base64":
        for name in ("media_type", "data"):
            if not isinstance(source.get(name), str):
                return f"{path}.source.base64.{name}: Field required"
    return None


def check_text_block(path: str, block: dict) -> str | None:
    value = block.get("text")
    if value is None:
        return f"{path}.text: Field required"
    if not isinstance(value, str):
        return f"{path}.text: Input should be a valid string"
    if (error := check_marker(path, block)) is not None:
        return error
    if not value and block.get("cache_control") is not None:
        return f"{path}.text: cache_control cannot be set for empty text blocks"
    if not value:
        return f"{path}.text: text content blocks must be non-empty"
    if not value.strip():
        return f"{path}.text: text content blocks must contain non-whitespace text"
    return None


def _check_tool_use_block(path: str, block: dict) -> str | None:
    block_id = block.get("id")
    if not isinstance(block_id, str):
        return f"{path}.id: Field required"
    if not _TOOL_USE_ID.match(block_id):
        return f"{path}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
    if not isinstance(block.get("name"), str):
        return f"{path}.name: Field required"
    if "input" not in block:
        return f"{path}.input: Field required"
    if not isinstance(block["input"], dict):
        return f"{path}.input: Input should be a valid dictionary"
    return None


def _check_tool_result_block(path: str, block: dict) -> str | None:
    if not isinstance(block.get("tool_use_id"), str):
        return f"{path}.tool_use_id: Field required"
    content = block.get("content", "")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{path}.content: Input should be a valid string or a list of text/image blocks"
    for k, inner in enumerate(content):
        inner_path = f"{path}.content.{k}"
        if not isinstance(inner, dict) or inner.get("type") not in _TOOL_RESULT_CONTENT_TYPES:
            kind = inner.get("type") if isinstance(inner, dict) else None
            return (
                f"{inner_path}: Input tag '{kind}' found using 'type' does not match any of "
                "the expected tags: 'image', 'text'"
            )
        if inner["type"] == "text" and (error := check_text_block(inner_path, inner)):
            return error
        if inner["type"] == "image" and (error := _check_media_block(inner_path, inner)):
            return error
        if (error := check_marker(inner_path, inner)) is not None:
            return error
    return None


def check_marker(path: str, block: dict) -> str | None:
    """The shape of a block's ``cache_control``, if it has one."""
    if block.get("cache_control") is None:
        return None  # absent, or null (the SDK's "no breakpoint")
    return check_cache_control(f"{path}.cache_control", block["cache_control"])


def check_cache_control(path: str, control: Any) -> str | None:
    if not isinstance(control, dict):
        return f"{path}: Input should be a valid dictionary"
    if "type" not in control:
        return f"{path}.type: Field required"
    if control["type"] != "ephemeral":
        return f"{path}.type: Input should be 'ephemeral'"
    if "ttl" in control and control["ttl"] not in CACHE_TTL_SECONDS:
        return f"{path}.ttl: Input should be '5m' or '1h'"
    for key in control:
        if key not in ("type", "ttl"):
            return f"{path}.{key}: Extra inputs are not permitted"
    return None


def _message_blocks(i: int, message: dict) -> list[tuple[str, dict]]:
    content = message["content"]
    if isinstance(content, str):
        return [(f"messages.{i}.content", text(content))]
    return [(f"messages.{i}.content.{j}", block) for j, block in enumerate(content)]


def _merge_turns(messages: list[dict]) -> list[_Turn]:
    turns: list[_Turn] = []
    for i, message in enumerate(messages):
        if not turns or turns[-1].role != message["role"]:
            turns.append(_Turn(role=message["role"], first_index=i))
        turns[-1].blocks.extend(_message_blocks(i, message))
    return turns


def _check_block_roles(turns: list[_Turn]) -> str | None:
    for turn in turns:
        forbidden = ("tool_result",) if turn.role == "assistant" else ("tool_use", "compaction")
        for path, block in turn.blocks:
            if block["type"] in forbidden:
                kind = block["type"]
                return f"{path}: `{kind}` blocks are not allowed in {turn.role} messages"
    return None


def _check_unique_tool_use_ids(turns: list[_Turn]) -> str | None:
    seen: set[str] = set()
    for turn in turns:
        for path, block in turn.blocks:
            if block["type"] != "tool_use":
                continue
            if block["id"] in seen:
                return f"{path}: `tool_use` ids must be unique (duplicate id: {block['id']})"
            seen.add(block["id"])
    return None


def _tool_use_ids(turn: _Turn | None) -> list[str]:
    if turn is None:
        return []
    return [block["id"] for _, block in turn.blocks if block["type"] == "tool_use"]


def _check_tool_pairing(turns: list[_Turn]) -> str | None:
    for n, turn in enumerate(turns):
        following = turns[n + 1] if n + 1 < len(turns) else None
        if turn.role == "assistant":
            error = _check_answered(turn, following)
        else:
            error = _check_user_tool_results(turn, turns[n - 1] if n > 0 else None)
        if error is not None:
            return error
    return None


def _check_answered(turn: _Turn, following: _Turn | None) -> str | None:
    """Every tool_use of ``turn`` needs a tool_result at the start of the next (user) turn."""
    ids = _tool_use_ids(turn)
    if not ids:
        return None
    leading, later = _tool_result_ids(following)
    missing = [tool_id for tool_id in ids if tool_id not in leading]
    if not missing:
        return None
    error = (
        f"messages.{turn.first_index}: `tool_use` ids were found without `tool_result` blocks "
        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
        "corresponding `tool_result` block in the next message."
    )
    if any(tool_id in later for tool_id in missing):
        error += " (`tool_result` blocks must come first in the user message, before any text.)"
    return error


def _tool_result_ids(turn: _Turn | None) -> tuple[set[str], set[str]]:
    """The tool_use_ids answered at the start of ``turn``, and those answered after a non-result."""
    leading: set[str] = set()
    later: set[str] = set()
    if turn is None:
        return leading, later
    target = leading
    for _, block in turn.blocks:
        if block["type"] != "tool_result":
            target = later
        else:
            target.add(block["tool_use_id"])
    return leading, later


def _check_user_tool_results(turn: _Turn, previous: _Turn | None) -> str | None:
    """tool_results must answer the previous assistant turn and come before other blocks."""
    expected = set(_tool_use_ids(previous))
    seen_other = False
    for path, block in turn.blocks:
        if block["type"] != "tool_result":
            seen_other = True
            continue
        if seen_other:
            return (
                f"{path}: `tool_result` blocks must come first in the user message, "
                "before any text."
            )
        if block["tool_use_id"] not in expected:
            return (
                f"{path}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block['tool_use_id']}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
    return None
