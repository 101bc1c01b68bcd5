"""Gemini CLI chats as JSON lines (`session-<time>-<id>.jsonl`, Gemini CLI 0.39 and later):
the log a session appends to, folded into the chat it describes.

Gemini CLI writes, one JSON object a line:

- a metadata record (`sessionId`, `projectHash`, `startTime`, `lastUpdated`, `kind`), first;
  a chat converted from the older single-document layout may hold its `messages` there too;
- message records (`id`, `timestamp`, `type`, `content`, and for `gemini` ones `toolCalls`,
  `thoughts`, `tokens`, `model`): a message written again under the same `id` (its tool
  results or its tokens arrived) replaces the earlier version and keeps its place;
- `{"$rewindTo": id}`: the user rewound; that message and every one after it leave the chat;
- `{"$set": {...}}`: metadata changed; with `messages`, the whole list is replaced.

A reader of the chat as Gemini CLI resumes it would lose what was rewound or replaced; those
messages were sent, and their calls were billed, so they are kept here, flagged `abandoned`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Message:
    """A message of the chat: its latest version, the line it was last written at, and whether
    a rewind or a replaced list dropped it."""

    record: dict[str, Any]
    line: int
    abandoned: bool = False


@dataclass
class Folded:
    """What a chat's lines say: its metadata, its messages in the order first written, and how
    many lines were records."""

    metadata: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    records: int = 0
    lines: list[tuple[int, str, Any]] = field(default_factory=list)
    """Each record's line, kind (`session`, `set`, `rewind`, `message.<type>`) and time."""
    live: dict[str, Message] = field(default_factory=dict)
    """The messages not dropped, by id (what Gemini CLI would resume)."""

    def put(self, record: dict[str, Any], line: int) -> None:
        known = self.live.get(record["id"])
        if known is not None:
            known.record, known.line = record, line
            return
        message = Message(record, line)
        self.messages.append(message)
        self.live[record["id"]] = message

    def drop(self, messages: list[Message]) -> None:
        for message in messages:
            message.abandoned = True
            self.live.pop(message.record["id"], None)

    def rewind(self, to: str) -> None:
        """Drop message `to` and every later one (all of them when `to` is unknown, as Gemini
        CLI does)."""
        order = list(self.live.values())
        ids = [m.record["id"] for m in order]
        self.drop(order[ids.index(to) :] if to in ids else order)

    def replace(self, records: list[Any], line: int) -> None:
        """A checkpoint: the chat is `records` now; messages not among them are dropped."""
        kept = {r["id"] for r in records if _is_message(r)}
        self.drop([m for m in self.live.values() if m.record["id"] not in kept])
        for record in records:
            if _is_message(record):
                self.put(record, line)


def fold(lines: list[tuple[int, bytes]]) -> tuple[Folded, list[int]]:
    """The chat of `lines` (line number, bytes), and the numbers of the lines that are not a
    JSON object (torn or corrupt: the last one while Gemini CLI was writing it)."""
    chat, bad = Folded(), []
    for number, raw in lines:
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError):
            bad.append(number)
            continue
        if not isinstance(record, dict):
            bad.append(number)
            continue
        chat.records += 1
        chat.lines.append((number, _kind(record), record.get("timestamp")))
        _apply(chat, record, number)
    return chat, bad


def _apply(chat: Folded, record: dict[str, Any], number: int) -> None:
    if isinstance(record.get("$rewindTo"), str):
        chat.rewind(record["$rewindTo"])
    elif _is_message(record):
        chat.put(record, number)
    elif isinstance(record.get("$set"), dict):
        update = record["$set"]
        chat.metadata.update({k: v for k, v in update.items() if k != "messages"})
        if isinstance(update.get("messages"), list):
            chat.replace(update["messages"], number)
    elif isinstance(record.get("sessionId"), str):
        chat.metadata.update({k: v for k, v in record.items() if k != "messages"})
        for message in record.get("messages") or []:
            if _is_message(message):
                chat.put(message, number)


def _kind(record: dict[str, Any]) -> str:
    """What a line is, as its `events` row's `kind`."""
    if "$rewindTo" in record:
        return "rewind"
    if _is_message(record):
        return f"message.{record.get('type')}"
    if "$set" in record:
        return "set"
    return "session"


def _is_message(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("id"), str)


def is_metadata(record: dict[str, Any]) -> bool:
    """The first record of a JSON-lines chat: the session's `sessionId` and `projectHash`."""
    return (
        isinstance(record.get("sessionId"), str)
        and isinstance(record.get("projectHash"), str)
        and "type" not in record
    )


def is_chat_line(record: dict[str, Any]) -> bool:
    """A later record of a JSON-lines chat: a message, a rewind or a metadata update."""
    return (_is_message(record) and isinstance(record.get("type"), str)) or bool(
        {"$set", "$rewindTo"} & set(record)
    )
