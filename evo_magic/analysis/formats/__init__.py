"""The transcript formats the loader reads, and how a file's format is recognised.

Each format module has `SOURCE` (the `source` column's value) and `read(engine, files) -> Part`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

USAGE = {
    "input_tokens": "BIGINT",
    "output_tokens": "BIGINT",
    "cache_creation_input_tokens": "BIGINT",
    "cache_read_input_tokens": "BIGINT",
    "cache_creation": {
        "ephemeral_5m_input_tokens": "BIGINT",
        "ephemeral_1h_input_tokens": "BIGINT",
    },
}
"""A Messages API usage object, as `read_json` reads it."""
CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
CLAUDE_CODE_ONLY = frozenset({"summary", "file-history-snapshot", "queue-operation"})
CODEX_ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)
"""Response items: in a Codex rollout from before `session_meta` (2025) they are whole lines."""


@dataclass
class Part:
    """What a format reader produced from its files: Arrow tables of the frames' columns
    (`events`: the identity, kind, file and line of every record), how many records it read,
    and what it left out, by reason."""

    blocks: pa.Table
    parts: pa.Table
    calls: pa.Table
    compactions: pa.Table
    events: pa.Table
    records: int
    skipped: dict[str, int] = field(default_factory=dict)
    without_messages: list[str] = field(default_factory=list)
    """Files that hold records but no message (a title, snapshots or session metadata only):
    each also counted in `skipped` with the reason."""


def detect(records: list[dict[str, Any]]) -> str | None:
    """The format of a file whose first readable records are `records`: "evo_magic",
    "claude_code", "codex", or None when it is none of them."""
    if not records:
        return None
    first = records[0]
    if "kind" in first and "v" in first:
        return "evo_magic"
    if all(r.get("type") in CODEX_TYPES and "payload" in r for r in records[:5]):
        return "codex"
    if _legacy_codex(records):
        return "codex"
    if any("type" in r and ("sessionId" in r or "uuid" in r) for r in records):
        return "claude_code"
    if all(r.get("type") in CLAUDE_CODE_ONLY for r in records):
        return "claude_code"  # a title-only or snapshot-only file of a Claude Code project
    return None


def _legacy_codex(records: list[dict[str, Any]]) -> bool:
    """A Codex rollout of 2025 before `session_meta`: a header line `{id, timestamp, ...}`,
    then `{"record_type": "state"}` markers and response items as whole lines."""
    first, rest = records[0], records[1:6]
    header = "id" in first and "timestamp" in first and not {"type", "kind", "uuid"} & set(first)
    return header and all(
        r.get("record_type") == "state" or r.get("type") in CODEX_ITEMS for r in rest
    )
