"""Gemini CLI chats: `~/.gemini/tmp/<project hash>/chats/session-<time>-<id>.json`, one JSON
object per session (`sessionId`, `projectHash`, `startTime`, `lastUpdated`, `messages`), read
whole (see `documents`); or, from Gemini CLI 0.39, `session-<time>-<id>.jsonl`, the same chat
as a log of JSON lines, folded into its messages by `gemini_cli_lines` (a message rewound or
replaced is kept, `abandoned`; an unreadable line is skipped and named).

- A `user` message is a user message (the first the `prompt`; its `content` a string or a list
  of parts with `text`).
- A `gemini` message is one model response and one call: its `content` a text block, its
  `thoughts` a `thinking` block (their subjects and descriptions), each of its `toolCalls` a
  `tool_use` block (`id`, `name`, `args`) whose result (`result[].functionResponse.response`,
  else `resultDisplay`) is a `tool_result` of the user message after it (`status` "error" makes
  it an error). Its `tokens` are the call's usage: `input_tokens` = `input` − `cached`,
  `cache_read_input_tokens` = `cached`, `output_tokens` = `output` + `thoughts` (Gemini bills
  thoughts as output), `reasoning_output_tokens` = `thoughts`; `model` its model.
- `info`, `error` and other messages are rows of `events` only.

No public chat file was found to test against: the reader follows the layout Gemini CLI's
source and the tools that read its chats describe, and is tested on a file made to it.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.formats import Part
from evo_magic.analysis.formats.documents import (
    Conversation,
    document,
    part,
    text_block,
    text_of,
    timestamp,
)
from evo_magic.analysis.formats.gemini_cli_lines import (
    Folded,
    Message,
    fold,
    is_chat_line,
    is_metadata,
)
from evo_magic.analysis.formats.registry import Format, Sniff

SOURCE = "gemini_cli"
_START = re.compile(rb'\s*\{\s*"(sessionId|projectHash|startTime|lastUpdated)"\s*:')


def is_gemini_cli(sniff: Sniff) -> bool:
    """A Gemini CLI chat: a JSON object opening with its session fields, holding `messages`;
    or JSON lines whose first record is the session's metadata and whose others are messages,
    rewinds or metadata updates."""
    records = sniff.records
    if records and is_metadata(records[0]):
        return all(is_chat_line(r) for r in records[1:6])
    head = sniff.head
    return bool(_START.match(head)) and b'"projectHash"' in head and b'"messages"' in head


def read(engine: Any, sources: list[Any]) -> Part:
    """The frames' rows of Gemini CLI chats (whole JSON documents and JSON lines)."""
    conversations, records, skipped, without = [], 0, {}, []
    for source in sources:
        if _is_lines(source):
            folded = _lines(source)
            c = _chat(source, folded.metadata, folded.messages, records=False)
            for number, kind, stamp in folded.lines:  # every line, rewinds too
                c.event(kind, timestamp(stamp), number, seq=number)
            conversations.append(c)
            records += folded.records
            if not folded.messages:  # a session opened and left before its first prompt
                without.append(source.name)
                skipped["gemini_cli: file without messages"] = len(without)
            continue
        try:
            chat = document(source)
            if not isinstance(chat, dict) or not isinstance(chat.get("messages"), list):
                raise TranscriptError(f"{source.path}: not a chat (no list of `messages`)")
            for n, message in enumerate(chat["messages"]):
                if not isinstance(message, dict):
                    raise TranscriptError(f"{source.path}: messages[{n}] is not a JSON object")
            c = _chat(source, chat, [Message(m, None) for m in chat["messages"]])
        except TranscriptError as error:
            warnings.warn(f"{error}; skipped", TranscriptWarning, stacklevel=5)
            skipped["unreadable file"] = skipped.get("unreadable file", 0) + 1
            continue
        conversations.append(c)
        records += len(chat["messages"])
    return part(conversations, records, skipped=skipped, without_messages=without)


def _is_lines(source: Any) -> bool:
    """Whether the file is JSON lines: its first line is a record (a pretty-printed chat's
    first line is `{`, though a line inside it may hold a small object)."""
    head = source.head(1)
    return bool(head) and len(source.numbers) > 0 and head[0][0] == int(source.numbers[0])


def _lines(source: Any) -> Folded:
    """The chat a JSON-lines file describes; its unreadable lines noted on `source` (the load
    warns once, naming the file and the lines)."""
    lines = [(int(source.numbers[row]), source.line(row)) for row in range(len(source.starts))]
    folded, bad = fold(lines)
    source.bad.extend(bad)
    return folded


