"""Rows of the frames for readers that decode records in Python (whole JSON documents, zip
members): a `Conversation` is told each message, call and compaction in order and keeps the
rows; `part` turns the conversations of a read into a `Part`.

A reader decodes a file with `document(source)` (bounded: a file over `MAX_DOCUMENT_BYTES` is
refused, a torn or invalid one is a `TranscriptError` naming the file and the line), maps its
records onto a `Conversation` per session, and returns `part(conversations, records)`.
Blocks are given in the frames' terms (`block_type`, `text`, `tool_name`, `tool_use_id`,
`is_error`, `status`, `chars`, `media_type`); `text` of a `tool_use` is its input as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from evo_magic.analysis.errors import TranscriptError
from evo_magic.analysis.formats import Part, Position, usage_count
from evo_magic.analysis.frames import (
    BLOCK_COLUMNS,
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    PART_COLUMNS,
    rows_table,
)

MAX_DOCUMENT_BYTES = 1 << 30
"""The largest JSON document read whole (a run's trajectory is megabytes, not gigabytes)."""
USAGE_NAMES = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "reasoning_output_tokens",
)
"""The usage counts a call row takes (see `Conversation.call`)."""


def document(source: Any, data: bytes | None = None, where: str = "") -> Any:
    """The JSON value of `source`'s bytes (or of `data`, a member named by `where`); a
    `TranscriptError` naming the file, the member and the line when it is not JSON (a torn
    file: the run was stopped while writing it) or is too large."""
    raw = source.data if data is None else data
    name = f"{source.path}{f' member {where}' if where else ''}"
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise TranscriptError(f"{name}: {len(raw):,} bytes, over the {MAX_DOCUMENT_BYTES:,} read")
    try:
        return json.loads(raw)
    except RecursionError:
        raise TranscriptError(f"{name}: nested too deep to read") from None
    except ValueError as error:
        line = getattr(error, "lineno", None)
        at = f" line {line}" if line is not None else ""
        reason = getattr(error, "msg", str(error))
        raise TranscriptError(f"{name}:{at} not a whole JSON document ({reason})") from None


def timestamp(value: Any) -> datetime | None:
    """An ISO 8601 time as UTC (a time without a zone is taken as UTC); None when it is not
    one."""
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


