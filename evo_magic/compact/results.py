"""What a strategy returned, checked before it touches the history: an edit in place (the same
messages, some blocks rewritten) or a replacement of the whole history, and whether it may be
applied. Every refusal is a `CompactionRefused` saying why; the compactor turns it into a failed
compaction that leaves the history byte-identical."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evo_magic.compact.base import Edited
from evo_magic.compact.validate import history_problem, message_problem
from evo_magic.measure import message_chars
from evo_magic.messages import Message, content_blocks, holds_text


class CompactionRefused(Exception):
    """A strategy's result cannot replace the history; the message says why."""


def in_place_changes(
    result: Sequence[Message], view: Sequence[Message]
) -> dict[int, Message] | None:
    """The messages a same-length result changes, when it only rewrites messages in place;
    None when it changes the history's shape (a replacement)."""
    if isinstance(result, Edited) and result.base is view:
        return {i if i >= 0 else i + len(view): m for i, m in result.changes.items()}
    if len(result) != len(view):
        return None
    return {i: new for i, (old, new) in enumerate(zip(view, result, strict=True)) if new is not old}


def check_edits(
    changes: dict[int, Message], view: Sequence[Message], pending: str | None
) -> list[dict[str, Any]]:
    """The block edits `changes` make to `view` (`{index, block_index, block}`);
    CompactionRefused when one is not allowed."""
    edits: list[dict[str, Any]] = []
    for index, message in changes.items():
        if not 0 <= index < len(view):
            raise CompactionRefused(f"edit of message {index}, which does not exist")
        problem = _edit_problem(view[index], message, index, pending)
        if problem:
            raise CompactionRefused(problem)
        edits += _block_edits(index, view[index], message)
    return edits


def check_replacement(
    new: list[Message],
    view: Sequence[Message],
    pending: str | None,
    before_chars: int,
    must_shrink: bool,
) -> None:
    """CompactionRefused unless `new` may replace `view`: a history the API accepts, ending
    with the user's turn when the history did, carrying the pending request, and (when
    `must_shrink`: a compaction, not an every-call edit) smaller than `before_chars`."""
    problem = history_problem(new)
    if problem:
        raise CompactionRefused(f"the result is not a valid history: {problem}")
    if view[-1]["role"] == "user" and new[-1]["role"] != "user":
        raise CompactionRefused("the result does not end with the user's turn, as the history did")
    if pending and not any(holds_text(m, pending) for m in new if m["role"] == "user"):
        raise CompactionRefused("the result drops the user's pending request")
    if must_shrink:
        chars = message_chars(new)
        if chars >= before_chars:
            raise CompactionRefused(
                f"the result ({chars:,} characters) would not be smaller than the history "
                f"({before_chars:,})"
            )


def reason_of(strategy: str, exc: Exception) -> str:
    """Why the strategy named `strategy` failed, in one line: a refusal's reason, a model's or
    summariser's own message, or the exception's type and message."""
    if isinstance(exc, CompactionRefused):
        return f"{strategy}: {exc}"
    if type(exc).__name__ in ("ModelError", "SummaryError"):
        return f"{strategy}: {exc}"
    return f"{strategy} raised {type(exc).__name__}: {exc}"


def block_id(block: dict[str, Any]) -> str | None:
    """The tool_use id a tool_use or tool_result block belongs to (None for other blocks)."""
    return block.get("tool_use_id") or (
        block.get("id") if block.get("type") == "tool_use" else None
    )


def _edit_problem(old: Message, new: Any, index: int, pending: str | None) -> str | None:
    """Why `new` cannot replace `old` in place: an edit may change what blocks say, never the
    message's role nor which calls and results it holds."""
    problem = message_problem(new, index)
    if problem:
        return problem
    if new["role"] != old["role"]:
        return f"message {index} changed role"
    if _pairs(old) != _pairs(new):
        return f"message {index}: its tool calls or results changed (ids must stay, in order)"
    dropped = pending and holds_text(old, pending) and not holds_text(new, pending)
    return f"message {index}: the pending request was removed" if dropped else None


def _pairs(message: Message) -> list[tuple[str, Any]]:
    """The tool calls and results of a message, in order: what pairs it with its neighbours."""
    return [
        (kind, block.get("id") if kind == "tool_use" else block.get("tool_use_id"))
        for block in content_blocks(message)
        if (kind := block.get("type")) in ("tool_use", "tool_result")
    ]


def _block_edits(index: int, old: Message, new: Message) -> list[dict[str, Any]]:
    """`{index, block_index, block}` for each block of `new` that differs from `old`'s."""
    old_blocks, new_blocks = content_blocks(old), content_blocks(new)
    kept = len(old_blocks)
    if len(new_blocks) > kept and old_blocks == new_blocks[:kept]:
        # Blocks added after the old ones (a note for the model): only they are new.
        added = range(kept, len(new_blocks))
        return [{"index": index, "block_index": j, "block": new_blocks[j]} for j in added]
    if len(old_blocks) != len(new_blocks):
        return [{"index": index, "block_index": j, "block": b} for j, b in enumerate(new_blocks)]
    return [
        {"index": index, "block_index": j, "block": b}
        for j, (a, b) in enumerate(zip(old_blocks, new_blocks, strict=True))
        if a is not b and a != b
    ]
