"""The per-call compaction path of evo_magic 0.1.0 (before compaction became strategies), kept
verbatim in substance so that benchmarks can measure today's path against it side by side.

Not used by evo_magic itself. `per_call(messages, micro)` is what 0.1.0's loop ran before
every model call: measure (a size cache keyed by message identity), micro-compact in place
(a scan of the whole history from its newest message back), measure again.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from typing import Any

from evo_magic.measure import to_json
from evo_magic.strategies import MicroCompact

_SizeEntry = tuple[dict[str, Any], Any, int, int]
_sizes: dict[int, _SizeEntry] = {}
CACHE_MIN_MESSAGES = 16
CACHE_SLACK = 4_096
_prune_at = CACHE_SLACK


def message_chars(messages: list[dict[str, Any]]) -> int:
    return len(to_json(messages))


@dataclass
class MicroResult:
    cleared_ids: list[str] = field(default_factory=list)
    chars_freed: int = 0


def cached_message_chars(messages: list[dict[str, Any]]) -> int:
    """`message_chars(messages)`, exactly, encoding only the messages not measured before.

    A remembered size is used while the message's content is the same object with the same
    length. Every change evo_magic makes passes that test: appending a message, merging into the
    last one (a new content list), and micro-compaction (which calls `forget`). Code that edits a
    content block in place must call `forget(message)`.
    """
    if len(messages) < CACHE_MIN_MESSAGES:
        return message_chars(messages)
    sizes = _sizes
    total = 0
    for message in messages:
        content = message.get("content")
        # The entry holds its message, so an entry under this id is this message's.
        entry = sizes.get(id(message))
        if entry is not None and entry[1] is content and entry[2] == len(content):
            total += entry[3]
            continue
        chars = len(to_json(message))
        if isinstance(content, list | str):  # else len() above would fail: never remembered
            sizes[id(message)] = (message, content, len(content), chars)
        total += chars
    if len(sizes) > _prune_at:
        _prune()
    # "[" + messages joined by "," + "]"
    return total + len(messages) + 1


def forget(message: dict[str, Any]) -> None:
    """Drop the remembered size of `message` (its content was edited in place)."""
    _sizes.pop(id(message), None)


def _prune() -> None:
    """Drop the entries of messages that only the cache still holds (replaced histories, other
    sessions gone). Several live sessions keep all their entries: no thrashing between them."""
    global _prune_at
    for key, entry in list(_sizes.items()):  # a copy: another thread may be adding entries
        # References: the entry tuple and getrefcount's argument. CPython counts exactly; on
        # another interpreter a higher count only means the entry is kept.
        if sys.getrefcount(entry[0]) <= 2:
            _sizes.pop(key, None)
    _prune_at = max(CACHE_SLACK, 2 * len(_sizes))


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


def micro_compact(messages: list[dict[str, Any]], policy: MicroCompact) -> MicroResult:
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


def per_call(messages: list[dict[str, Any]], policy: MicroCompact) -> None:
    """What 0.1.0 did before it sent a request: measure, micro-compact, measure."""
    cached_message_chars(messages)
    micro_compact(messages, policy)
    cached_message_chars(messages)
