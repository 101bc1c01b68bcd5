"""A recorded session rebuilt in order: its messages with their full content, the model calls
between them, and the compactions between its epochs (what trace-driven replay consumes).

    from evo_magic.analysis import conversation, Message, Call, Compaction
    for item in conversation(t, session_id):            # the main conversation
        if isinstance(item, Call): ...                  # sent with the messages before it
    for item in conversation(t, session_id, agent_id="a5bdbc1"): ...   # one subagent

Messages are in the Messages API's shape. A block's content is what the frames hold: text,
the tool input (parsed from its recorded JSON), the tool result (a string, or its parts: text
parts whole, images as their media type and size only, since frames do not carry image data),
thinking. Abandoned branches are left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

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
    blocks = _of(t.blocks, session_id, agent_id)
    blocks = blocks[~blocks["abandoned"].fillna(False).astype(bool)]
    calls = _of(t.calls, session_id, agent_id)
    calls = calls[~calls["abandoned"].fillna(False).astype(bool)]
    compactions = _of(t.compactions, session_id, agent_id)
    parts = _of(t.parts, session_id, agent_id) if len(t.parts) else t.parts
    part_lists = _parts_by_block(parts)
    # One pass over each frame (grouping in Python): filtering the frames per epoch and
    # grouping them per message cost more than everything else replay does.
    messages: dict[tuple[int, int], dict[int, list[Any]]] = {}
    order = blocks.sort_values(["segment", "epoch", "message_index"], kind="stable")
    for row in order.itertuples():
        epoch_rows = messages.setdefault((int(row.segment), int(row.epoch)), {})
        epoch_rows.setdefault(int(row.message_index), []).append(row)
    placed: dict[tuple[int, int], dict[int | None, list[Any]]] = {}
    for row in calls.itertuples():
        index = None if pd.isna(row.message_index) else int(row.message_index)
        key = (int(row.segment), int(row.epoch))
        placed.setdefault(key, {}).setdefault(index, []).append(row)
    done = {(int(r.segment), int(r.epoch)): r for r in compactions.itertuples() if r.success}
    for segment, epoch in sorted(messages.keys() | placed.keys()):
        opened = done.get((segment, epoch - 1))
        if opened is not None:
            yield _compaction(opened)
        pending = placed.get((segment, epoch), {})
        for index, rows in sorted(messages.get((segment, epoch), {}).items()):
            for call in pending.pop(index, []):
                yield _call(call)
            first = rows[0]
            yield Message(
                role=str(first.role),
                content=[_block(row, part_lists) for row in rows],
                epoch=epoch,
                index=index,
                segment=segment,
                turn=None if pd.isna(first.turn) else int(first.turn),
                kind=None if pd.isna(first.message_kind) else str(first.message_kind),
            )
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


def _parts_by_block(parts: pd.DataFrame) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    found: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in parts.itertuples():
        key = (row.file, row.line, row.block_index)
        if row.part_type == "text":
            part: dict[str, Any] = {"type": "text", "text": row.text}
        else:
            part = {"type": row.part_type}
            if not pd.isna(row.media_type):
                part["source"] = {"media_type": row.media_type, "data_chars": row.chars}
        found.setdefault(key, []).append(part)
    return found


def _block(row: Any, parts: dict[tuple[Any, ...], list[dict[str, Any]]]) -> dict[str, Any]:
    kind = row.block_type
    text = None if pd.isna(row.text) else row.text
    if kind == "text":
        return {"type": "text", "text": text}
    if kind == "tool_use":
        try:
            tool_input: Any = json.loads(text) if text is not None else {}
        except ValueError:
            tool_input = text
        return {
            "type": "tool_use",
            "id": row.tool_use_id,
            "name": row.tool_name,
            "input": tool_input,
        }
    if kind == "tool_result":
        content: Any = parts.get((row.file, row.line, row.block_index), text)
        block = {"type": "tool_result", "tool_use_id": row.tool_use_id, "content": content}
        if not pd.isna(row.is_error) and bool(row.is_error):
            block["is_error"] = True
        return block
    if kind == "thinking":
        return {"type": "thinking", "thinking": text}
    block = {"type": kind}
    if not pd.isna(row.media_type):
        block["source"] = {"media_type": row.media_type, "data_chars": row.chars}
    if text is not None:
        block["text"] = text
    return block


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
    )


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
