"""Small helpers the built-in strategies share: reading tool results and rewriting blocks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evo_magic.compact.base import Edited, Message
from evo_magic.measure import to_json

if TYPE_CHECKING:
    from evo_magic.history import ResultRef


def result_text(block: Mapping[str, Any]) -> str:
    """The text of a tool_result block, whether its content is a string or a list of parts."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def block_at(messages: Sequence[Message], ref: ResultRef) -> dict[str, Any]:
    return messages[ref.index]["content"][ref.block_index]


def rewrite_blocks(
    messages: Sequence[Message],
    replacements: Iterable[tuple[int, int, dict[str, Any]]],
) -> Edited:
    """`messages` with the blocks at `(index, block_index)` replaced: one new dict per message
    touched, every other message and block reused as it is."""
    by_message: dict[int, dict[int, dict[str, Any]]] = {}
    for index, block_index, block in replacements:
        by_message.setdefault(index, {})[block_index] = block
    changes = {}
    for index, blocks in by_message.items():
        message = messages[index]
        content = [blocks.get(j, block) for j, block in enumerate(message["content"])]
        changes[index] = {**message, "content": content}
    return Edited(messages, changes)


def json_chars(value: Any) -> int:
    """Characters of the JSON of `value` (how much a block's content adds to the measure)."""
    return len(to_json(value))


def tool_use_of(messages: Sequence[Message], ref: ResultRef) -> dict[str, Any] | None:
    """The tool_use block a tool result answers: in the assistant message just before the
    result's message, with the same id (None when there is none)."""
    index = ref.index - 1
    if index < 0 or messages[index].get("role") != "assistant":
        return None
    for block in messages[index].get("content") or []:
        if (
            isinstance(block, dict)
            and block.get("type") == "tool_use"
            and block.get("id") == ref.tool_use_id
        ):
            return block
    return None