def _chat(
    source: Any, chat: dict[str, Any], messages: list[Message], records: bool = True
) -> Conversation:
    """The rows of a chat's messages; `records`: an `events` row for each message (a JSON-lines
    chat has one for each of its lines instead)."""
    session = chat.get("sessionId")
    name = session if isinstance(session, str) and session else source.path.stem
    c = Conversation(SOURCE, source, name)
    prompted = False
    for i, said in enumerate(messages):
        message, line = said.record, said.line
        n = i if line is None else line  # `seq`: the record's place (its line, in JSON lines)
        kind, stamp = message.get("type"), timestamp(message.get("timestamp"))
        blocks, calls = len(c.blocks), len(c.calls)
        if records:
            c.event(f"message.{kind}", stamp, line, seq=n)
        if kind == "user":
            text = text_of(message.get("content")) or ""
            c.message("user", "meta" if prompted else "prompt", [text_block(text)], stamp, line, n)
            prompted = True
        elif kind == "gemini":
            _response(c, message, stamp, n, line)
        if said.abandoned:  # rewound or replaced: sent and billed, not in the chat resumed
            for row in [*c.blocks[blocks:], *c.calls[calls:]]:
                row["abandoned"] = True
    return c


def _response(
    c: Conversation, message: dict[str, Any], stamp: Any, n: int, line: int | None = None
) -> None:
    blocks: list[dict[str, Any]] = []
    thoughts = message.get("thoughts")
    if isinstance(thoughts, list) and thoughts:
        said = [
            f"{t.get('subject', '')}: {t.get('description', '')}".strip(": ")
            for t in thoughts
            if isinstance(t, dict)
        ]
        blocks.append({"block_type": "thinking", "text": "\n".join(said)})
    text = text_of(message.get("content")) or ""
    calls = [t for t in message.get("toolCalls") or [] if isinstance(t, dict)]
    if text or not calls:
        blocks.append(text_block(text))
    results = []
    for i, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call.get("id"), str) else f"call-{n}-{i}"
        args = call.get("args")
        blocks.append(
            {
                "block_type": "tool_use",
                "tool_name": call.get("name"),
                "tool_use_id": call_id,
                "text": json.dumps(args if isinstance(args, dict) else {}, ensure_ascii=False),
            }
        )
        results.append(
            {
                "block_type": "tool_result",
                "tool_use_id": call_id,
                "tool_name": call.get("name"),
                "text": _result(call),
                "is_error": call.get("status") == "error",
            }
        )
    index = c.message("assistant", "response", blocks, stamp, line, seq=n)
    model = message.get("model") if isinstance(message.get("model"), str) else None
    c.call(model, _usage(message.get("tokens")), index, stamp, line, seq=n)
    if results:
        c.message("user", "tool_result", results, stamp, line, seq=n)


def _result(call: dict[str, Any]) -> str:
    """A tool call's output: its function responses' output, else what was displayed."""
    texts = []
    for item in call.get("result") or []:
        response = item.get("functionResponse") if isinstance(item, dict) else None
        body = response.get("response") if isinstance(response, dict) else None
        if isinstance(body, dict):
            value = body.get("output", body.get("error"))
            texts.append(value if isinstance(value, str) else json.dumps(body))
    if texts:
        return "\n".join(texts)
    shown = call.get("resultDisplay")
    return shown if isinstance(shown, str) else json.dumps(shown) if shown is not None else ""


def _usage(tokens: Any) -> dict[str, Any] | None:
    if not isinstance(tokens, dict):
        return None
    prompt, cached = tokens.get("input"), tokens.get("cached")
    output, thoughts = tokens.get("output"), tokens.get("thoughts")
    fresh = prompt
    if isinstance(prompt, int) and isinstance(cached, int) and 0 <= cached <= prompt:
        fresh = prompt - cached
    spoken = output
    if isinstance(output, int) and isinstance(thoughts, int):
        spoken = output + thoughts
    return {
        "input_tokens": fresh,
        "cache_read_input_tokens": cached,
        "output_tokens": spoken,
        "reasoning_output_tokens": thoughts,
    }


FORMAT = Format(
    name=SOURCE,
    reads="Gemini CLI chats (~/.gemini/tmp/<project>/chats/session-*.json, and the JSON-lines "
    "session-*.jsonl of 0.39 on): messages, tool calls with their results, per-message tokens, "
    "rewinds",
    recognised_by="a JSON object opening with `sessionId`, `projectHash`, `startTime` or "
    "`lastUpdated`, holding `projectHash` and `messages`; or JSON lines opening with a "
    "`sessionId` and `projectHash` record, then messages (`id`, `type`), `$set` or `$rewindTo`",
    detect_hook=is_gemini_cli,
    read_hook=read,
    suffixes=(".json", ".jsonl"),
)
"""The reader as registered (entry point `gemini_cli` of the group `evo_magic.formats`)."""
