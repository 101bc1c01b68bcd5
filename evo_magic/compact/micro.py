"""Layer 1, MicroCompact: old tool results become a one-line placeholder, in memory, before every
model call. No model call, no loss: the transcript already holds the original output.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from evo_magic.compact.measure import forget, to_json
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

    The `keep_recent` most recent tool results (counting every result, as the seed does) stay
    whole, and so does the latest batch. Of the older ones, a result is replaced when it is
    longer than `min_chars`, is not from a tool in `policy.exclude_tools`, and the placeholder
    makes it shorter. Ids stay, so pairs stay valid. A pass that would free fewer than
    `clear_at_least` characters changes nothing. Running it twice changes nothing the second time.
    """
    # One pass from the newest message back: this runs before every model call on a history of
    # any length, so it touches each block once and encodes only the results it replaces.
    placeholder = policy.placeholder
    placeholder_chars = len(to_json(placeholder))
    keep_recent, min_chars = policy.keep_recent, policy.min_chars
    protected: int | None = None
    seen = 0
    chosen: list[tuple[int, dict[str, Any], int]] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content")
        if message["role"] != "user" or not isinstance(content, list):
            continue
        for block in reversed(content):
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            if protected is None:
                protected = index
            seen += 1
            if seen <= keep_recent or index == protected:
                continue
            value = block.get("content", "")
            if value == placeholder or len(result_text(block)) <= min_chars:
                continue
            # Exact: the drop in characters of the JSON encoding of the whole history.
            freed = len(to_json(value)) - placeholder_chars
            if freed > 0 and not _excluded(messages, index, block, policy.exclude_tools):
                chosen.append((index, block, freed))
    freed_total = sum(freed for _, _, freed in chosen)
    if not chosen or freed_total < policy.clear_at_least:
        return MicroResult()
    chosen.reverse()  # oldest first, as the history reads
    for index, block, _ in chosen:
        block["content"] = placeholder
        forget(messages[index])
    return MicroResult([block["tool_use_id"] for _, block, _ in chosen], freed_total)


def _tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _excluded(
    messages: list[dict[str, Any]], index: int, block: dict[str, Any], exclude: frozenset[str]
) -> bool:
    """True when `block` (in `messages[index]`) answers a call of a tool in `exclude`."""
    return bool(exclude) and _tool_name(messages, index, block) in exclude


def _tool_name(messages: list[dict[str, Any]], index: int, block: dict[str, Any]) -> str | None:
    """The name of the tool whose call `block` (in `messages[index]`) answers.

    In a valid history the call is in the message just before; any other shape is searched.
    """
    tool_use_id = block.get("tool_use_id")
    for position in itertools.chain([index - 1] if index > 0 else [], range(len(messages))):
        message = messages[position]
        content = message.get("content")
        if message["role"] != "assistant" or not isinstance(content, list):
            continue
        for candidate in content:
            if (
                isinstance(candidate, dict)
                and candidate.get("type") == "tool_use"
                and candidate.get("id") == tool_use_id
            ):
                return candidate.get("name")
    return None
