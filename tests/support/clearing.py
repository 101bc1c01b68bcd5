"""The API's clearing edits as documented, written from the documents alone: the oracle the
loopback fake applies, so the project's own implementation (`evo_magic.compact.server_edits`,
which replay's modelled server runs) is checked against rules it does not share. Nothing here
imports from, or is copied from, the project's implementation.

Sources: the platform's context editing page ("Tool result clearing", "Thinking block
clearing", "Configuration options for tool result clearing", "Context editing response"), the
extended thinking page ("tool use loops are part of the assistant turn"), and the anthropic
SDK 2.17's beta types (`beta_clear_tool_uses_20250919_edit_param.py`,
`beta_clear_thinking_20251015_edit_param.py`, `beta_tool_uses_keep_param.py`,
`beta_input_tokens_trigger_param.py`, `beta_tool_uses_trigger_param.py`,
`beta_input_tokens_clear_at_least_param.py`, `beta_thinking_turns_param.py`,
`beta_all_thinking_turns_param.py` and the two `*_edit_response.py`).

`clear_tool_uses_20250919`:

- `trigger` (default 100,000 input tokens; `input_tokens` or `tool_uses`): "Once the prompt
  exceeds this threshold, clearing will begin": it applies when the prompt's measure is
  greater than the value;
- `keep` (default 3 tool uses): "how many recent tool use/result pairs to keep after clearing
  occurs. The API removes the oldest tool interactions first": all but the newest `keep` tool
  uses are cleared, each cleared result replaced by a placeholder;
- `exclude_tools`: "tool names whose tool uses and results should never be cleared";
- `clear_tool_inputs` (default false): true clears the cleared tool uses' inputs too, a list
  the inputs of those tools only ("specific tool inputs to clear");
- `clear_at_least`: "If the API can't clear at least the specified amount, the strategy will
  not be applied";
- reported as `{"type", "cleared_tool_uses", "cleared_input_tokens"}`.

`clear_thinking_20251015`:

- `keep` (default `{"type": "thinking_turns", "value": 1}`; `"all"` or `{"type": "all"}` keep
  every thinking block): the thinking blocks of all but the newest `value` assistant turns are
  removed;
- an assistant turn is the assistant's whole answer to one user message: its tool use loop
  (assistant messages separated by user messages of tool results) is part of it;
- reported as `{"type", "cleared_thinking_turns", "cleared_input_tokens"}`.

What the documents leave open is chosen here, plainly: a cleared result holds
`CLEARED_PLACEHOLDER` (the one thing shared with the project, so both measure the same bytes;
the API's own text is not documented); a cleared input is `{}`; an assistant message left
without blocks holds the placeholder as text; `keep` counts every tool use, excluded ones too;
the trigger measures the prompt as the edits listed before this one left it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from evo_magic.compact.server_edits import CLEARED_PLACEHOLDER

__all__ = ["CLEARED_PLACEHOLDER", "clear_thinking", "clear_tool_uses"]

Message = dict[str, Any]
Count = Callable[[list[Message]], int]
"""Input tokens of the prompt made of these messages (the rest of the request unchanged)."""
Cleared = tuple[list[Message], dict[str, Any]]

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
DEFAULT_TRIGGER = {"type": "input_tokens", "value": 100_000}
DEFAULT_KEEP_TOOL_USES = 3
DEFAULT_KEEP_THINKING_TURNS = 1
THINKING = ("thinking", "redacted_thinking")


def clear_tool_uses(
    messages: list[Message], edit: Mapping[str, Any], count: Count
) -> Cleared | None:
    """The prompt after a `clear_tool_uses_20250919` edit and what the reply reports, or None
    when the edit does not apply (under its trigger, nothing to clear, or less freed than
    `clear_at_least`). `messages` is not changed."""
    uses = _tool_uses(messages)
    before = count(messages)
    trigger = edit.get("trigger") or DEFAULT_TRIGGER
    measure = len(uses) if trigger["type"] == "tool_uses" else before
    if measure <= trigger["value"]:  # "once the prompt exceeds this threshold"
        return None
    keep = (edit.get("keep") or {"value": DEFAULT_KEEP_TOOL_USES})["value"]
    excluded = set(edit.get("exclude_tools") or ())
    oldest = uses[: max(len(uses) - keep, 0)]
    to_clear = {use["id"]: use["name"] for use in oldest if use["name"] not in excluded}
    inputs = edit.get("clear_tool_inputs") or False
    clear_input = {i for i, name in to_clear.items() if inputs is True or name in (inputs or ())}
    after = [_without_tool_uses(m, set(to_clear), clear_input) for m in messages]
    cleared = len((_answered(messages) & set(to_clear)) | clear_input)
    if cleared == 0:
        return None
    freed = before - count(after)
    at_least = edit.get("clear_at_least")
    if at_least is not None and freed < at_least["value"]:
        return None
    reported = {
        "type": CLEAR_TOOL_USES,
        "cleared_tool_uses": cleared,
        "cleared_input_tokens": freed,
    }
    return after, reported


def clear_thinking(
    messages: list[Message], edit: Mapping[str, Any], count: Count
) -> Cleared | None:
    """The prompt after a `clear_thinking_20251015` edit and what the reply reports, or None
    when no thinking is removed. `messages` is not changed."""
    keep = edit.get("keep", {"type": "thinking_turns", "value": DEFAULT_KEEP_THINKING_TURNS})
    if keep == "all" or keep.get("type") == "all":
        return None
    turns = _assistant_turns(messages)
    older = turns[: max(len(turns) - keep["value"], 0)]
    after = list(messages)
    cleared = 0
    for turn in older:
        had_thinking = False
        for i in turn:
            content = messages[i]["content"]
            if isinstance(content, list) and any(b.get("type") in THINKING for b in content):
                had_thinking = True
                after[i] = {**messages[i], "content": _without_thinking(content)}
        cleared += had_thinking
    if cleared == 0:
        return None
    freed = count(messages) - count(after)
    reported = {"type": CLEAR_THINKING, "cleared_thinking_turns": cleared,
                "cleared_input_tokens": freed}  # fmt: skip
    return after, reported


def _tool_uses(messages: list[Message]) -> list[dict[str, Any]]:
    """The prompt's tool_use blocks, oldest first."""
    return [
        block
        for message in messages
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


def _answered(messages: list[Message]) -> set[str]:
    """The ids of the tool uses whose results the prompt holds."""
    return {
        block["tool_use_id"]
        for message in messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }


def _without_tool_uses(message: Message, results: set[str], inputs: set[str]) -> Message:
    """`message` with the results of `results` and the inputs of `inputs` cleared."""
    content = message["content"]
    if not isinstance(content, list):
        return message
    blocks = []
    for block in content:
        if block.get("type") == "tool_result" and block["tool_use_id"] in results:
            block = {**block, "content": CLEARED_PLACEHOLDER}
        elif block.get("type") == "tool_use" and block["id"] in inputs:
            block = {**block, "input": {}}
        blocks.append(block)
    return {**message, "content": blocks}


def _assistant_turns(messages: list[Message]) -> list[list[int]]:
    """The indexes of the assistant messages of each assistant turn, oldest turn first: a user
    message of tool results continues the turn, any other user message ends it."""
    turns: list[list[int]] = []
    ended = True
    for i, message in enumerate(messages):
        if message["role"] == "user":
            ended = ended or not _holds_tool_results(message)
        else:
            if ended:
                turns.append([])
            turns[-1].append(i)
            ended = False
    return turns


def _holds_tool_results(message: Message) -> bool:
    content = message["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def _without_thinking(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept = [block for block in content if block.get("type") not in THINKING]
    return kept or [{"type": "text", "text": CLEARED_PLACEHOLDER}]
