"""A Claude Code record: the fields read from it, its blocks, and what kind of user message it
is (see the package's docstring for the kinds)."""

from __future__ import annotations

from typing import Any

from evo_magic.analysis.blocks import as_blocks, text_sql
from evo_magic.analysis.formats import USAGE_AS_READ

SOURCE = "claude_code"

STRUCTURE = {
    "type": "VARCHAR",
    "subtype": "VARCHAR",
    "uuid": "VARCHAR",
    "parentUuid": "VARCHAR",
    "logicalParentUuid": "VARCHAR",
    "isSidechain": "BOOLEAN",
    "agentId": "VARCHAR",
    "sessionId": "VARCHAR",
    "timestamp": "VARCHAR",
    "isMeta": "BOOLEAN",
    "isCompactSummary": "BOOLEAN",
    "isApiErrorMessage": "BOOLEAN",
    "message": {
        "id": "VARCHAR",
        "role": "VARCHAR",
        "model": "VARCHAR",
        "stop_reason": "VARCHAR",
        "usage": USAGE_AS_READ,
        "content": "JSON",
    },
    "compactMetadata": {
        "trigger": "VARCHAR",
        "preTokens": "BIGINT",
        "postTokens": "BIGINT",
        "durationMs": "DOUBLE",
    },
    "toolUseResult": {"agentId": "VARCHAR"},
}
# `content` (the blocks) is for SQL; the rest, small, is what the walk reads (`stamp` as
# microseconds since the epoch, as the frames' timestamps are built: a Python datetime per
# record cost a third of handing the records to the walk).
SELECT = f"""* exclude (message), epoch_us(try_cast(timestamp as TIMESTAMPTZ)) as stamp,
    {as_blocks("message.content")} as content,
    struct_pack(id := message.id, role := message.role, model := message.model,
        stop_reason := message.stop_reason, usage := message.usage,
        content := case when starts_with(message.content, '[') then list_transform(content,
            lambda b: {{'type': b.type, 'id': b.id, 'tool_use_id': b.tool_use_id}}) end) as message,
    case when type = 'user' then left(content[1].text, 300) end as head,
    len(content) as block_count,
    case when type = 'assistant' then coalesce(list_sum(list_transform(content,
        lambda b: coalesce(length({text_sql("b")}), 0))), 0)::BIGINT end as output_chars,
    case when isCompactSummary then array_to_string(list_transform(content, lambda b: b.text), '')
        end as summary_text"""

_PREFIXES = (
    ("<local-command-stdout>", "command_output"),
    ("<local-command-stderr>", "command_output"),
    ("<local-command-caveat>", "meta"),
    ("<command-name>", "command"),
    ("<command-message>", "command"),
    ("[Request interrupted by user", "interrupt"),
    ("<task-notification>", "task_notification"),
    ("<bash-input>", "bash"),
    ("<bash-stdout>", "bash"),
    ("<bash-stderr>", "bash"),
    ("<user-memory-input>", "memory"),
)
UNTIMED_KINDS = frozenset({"command", "local_command", "command_output", "meta"})
"""Kinds a manual /compact writes after its boundary with earlier timestamps."""


def content(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's blocks as the walk sees them (type, id, tool_use_id)."""
    message = record.get("message") or {}
    return [b for b in (message.get("content") or []) if b]


def block_count(record: dict[str, Any]) -> int:
    return record.get("block_count") or 0


def user_kind(record: dict[str, Any]) -> str:
    """What a user record is (see the package's docstring); `local_command` is decided later,
    from what follows a command."""
    if record.get("isCompactSummary"):
        return "compact_summary"
    if any(b.get("type") == "tool_result" for b in content(record)):
        return "tool_result"
    head = (record.get("head") or "").lstrip()
    for prefix, kind in _PREFIXES:
        if head.startswith(prefix):
            return kind
    if record.get("isMeta"):
        return "meta"
    return "prompt"


def classify(messages: list[dict[str, Any]]) -> None:
    """Set each user record's `kind`; a command followed by its local output (before the model
    answers) ran locally."""
    for record in messages:
        if record.get("type") == "user":
            record["kind"] = user_kind(record)
    for i, record in enumerate(messages):
        if record.get("kind") != "command":
            continue
        for later in messages[i + 1 :]:
            if later.get("type") == "assistant" or later.get("kind") in ("prompt", "command"):
                break
            if later.get("kind") == "command_output":
                record["kind"] = "local_command"
                break