def text_of(value: Any) -> str | None:
    """Text of a message's content: a string as is, a list of parts joined by newlines (their
    `text`), anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [p.get("text") if isinstance(p, dict) else p for p in value]
        return "\n".join(t for t in texts if isinstance(t, str))
    return json.dumps(value, ensure_ascii=False)


def text_block(text: str | None) -> dict[str, Any]:
    """A `text` block's row fields: what a reader writes for a message's text."""
    return {"block_type": "text", "text": text}


def arguments(value: Any) -> str:
    """A tool call's input as the JSON text the frames keep: a string (an OpenAI-style
    `arguments`) as written, anything else encoded."""
    if isinstance(value, str):
        return value
    return json.dumps({} if value is None else value, ensure_ascii=False)


def litellm_usage(usage: Any) -> dict[str, Any] | None:
    """litellm's usage as the frames count it: its `prompt_tokens` include the cache reads
    (`cache_read_input_tokens`, else `prompt_tokens_details.cached_tokens`) and the cache
    writes (`cache_creation_input_tokens`); `input_tokens` is the rest (NA when that would be
    negative), `output_tokens` the `completion_tokens`, `reasoning_output_tokens` from
    `completion_tokens_details`. None when `usage` is not an object."""
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens")
    details = usage.get("prompt_tokens_details")
    cached = usage.get("cache_read_input_tokens")
    if cached is None and isinstance(details, dict):
        cached = details.get("cached_tokens")
    written = usage.get("cache_creation_input_tokens")
    fresh = prompt
    if isinstance(prompt, int):
        fresh = prompt - (cached if isinstance(cached, int) else 0)
        fresh -= written if isinstance(written, int) else 0
        fresh = fresh if fresh >= 0 else None
    output_details = usage.get("completion_tokens_details")
    return {
        "input_tokens": fresh,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": written,
        "output_tokens": usage.get("completion_tokens"),
        "reasoning_output_tokens": output_details.get("reasoning_tokens")
        if isinstance(output_details, dict)
        else None,
    }


@dataclass
class Conversation:
    """The rows of one conversation (a session, or a subagent of one) as a reader is told them."""

    format_name: str
    source: Any
    """The `SourceFile` read (its id and path; bad usage counts are noted on it)."""
    session_id: str
    agent_id: str | None = None
    at: Position = field(default_factory=Position)
    turn: int = 0
    blocks: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    parts: list[dict[str, Any]] = field(default_factory=list)

    def identity(
        self, timestamp: Any = None, line: int | None = None, seq: int | None = None
    ) -> dict[str, Any]:
        return {
            "source": self.format_name,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "sidechain": self.agent_id is not None,
            "seq": seq,
            "timestamp": timestamp,
            "turn": self.turn,
            "epoch": self.at.epoch,
            "segment": 0,
            "file_id": self.source.file_id,
            "file": str(self.source.path),
            "line": line,
        }

    def event(
        self,
        kind: str,
        timestamp: Any = None,
        line: int | None = None,
        seq: int | None = None,
        **fields: Any,
    ) -> None:
        """A record of any kind (a row of `events`); `fields` are its own columns (numbers,
        text, flags), after the identity ones."""
        self.events.append({**self.identity(timestamp, line, seq), "kind": kind, **fields})

    def message(
        self,
        role: str,
        kind: str,
        blocks: list[dict[str, Any]],
        timestamp: Any = None,
        line: int | None = None,
        seq: int | None = None,
    ) -> int:
        """Blocks of a message of `role` (`kind`: `message_kind`); consecutive messages of
        one role are one message, as the API would merge them. A `prompt` starts a turn.
        Returns the message's index in its epoch."""
        if kind == "prompt":
            self.turn += 1
        self.at.message(role)
        identity = {**self.identity(timestamp, line, seq), "message_index": self.at.index}
        for block in blocks:
            row = {**identity, "role": role, "message_kind": kind, "abandoned": False, **block}
            row["block_index"] = self.at.next_block
            if row.get("text") is not None and row.get("chars") is None:
                row["chars"] = len(row["text"])
            if row.get("block_type") == "tool_result" and row.get("status") is None:
                row["status"] = "error" if row.get("is_error") else "ok"
                row["is_error"] = bool(row.get("is_error"))
            self.blocks.append(row)
            self.at.next_block += 1
        return self.at.index

    def call(
        self,
        model: str | None,
        usage: dict[str, Any] | None,
        response_index: int | None,
        timestamp: Any = None,
        line: int | None = None,
        seq: int | None = None,
        stop_reason: str | None = None,
        duration: float | None = None,
    ) -> None:
        """A model call whose response is the message `response_index` of this epoch. `usage`
        holds the counts of `USAGE_NAMES` as the file gives them (None: the file has no
        per-call usage, every count NA); a count that is not a count is NA and noted."""
        counts: dict[str, int | None] = {}
        for name in USAGE_NAMES:
            value, bad = usage_count((usage or {}).get(name))
            counts[name] = value
            if bad and line is not None:
                self.source.bad_usage.append(line)
        sent = [counts[n] for n in USAGE_NAMES[:4] if n != "output_tokens"]
        known = [n for n in sent if n is not None]
        self.calls.append(
            {
                **self.identity(timestamp, line, seq),
                "call": len(self.calls) + 1,
                "message_index": response_index,
                "abandoned": False,
                "model": model,
                "stop_reason": stop_reason,
                "stop_reason_inferred": False,
                "duration": duration,
                **counts,
                "context_sent_tokens": sum(known) if counts["input_tokens"] is not None else None,
                "context_sent_tokens_exact": counts["input_tokens"] is not None,
            }
        )

    def compaction(self, timestamp: Any = None, line: int | None = None, **fields: Any) -> None:
        """A full compaction (`fields`: columns of `compactions`); the next message opens
        the next epoch."""
        row = {"strategy": "summarise", "success": True, **fields}
        if isinstance(row.get("summary"), str) and row.get("summary_chars") is None:
            row["summary_chars"] = len(row["summary"])
        self.compactions.append({**self.identity(timestamp, line), **row})
        self.at.new_epoch()


def part(conversations: list[Conversation], records: int, **extra: Any) -> Part:
    """The `Part` of `conversations` (`records`: how many records were read)."""

    def table(name: str, spec: dict[str, str]) -> Any:
        return rows_table([row for c in conversations for row in getattr(c, name)], spec)

    return Part(
        blocks=table("blocks", BLOCK_COLUMNS),
        parts=table("parts", PART_COLUMNS),
        calls=table("calls", CALL_COLUMNS),
        compactions=table("compactions", COMPACTION_COLUMNS),
        events=table("events", {**EVENT_COLUMNS, **_event_fields(conversations)}),
        records=records,
        **extra,
    )


def _event_fields(conversations: list[Conversation]) -> dict[str, str]:
    """The dtypes of the events' own fields, by the values given (a number that is ever a
    fraction is Float64)."""
    kinds: dict[str, str] = {}
    for c in conversations:
        for row in c.events:
            for name, value in row.items():
                if name in EVENT_COLUMNS or name in kinds and kinds[name] != "Int64":
                    continue
                if isinstance(value, bool):
                    kinds[name] = "boolean"
                elif isinstance(value, int):
                    kinds.setdefault(name, "Int64")
                elif isinstance(value, float):
                    kinds[name] = "Float64"
                elif value is not None:
                    kinds[name] = "string"
    return {n: k for n, k in kinds.items() if n not in _IDENTITY_FIELDS}


_IDENTITY_FIELDS = frozenset({"file_id"})
