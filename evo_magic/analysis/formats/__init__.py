"""The transcript formats the loader reads, and how a file's format is recognised.

Each format module has `SOURCE` (the `source` column's value) and `read(engine, files) -> Part`.
"""

from __future__ import annotations

from typing import Any

CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
CLAUDE_CODE_ONLY = frozenset({"summary", "file-history-snapshot", "queue-operation"})


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
    if any("type" in r and ("sessionId" in r or "uuid" in r) for r in records):
        return "claude_code"
    if all(r.get("type") in CLAUDE_CODE_ONLY for r in records):
        return "claude_code"  # a title-only or snapshot-only file of a Claude Code project
    return None
