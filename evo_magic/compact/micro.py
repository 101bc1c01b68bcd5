"""Layer 1, MicroCompact: old tool results become a one-line placeholder, in memory, before every
model call. No model call, no loss: the transcript already holds the original output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evo_magic.compact.measure import to_json
from evo_magic.compact.policy import CompactPolicy


@dataclass
class MicroResult:
    """What one micro-compaction pass did."""

    cleared_ids: list[str] = field(default_factory=list)
    chars_freed: int = 0


def result_text(block: dict[str, Any]) -> str:
    """The text of a tool_result block, whether its content is a string or a list of blocks."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def latest_batch_index(messages: list[dict[str, Any]]) -> int | None:
    """Index of the last user message that holds tool results (the batch the model has not seen)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message["role"] == "user" and _tool_results(message):
            return index
    return None


def micro_compact(messages: list[dict[str, Any]], policy: CompactPolicy) -> MicroResult:
    """Replace tool results beyond the `keep_recent` most recent by the placeholder, in place.

    The latest batch is never touched, ids stay (pairs stay valid), results of
    `policy.exclude_tools` and results no longer than `min_chars` are kept, and a pass that would
    free fewer than `clear_at_least` characters changes nothing. Running it twice changes nothing
    the second time.
    """
    protected = latest_batch_index(messages)
    names = _tool_names(messages)
    ordered: list[tuple[int, dict[str, Any]]] = [
        (index, block)
        for index, message in enumerate(messages)
        if message["role"] == "user"
        for block in _tool_results(message)
    ]
    older = ordered[: max(0, len(ordered) - policy.keep_recent)]
    chosen = [
        block
        for index, block in older
        if index != protected
        and names.get(block.get("tool_use_id", "")) not in policy.exclude_tools
        and block.get("content") != policy.placeholder
        and len(result_text(block)) > policy.min_chars
    ]
    # Exact: the drop in characters of the JSON encoding of the whole history.
    freed = sum(
        len(to_json(block["content"])) - len(to_json(policy.placeholder)) for block in chosen
    )
    if not chosen or freed < policy.clear_at_least:
        return MicroResult()
    for block in chosen:
        block["content"] = policy.placeholder
    return MicroResult([block["tool_use_id"] for block in chosen], freed)


def _tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _tool_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {
        block["id"]: block["name"]
        for message in messages
        if message["role"] == "assistant" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    }
