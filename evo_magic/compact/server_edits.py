"""What the API's context management does to a prompt: the one implementation of the clearing
edits and of the compaction trigger, used by replay's modelled server (the test suite's loopback
fake applies the documented rules written on their own, and checks this against them).

From the platform's context editing and compaction pages and the SDK's edit types
(`beta_clear_tool_uses_20250919_edit_param.py`, `beta_clear_thinking_20251015_edit_param.py`,
`beta_compact_20260112_edit_param.py`):

- `clear_thinking_20251015` drops the thinking blocks of all but the newest `keep` assistant
  turns, a turn being the model's whole answer with its tool use loop (`keep: "all"` keeps
  them);
- `clear_tool_uses_20250919`, once the prompt passes its trigger (input tokens, or tool uses),
  replaces the oldest tool results (all but the newest `keep` tool uses, those of
  `exclude_tools` aside) by a placeholder, their inputs too with `clear_tool_inputs`; nothing
  is cleared unless it frees at least `clear_at_least` input tokens;
- `compact_20260112` compacts once the prompt (after the clearing edits) reaches its trigger.

Edits apply in the order given (the API requires clear_thinking first); each trigger is
measured on the prompt as the edits before it left it. Nothing here changes the messages it is
given: an edited prompt is a new list, its changed messages copies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo_magic.catalog import CLEAR_THINKING, CLEAR_TOOL_USES, COMPACT_EDIT
from evo_magic.messages import Message

DEFAULT_COMPACT_TRIGGER = 150_000
DEFAULT_CLEAR_TRIGGER = 100_000
CLEARED_PLACEHOLDER = "[cleared by context management]"
"""What a cleared tool result holds (the API's own text is not documented; its size is small)."""

Count = Callable[[list[Message]], int]
"""Input tokens of a prompt made of these messages (the rest of the request unchanged)."""
Memo = dict[tuple[int, tuple[bool, ...]], tuple[Message, Message]]
"""Edited messages already made: (id of the original, which of its blocks changed) -> (the
original, kept so that its id stays its own, and the edited copy). With one, the same edit of
the same message is the same object from call to call (a caller that follows the prompt from
call to call then measures and hashes only what changed)."""


@dataclass
class EditedPrompt:
    """A prompt after the clearing edits: its messages, what was applied (as the API reports
    `context_management.applied_edits`), and whether the compaction edit's trigger was met
    (`compact_tokens`: the prompt's tokens then)."""

    messages: list[Message]
    applied: list[dict[str, Any]] = field(default_factory=list)
    compact: Mapping[str, Any] | None = None
    compact_tokens: int = 0


def apply_edits(
    messages: Sequence[Message],
    edits: Sequence[Mapping[str, Any]],
    count: Count,
    *,
    counting: bool = False,
    memo: Memo | None = None,
) -> EditedPrompt:
    """The prompt `messages` after the `context_management` `edits` (validated before: the
    caller's job). `counting`: for `count_tokens` (the clearing edits only); `memo`: see
    `Memo`."""
    result = EditedPrompt(list(messages))
    for edit in edits:
        kind = edit.get("type")
        if kind == CLEAR_THINKING:
            _apply(result, clear_thinking(result.messages, edit, count))
        elif kind == CLEAR_TOOL_USES:
            _apply(result, clear_tool_uses(result.messages, edit, count, memo))
        elif kind == COMPACT_EDIT and not counting:
            tokens = count(result.messages)
            if tokens >= compact_trigger(edit):
                result.compact, result.compact_tokens = edit, tokens
    return result


def _apply(result: EditedPrompt, done: tuple[list[Message], dict[str, Any]] | None) -> None:
    if done is not None:
        result.messages, applied = done
        result.applied.append(applied)


def compact_trigger(edit: Mapping[str, Any]) -> int:
    """The input tokens at which a `compact_20260112` edit compacts."""
    return int((edit.get("trigger") or {}).get("value", DEFAULT_COMPACT_TRIGGER))


def clear_thinking(
    messages: list[Message], edit: Mapping[str, Any], count: Count
) -> tuple[list[Message], dict[str, Any]] | None:
    """`messages` without the thinking of older assistant turns, and the applied edit; None
    when nothing is cleared."""
    keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return None
    turns = _assistant_turns(messages)
    edited = list(messages)
    cleared = 0
    for turn in turns[: max(len(turns) - int(keep["value"]), 0)]:
        thinking = False
        for i in turn:
            content = messages[i].get("content")
            if not isinstance(content, list):
                continue
            kept = [b for b in content if b.get("type") not in ("thinking", "redacted_thinking")]
            if len(kept) != len(content):
                thinking = True
                blocks = kept or [{"type": "text", "text": CLEARED_PLACEHOLDER}]
                edited[i] = {**messages[i], "content": blocks}
        cleared += thinking
    if not cleared:
        return None
    freed = count(list(messages)) - count(edited)
    applied = {"type": CLEAR_THINKING, "cleared_thinking_turns": cleared,
               "cleared_input_tokens": freed}  # fmt: skip
    return edited, applied


def _assistant_turns(messages: list[Message]) -> list[list[int]]:
    """The indexes of each assistant turn's messages, oldest first. A turn is the model's whole
    answer to a request, its tool use loop included (the extended thinking page: "tool use loops
    are part of the assistant turn"): a user message of tool results continues it."""
    turns: list[list[int]] = []
    open_turn = False
    for i, message in enumerate(messages):
        if message.get("role") == "assistant":
            if not open_turn:
                turns.append([])
            turns[-1].append(i)
            open_turn = True
        else:
            content = message.get("content")
            open_turn = (
                open_turn
                and isinstance(content, list)
                and any(b.get("type") == "tool_result" for b in content)
            )
    return turns


def clear_tool_uses(
    messages: list[Message], edit: Mapping[str, Any], count: Count, memo: Memo | None = None
) -> tuple[list[Message], dict[str, Any]] | None:
    """`messages` with the oldest tool results cleared as the edit says, and the applied edit;
    None when under the trigger, nothing to clear, or less than `clear_at_least` freed."""
    trigger = edit.get("trigger") or {"type": "input_tokens", "value": DEFAULT_CLEAR_TRIGGER}
    uses = [
        block
        for message in messages
        if message.get("role") == "assistant" and isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]
    before = count(list(messages))
    measure = len(uses) if trigger.get("type") == "tool_uses" else before
    if measure <= int(trigger["value"]):  # "once the prompt exceeds this threshold"
        return None
    keep = int((edit.get("keep") or {"value": 3})["value"])
    excluded = set(edit.get("exclude_tools") or [])
    inputs = edit.get("clear_tool_inputs") or False
    clearable = {
        b["id"]: b for b in uses[: max(len(uses) - keep, 0)] if b.get("name") not in excluded
    }
    edited = list(messages)
    cleared = 0
    for i, message in enumerate(messages):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        blocks = [_cleared(message["role"], b, clearable, inputs) for b in content]
        changed = tuple(new is not old for new, old in zip(blocks, content, strict=True))
        if any(changed):
            edited[i] = _edited(memo, message, changed, blocks)
            cleared += sum(
                1
                for new, old in zip(blocks, content, strict=True)
                if new is not old and old.get("type") == "tool_result"
            )
    if not cleared:
        return None
    freed = before - count(edited)
    at_least = int((edit.get("clear_at_least") or {"value": 0})["value"])
    if freed < at_least:
        return None
    applied = {"type": CLEAR_TOOL_USES, "cleared_tool_uses": cleared,
               "cleared_input_tokens": freed}  # fmt: skip
    return edited, applied


def _cleared(
    role: str, block: dict[str, Any], clearable: Mapping[str, Any], inputs: Any
) -> dict[str, Any]:
    """The block as the clearing leaves it (the same object when unchanged)."""
    kind = block.get("type")
    done = block.get("content") == CLEARED_PLACEHOLDER
    if role == "user" and kind == "tool_result" and block.get("tool_use_id") in clearable:
        return block if done else {**block, "content": CLEARED_PLACEHOLDER}
    if role == "assistant" and kind == "tool_use" and block.get("id") in clearable:
        name = block.get("name")
        if inputs is True or (isinstance(inputs, list) and name in inputs):
            return {**block, "input": {}}
    return block


def _edited(
    memo: Memo | None, message: Message, changed: tuple[bool, ...], blocks: list[dict[str, Any]]
) -> Message:
    """The message with `blocks`, the one made before for the same change when there is one."""
    if memo is None:
        return {**message, "content": blocks}
    key = (id(message), changed)
    found = memo.get(key)
    if found is None or found[0] is not message:
        found = memo[key] = (message, {**message, "content": blocks})
    return found[1]
