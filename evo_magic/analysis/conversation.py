"""A recorded session rebuilt in order: its messages with their full content, the model calls
between them, and the compactions between its epochs (what trace-driven replay consumes).

    from evo_magic.analysis import conversation, Message, Call, Compaction
    for item in conversation(t, session_id):            # the main conversation
        if isinstance(item, Call): ...                  # sent with the messages before it
    for item in conversation(t, session_id, agent_id="a5bdbc1"): ...   # one subagent

Messages are a valid request in the Messages API's shape once their unsigned thinking is taken
out (`messages.without_unsigned_thinking`): what replay and probes send. A
block's content is what the frames hold: text, the tool input (parsed from its recorded JSON),
the tool result (a string, or its text parts). What the frames do not carry is replaced, and
each message counts what was changed in `Message.changes` (`changes(items)` sums them):

- an image or document (frames keep its media type and size, not its data) becomes a text
  placeholder saying what was there (`media without data`), in a message or a tool result;
- thinking is kept with its text and an empty signature (the frames keep none): the request
  it was sent in held it and the server counted it, so replay measures it; the API refuses
  thinking without a signature, so what sends these messages to a model takes it out
  (`unsigned thinking`, `without_unsigned_thinking`);
- a server tool call the file kept without its result (a Codex web search), or a block of a
  kind the API does not take (a Codex `compaction`), becomes a text placeholder (`not a
  request block`); an empty text block, which the API refuses, too (`empty text`);
- a tool input that is not a JSON object is wrapped as `{"input": <text>}` (`tool input not an
  object`); a message left with no block gets a placeholder (`empty message`).

Abandoned branches are left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from evo_magic.analysis.conversation_rows import ConversationRows, Key, active

if TYPE_CHECKING:
    from evo_magic.analysis.transcripts import Transcripts


@dataclass(frozen=True)
class Message:
    """One message of the history: `role` and `content` as the API takes them."""

    role: str
    content: list[dict[str, Any]]
    epoch: int
    index: int
    segment: int = 0
    turn: int | None = None
    kind: str | None = None
    """`message_kind`: prompt, response, tool_result, compact_summary, meta, ..."""
    changes: dict[str, int] = field(default_factory=dict)
    """What was changed to make it a valid request, by kind (see the module's docstring)."""

    def as_api(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Call:
    """A model call, sent with the messages yielded before it in its epoch (`message_index` of
    them); the message after it is its response."""

    call: int | None
    epoch: int
    message_index: int | None
    model: str | None
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    segment: int = 0
    reasoning_tokens: int | None = None
    """The reasoning tokens its output counted (`reasoning_output_tokens`; None: not known)."""


@dataclass(frozen=True)
class Compaction:
    """A full compaction: the epoch it ended, and what replaced the history."""

    epoch: int
    strategy: str | None
    trigger: str | None
    success: bool | None
    summary: str | None
    segment: int = 0


def conversations(t: Transcripts) -> list[tuple[str, str | None]]:
    """(session_id, agent_id) of every conversation in `t` (agent_id None: the main one)."""
    keys = t.blocks[["session_id", "agent_id"]].astype(object).drop_duplicates()
    return [(s, None if pd.isna(a) else a) for s, a in keys.itertuples(index=False)]


def conversation(
    t: Transcripts, session_id: str, agent_id: str | None = None
) -> Iterator[Message | Call | Compaction]:
    """Yield one conversation's messages, calls and compactions in order: per segment and
    epoch, the compaction that opened the epoch, then its messages in order, each call just
    before the message it answered with (a call without a known position comes last)."""
    rows = ConversationRows.of_frames(
        _of(t.blocks, session_id, agent_id),
        _of(t.calls, session_id, agent_id),
        _of(t.compactions, session_id, agent_id),
        _of(t.parts, session_id, agent_id) if len(t.parts) else t.parts,
    )
    return conversation_of(rows, (session_id, agent_id))


def conversation_of(rows: ConversationRows, key: Key) -> Iterator[Message | Call | Compaction]:
    """`conversation` of the conversation `key` from rows converted already (what builds
    many conversations uses: each frame is converted once for all of them)."""
    blocks = active(rows.blocks.get(key, []))
    calls = active(rows.calls.get(key, []))
    parts = _parts_by_block(rows.parts.get(key, []))
    # One pass over each conversation's rows (grouping in Python): filtering the frames per
    # epoch and grouping them per message cost more than everything else replay does.
    messages = _by_epoch(blocks)
    placed = _by_epoch(calls)
    done = {(int(r.segment), int(r.epoch)): r for r in rows.compactions.get(key, []) if r.success}
    for segment, epoch in sorted(messages.keys() | placed.keys()):
        opened = done.get((segment, epoch - 1))
        if opened is not None:
            yield _compaction(opened)
        pending = placed.get((segment, epoch), {})
        for index, found in sorted(messages.get((segment, epoch), {}).items()):
            for call in pending.pop(index, []):
                yield _call(call)
            yield _message(found, parts, segment, epoch, index)
        yield from _unanswered(pending)


def _by_epoch(rows: list[Any]) -> dict[tuple[int, int], dict[int | None, list[Any]]]:
    """The `rows` per (segment, epoch), then per message index (None: not known), each
    group in the rows' order."""
    found: dict[tuple[int, int], dict[int | None, list[Any]]] = {}
    for row in rows:
        index = None if pd.isna(row.message_index) else int(row.message_index)
        found.setdefault((int(row.segment), int(row.epoch)), {}).setdefault(index, []).append(row)
    return found


def _message(
    rows: list[Any], parts: dict[tuple[Any, ...], list[Any]], segment: int, epoch: int, index: int
) -> Message:
    """The message of its blocks' `rows`, made a valid request (see the module's docstring)."""
    first = rows[0]
    changed: dict[str, int] = {}
    content = [block for row in rows if (block := _block(row, parts, changed)) is not None]
    if not content:
        content = [{"type": "text", "text": "[no content kept]"}]
        _count(changed, "empty message")
    return Message(
        role=str(first.role),
        content=content,
        changes=changed,
        epoch=epoch,
        index=index,
        segment=segment,
        turn=None if pd.isna(first.turn) else int(first.turn),
        kind=None if pd.isna(first.message_kind) else str(first.message_kind),
    )


def _unanswered(pending: dict[int | None, list[Any]]) -> Iterator[Call]:
    """The calls of an epoch left after its messages: by message index, then those without."""
    for index in sorted(i for i in pending if i is not None):
        for call in pending[index]:
            yield _call(call)
    for call in pending.get(None, []):
        yield _call(call)


def _of(frame: pd.DataFrame, session_id: str, agent_id: str | None) -> pd.DataFrame:
    same = frame["session_id"].astype(object) == session_id
    agents = frame["agent_id"].astype(object)
    mine = agents.isna() if agent_id is None else agents == agent_id
    return frame[same & mine]


def changes(items: Any) -> dict[str, int]:
    """What was changed, by kind, in the messages of `items` (what `conversation` yields) to
    make them a valid request; empty when nothing was."""
    total: dict[str, int] = {}
    for item in items:
        for kind, count in getattr(item, "changes", {}).items():
            total[kind] = total.get(kind, 0) + count
    return total


def _count(changed: dict[str, int], kind: str) -> None:
    changed[kind] = changed.get(kind, 0) + 1


def _placeholder(kind: str, media_type: Any, size: Any) -> dict[str, Any]:
    """A text block saying which media was here (its data is not in the frames)."""
    what = kind if pd.isna(media_type) else f"{kind} ({media_type})"
    size_text = "" if pd.isna(size) else f", {int(size):,} characters of data"
    return {"type": "text", "text": f"[{what}{size_text}: not kept in the transcript]"}


def _parts_by_block(parts: list[Any]) -> dict[tuple[Any, ...], list[Any]]:
    """Per tool result (file, line, block), its parts as rows (turned into blocks by `_part`)."""
    found: dict[tuple[Any, ...], list[Any]] = {}
    for row in parts:
        found.setdefault((row.file, row.line, row.block_index), []).append(row)
    return found


def _part(row: Any, changed: dict[str, int]) -> dict[str, Any]:
    if row.part_type == "text" and not pd.isna(row.text) and str(row.text).strip():
        return {"type": "text", "text": row.text}
    if row.part_type == "text":
        _count(changed, "empty text")
        return {"type": "text", "text": "[empty]"}
    if row.part_type in ("image", "document"):
        _count(changed, "media without data")
    else:
        _count(changed, "not a request block")
    return _placeholder(str(row.part_type), row.media_type, row.chars)


def _tool_use(row: Any, text: str | None, changed: dict[str, int]) -> dict[str, Any]:
    """A `tool_use` block from its row: the recorded input parsed, wrapped when it is not an
    object (the API takes only an object)."""
    try:
        tool_input: Any = json.loads(text) if text is not None else {}
    except (ValueError, RecursionError):
        tool_input = text
    if not isinstance(tool_input, dict):
        _count(changed, "tool input not an object")
        tool_input = {"input": tool_input}
    return {
        "type": "tool_use",
        "id": None if pd.isna(row.tool_use_id) else str(row.tool_use_id),
        "name": None if pd.isna(row.tool_name) else str(row.tool_name),
        "input": tool_input,
    }


def _block(
    row: Any, parts: dict[tuple[Any, ...], list[Any]], changed: dict[str, int]
) -> dict[str, Any] | None:
    """One block of a request from a row of `blocks`, or None to leave it out."""
    kind = row.block_type
    text = None if pd.isna(row.text) else str(row.text)
    if pd.isna(kind):  # an element that is no block (a bare string, an object without a type)
        _count(changed, "not a request block")
        return {"type": "text", "text": "[a content element that is not a block]"}
    if kind == "text":
        if text is None or not text.strip():
            _count(changed, "empty text")
            return {"type": "text", "text": "[empty]"}
        return {"type": "text", "text": text}
    if kind == "tool_use":
        return _tool_use(row, text, changed)
    if kind == "tool_result":
        listed = parts.get((row.file, row.line, row.block_index))
        content: Any = [_part(p, changed) for p in listed] if listed else (text or "")
        block = {"type": "tool_result", "tool_use_id": str(row.tool_use_id), "content": content}
        if not pd.isna(row.is_error) and bool(row.is_error):
            block["is_error"] = True
        return block
    if kind == "thinking":
        # Sent again with the turn (and counted by the server): kept for the request's size.
        _count(changed, "unsigned thinking")
        return {"type": "thinking", "thinking": text or "", "signature": ""}
    if kind in ("image", "document"):
        _count(changed, "media without data")
        return _placeholder(str(kind), row.media_type, row.chars)
    _count(changed, "not a request block")
    shown = f": {text}" if text else ""
    return {"type": "text", "text": f"[{kind}{shown}]"}


def _call(row: Any) -> Call:
    usage = {
        name: None if pd.isna(getattr(row, name)) else int(getattr(row, name))
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        )
    }
    return Call(
        call=None if pd.isna(row.call) else int(row.call),
        epoch=int(row.epoch),
        message_index=None if pd.isna(row.message_index) else int(row.message_index),
        model=None if pd.isna(row.model) else str(row.model),
        usage=usage,
        stop_reason=None if pd.isna(row.stop_reason) else str(row.stop_reason),
        segment=int(row.segment),
        reasoning_tokens=_count_of(getattr(row, "reasoning_output_tokens", None)),
    )


def _count_of(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def _compaction(row: Any) -> Compaction:
    def value(x: Any) -> Any:
        return None if pd.isna(x) else x

    return Compaction(
        epoch=int(row.epoch),
        strategy=value(row.strategy),
        trigger=value(row.trigger),
        success=value(row.success),
        summary=value(row.summary),
        segment=int(row.segment),
    )
