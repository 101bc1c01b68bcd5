"""Claude Code's model calls and compactions as rows: usage read as written and checked, calls
numbered, a compaction's size after and the usage of its own call (see "Compactions",
"Usage" and "Not calls" in the package's docstring)."""

from __future__ import annotations

from typing import Any

from evo_magic.analysis.formats import usage_count_text
from evo_magic.analysis.formats.claude_code.records import content
from evo_magic.analysis.loader import SourceFile

_SUMMARY_USAGE = {
    "summary_input_tokens": "input_tokens",
    "summary_output_tokens": "output_tokens",
    "summary_cache_creation_input_tokens": "cache_creation_input_tokens",
    "summary_cache_read_input_tokens": "cache_read_input_tokens",
}
_LAYERS = {"auto": "over_limit", "manual": "on_request"}


CHARS_PER_TOKEN_BOUND = 16
"""More characters than any reply's text, thinking and tool inputs take per output token (about
3 to 4 in prose and code): fewer output tokens than its characters over this is not the
reply's final count."""


def call_row(
    identity: dict[str, Any], records: list[dict[str, Any]], source: SourceFile
) -> dict[str, Any]:
    """One model call from the records of one response (streamed blocks share its id), its
    usage from the record written with the final usage (`final_record`); `usage_partial` when
    none was. A count that is not a count is NA, noted on `source`."""
    final, partial = final_record(records)
    message = final.get("message") or {}
    usage = _counts(message.get("usage") or {}, final["line"], source)
    stop, inferred = _stop_reason(records)
    cache = usage.get("cache_creation") or {}
    parts = [
        usage.get("input_tokens"),
        usage.get("cache_read_input_tokens"),
        usage.get("cache_creation_input_tokens"),
    ]
    sent = sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None
    return {
        **identity,
        "model": message.get("model"),
        "stop_reason": stop,
        "stop_reason_inferred": inferred,
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "cache_creation_input_tokens": usage.get("cache_creation_input_tokens"),
        "cache_read_input_tokens": usage.get("cache_read_input_tokens"),
        "cache_creation_5m_input_tokens": cache.get("ephemeral_5m_input_tokens"),
        "cache_creation_1h_input_tokens": cache.get("ephemeral_1h_input_tokens"),
        "usage_partial": partial,
        "context_sent_tokens": sent,
        "context_sent_tokens_exact": sent is not None,
    }


def final_record(records: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """The record of a response whose usage is its final usage, and whether that usage is only
    partial.

    Claude Code writes each block of a streamed reply as a record as it arrives, each with the
    usage known then: at the start of the stream, output is a few tokens; the final count comes
    with the reply's stop reason. So the final record is the last one with a stop reason; a
    reply none of whose records has one takes its last record (the latest count written), and
    that count is partial when it is below what the reply's text, thinking and tool inputs need
    (fewer than one token per `CHARS_PER_TOKEN_BOUND` characters)."""
    stopped = [r for r in records if (r.get("message") or {}).get("stop_reason")]
    if stopped:
        return stopped[-1], False
    chars = sum(r.get("output_chars") or 0 for r in records)
    return records[-1], _output_tokens(records[-1]) * CHARS_PER_TOKEN_BOUND < chars


def _output_tokens(record: dict[str, Any]) -> int:
    count, _ = usage_count_text(
        ((record.get("message") or {}).get("usage") or {}).get("output_tokens")
    )
    return count or 0


def _stop_reason(records: list[dict[str, Any]]) -> tuple[str | None, bool]:
    """The response's stop reason, and whether it was inferred: a response that recorded none
    but ends with a tool call stopped for it."""
    stop = next(
        (r["message"]["stop_reason"] for r in reversed(records) if r["message"].get("stop_reason")),
        None,
    )
    if stop is None:
        blocks = next((content(r) for r in reversed(records) if content(r)), [])
        if blocks and blocks[-1].get("type") == "tool_use":
            return "tool_use", True
    return stop, False


def _counts(usage: dict[str, Any], line: int, source: SourceFile) -> dict[str, Any]:
    """`usage` with each count checked (see `usage_count`), nested `cache_creation` too."""
    checked: dict[str, Any] = {}
    for name, value in usage.items():
        if isinstance(value, dict):
            checked[name] = _counts(value, line, source)
            continue
        count, bad = usage_count_text(value)
        if bad:
            source.bad_usage.append(line)
        checked[name] = count
    return checked


def number(calls: list[dict[str, Any]]) -> None:
    """Number the calls 1, 2, ... per (session, agent), in order."""
    counts: dict[tuple[Any, Any], int] = {}
    for row in calls:
        if row.get("call") is None:
            key = (row["session_id"], row["agent_id"])
            counts[key] = counts.get(key, 0) + 1
            row["call"] = counts[key]


def compaction_row(identity: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """The compaction a `compact_boundary` record marks (its summary comes with a later record)."""
    meta = record.get("compactMetadata") or {}
    trigger = meta.get("trigger")
    duration = meta.get("durationMs")
    return {
        **identity,
        "strategy": "summarise",
        "layer": _LAYERS.get(trigger),
        "trigger": trigger,
        "success": True,
        "duration": None if duration is None else duration / 1000,
        "before_tokens": meta.get("preTokens"),
        "after_tokens": meta.get("postTokens"),
    }


def fill_after_tokens(compactions: list[dict[str, Any]], calls: list[dict[str, Any]]) -> None:
    """A compaction without `postTokens` gets its size after from the next call of its
    conversation: that call's prompt (the summary and what followed it, system and tools
    included), so not exact."""
    for row in compactions:
        if row.get("after_tokens") is not None:
            continue
        later = [
            c
            for c in calls
            if c["agent_id"] == row["agent_id"]
            and c["epoch"] == row["epoch"] + 1
            and not c["abandoned"]
            and c.get("context_sent_tokens") is not None
        ]
        if later:
            first = min(later, key=lambda c: c["line"])
            row["after_tokens"] = first["context_sent_tokens"]
            row["after_tokens_exact"] = False


def add_summary_usage(compaction: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    """The usage of a compaction's own summarising `calls`, added to its `summary_*` usage."""
    for column, name in _SUMMARY_USAGE.items():
        values = [c[name] for c in calls if c.get(name) is not None]
        compaction[column] = (
            (compaction.get(column) or 0) + sum(values) if values else compaction.get(column)
        )


def spawned_agents(records: list[dict[str, Any]]) -> dict[tuple[Any, str], str]:
    """(session id, agent id) -> the tool_use_id of the tool call that started the agent, from
    the `toolUseResult.agentId` of its result."""
    found: dict[tuple[Any, str], str] = {}
    for record in records:
        agent = (record.get("toolUseResult") or {}).get("agentId")
        if agent:
            for block in content(record):
                if block.get("type") == "tool_result" and block.get("tool_use_id"):
                    found[(record.get("sessionId"), agent)] = block["tool_use_id"]
    return found
