"""The transcript formats the loader reads, and how a file's format is recognised.

Each format (one module, or a package when it reads in several steps) has `SOURCE` (the
`source` column's value), `read(engine, files) -> Part`, and `FORMAT`, its reader as
registered (see `registry`). What they share is here: `Part`,
`Position` (where the next block of a conversation goes), usage counts checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from evo_magic.analysis.frames import EVENT_COLUMNS, FRAMES
from evo_magic.analysis.memory import settle

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
USAGE_AS_READ = {
    **{name: "JSON" for name in USAGE if name != "cache_creation"},
    "cache_creation": {name: "JSON" for name in USAGE["cache_creation"]},
}
"""The same, each count as the file spells it, for readers that check the counts in Python."""
MAX_TOKENS = 10**12
"""The largest token count believed: far above any context window or session total."""

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

    def settled(self) -> Part:
        """This part with its tables in buffers of their own (`memory.settle`): what a load
        keeps of a batch, apart from what the batch used."""
        specs = {**FRAMES, "events": EVENT_COLUMNS}
        return replace(
            self,
            **{
                name: settle(getattr(self, name), [c for c, d in spec.items() if d == "category"])
                for name, spec in specs.items()
            },
        )


@dataclass
class Position:
    """Where the next block of a conversation goes: consecutive records of one role form one
    message (a streamed response written a block a record, a response's tool calls, a batch
    of results); a compaction opens an epoch with no message yet."""

    epoch: int = 0
    index: int = -1
    """The message's index in its epoch (-1: none yet)."""
    role: str | None = None
    next_block: int = 0

    def message(self, role: str) -> bool:
        """Go to the message of `role`: the current one, or a new one after it (True)."""
        if role == self.role:
            return False
        self.index, self.next_block, self.role = self.index + 1, 0, role
        return True

    def new_epoch(self) -> None:
        self.epoch += 1
        self.index, self.role, self.next_block = -1, None, 0


def usage_count(value: Any) -> tuple[int | None, bool]:
    """A usage count as decoded from JSON: the count, and whether it was bad. A count is a
    whole number from 0 to `MAX_TOKENS`; anything else (negative, NaN, a string, 1e30) is bad
    and gives None, for the caller to warn about. A missing count is not bad."""
    if value is None:
        return None, False
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, True
    if isinstance(value, float) and not value.is_integer():
        return None, True
    if not 0 <= value <= MAX_TOKENS:
        return None, True
    return int(value), False


def usage_count_text(text: str | None) -> tuple[int | None, bool]:
    """`usage_count` of a count as its JSON text (how DuckDB gives a `JSON` column)."""
    if text is None:
        return None, False
    if len(text) < 20 and text.isascii() and text.isdigit() and (len(text) == 1 or text[0] != "0"):
        # The common case, a plain count, without a JSON parse (a leading zero is not JSON).
        return usage_count(int(text))
    try:
        return usage_count(json.loads(text))
    except ValueError:
        return None, True


def is_evo_magic(sniff: Any) -> bool:
    """An evo_magic transcript: its first record has the schema version `v` and a `kind`."""
    first = sniff.records[0] if sniff.records else {}
    return "kind" in first and "v" in first


def is_codex(sniff: Any) -> bool:
    """A Codex rollout: `{type, payload}` records of Codex's types, or the 2025 layout."""
    records = sniff.records
    if not records:
        return False
    if all(_type(r) in CODEX_TYPES and "payload" in r for r in records[:5]):
        return True
    return _legacy_codex(records)


def is_claude_code(sniff: Any) -> bool:
    """A Claude Code session: typed records with a `sessionId` or `uuid`, or a file of titles
    and snapshots only."""
    records = sniff.records
    if not records:
        return False
    if any("type" in r and ("sessionId" in r or "uuid" in r) for r in records):
        return True
    return all(_type(r) in CLAUDE_CODE_ONLY for r in records)


def _legacy_codex(records: list[dict[str, Any]]) -> bool:
    """A Codex rollout of 2025 before `session_meta`: a header line `{id, timestamp, ...}`,
    then `{"record_type": "state"}` markers and response items as whole lines."""
    first, rest = records[0], records[1:6]
    header = "id" in first and "timestamp" in first and not {"type", "kind", "uuid"} & set(first)
    return header and all(r.get("record_type") == "state" or _type(r) in CODEX_ITEMS for r in rest)


def _type(record: dict[str, Any]) -> str | None:
    """The record's `type` when it is a name (a file may hold anything there)."""
    kind = record.get("type")
    return kind if isinstance(kind, str) else None
