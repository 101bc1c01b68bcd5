"""OpenAI Codex CLI sessions: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`.

Each line is `{"timestamp", "type", "payload"}`. How the records map onto the frames:

- `session_meta` names the session (`payload.id`); a subagent's file names its parent thread
  (`payload.source.subagent.thread_spawn.parent_thread_id`): its rows get the parent's
  `session_id`, their own `agent_id` and `sidechain`.
- `response_item`s are the conversation, in the Messages API's shape: consecutive items of the
  same role form one message. `message` parts (`input_text`, `output_text`) are text blocks and
  `input_image` image blocks; `reasoning` is a `thinking` block (its summary text);
  `function_call`, `custom_tool_call` and `local_shell_call` are `tool_use` blocks (`text` is
  the call's arguments exactly as recorded); their outputs are `tool_result` blocks of a user
  message. A `web_search_call` (run by the server, no output follows) is a `server_tool_use`
  block named `web_search`, with the item's id or one made from its line. `developer`
  messages keep their role. Where the rollout has `user_message` events, they mark the user
  messages a person typed (prompts, counted by `turn`); the other user messages are `meta`. An
  event with no user message item before it (since the previous event or `task_started`) is
  the prompt itself: a user message of its text and images.
- `event_msg` `token_count` with usage is a call: `last_token_usage` (Codex counts cached
  tokens inside `input_tokens`: here `input_tokens` is the uncached part and
  `cache_read_input_tokens` the cached, so `context_sent_tokens` is Codex's `input_tokens`).
  A repeat of the same totals is not a new call. Its response is the assistant message just
  written, or the next one when that has its call already or the last message is not the
  model's (Codex 0.58 writes the count before the items of its response).
- A rollout of 2025 from before `session_meta` (a header line `{id, timestamp, ...}`, then
  `{"record_type": "state"}` markers and response items as whole lines) is read the same way.
- `compacted` is a compaction: the next epoch starts with its `replacement_history` when the
  record has one (an opaque server-side `compaction` item in it is a `compaction` block, its
  size in `chars`), else with the summary (`payload.message`) as a user message.
- `turn_context` sets the model of the calls that follow.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evo_magic.analysis.formats import CODEX_ITEMS, Part, Position, is_codex, usage_count
from evo_magic.analysis.formats.codex_items import (
    Read,
    part_block,
    prompt_lines,
    text_of,
    tool_output,
    typed_prompt,
    user_kind,
    web_search_block,
)
from evo_magic.analysis.formats.registry import Format
from evo_magic.analysis.frames import (
    BLOCK_COLUMNS,
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    PART_COLUMNS,
    rows_table,
)
from evo_magic.analysis.loader import Engine, SourceFile

SOURCE = "codex"
_FIELDS = {"timestamp": "VARCHAR", "type": "VARCHAR", "payload": "JSON"}
_SELECT = "type, try_cast(timestamp as TIMESTAMPTZ) as timestamp, payload::VARCHAR as payload"
_META_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions",
    "# AGENTS.md",
    "<INSTRUCTIONS>",
)


def read(engine: Engine, sources: list[SourceFile]) -> Part:
    """The frames' rows of Codex rollout files."""
    records = engine.read(sources, _FIELDS, _SELECT, key="type")
    # A line without `payload` (a rollout from before `session_meta`) is read whole.
    whole = pc.if_else(
        pc.is_null(records.column("payload")),
        records.column("raw"),
        pa.scalar(None, pa.large_string()),
    )
    records = records.set_column(records.column_names.index("raw"), "raw", whole)
    by_file: dict[int, list[dict[str, Any]]] = {s.file_id: [] for s in sources}
    for record in records.to_pylist():
        by_file[record["file_id"]].append(record)
    rollouts = [_Rollout(s, by_file[s.file_id]) for s in sources]
    for rollout in rollouts:
        rollout.read()

    def rows(name: str, spec: dict[str, str]) -> pa.Table:
        return rows_table([row for r in rollouts for row in getattr(r, name)], spec)

    without = [r.source.name for r in rollouts if not r.blocks]
    _warn_redacted({r.source.name: r.redacted for r in rollouts if r.redacted})
    return Part(
        blocks=rows("blocks", BLOCK_COLUMNS),
        parts=rows("parts", PART_COLUMNS),
        calls=rows("calls", CALL_COLUMNS),
        compactions=rows("compactions", COMPACTION_COLUMNS),
        events=rows("identities", EVENT_COLUMNS),
        records=records.num_rows,
        skipped={"codex: file without messages": len(without)} if without else {},
        without_messages=without,
    )


REDACTED = "[REDACTED"
"""How a publisher's marker in place of a reasoning item's encrypted content begins."""


def _warn_redacted(counts: dict[str, int]) -> None:
    """One warning naming the files whose reasoning items had their encrypted content
    replaced by a marker (their `thinking` blocks' `status` is "redacted")."""
    if not counts:
        return
    named = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items())[:5])
    more = f" and {len(counts) - 5} more" if len(counts) > 5 else ""
    warnings.warn(
        f"codex: reasoning items whose encrypted content was redacted by the file's publisher "
        f"in {named}{more}: what those calls sent cannot be rebuilt exactly (replay counts "
        f"their reasoning from the calls' reasoning_output_tokens, never the marker)",
        stacklevel=4,
    )


def _payload(record: dict[str, Any]) -> dict[str, Any]:
    """The record's payload; for a line of a rollout from before `session_meta`, the line
    itself: a response item (then the record is read as a `response_item`), or the header
    (read as `session_meta`)."""
    text = record.get("payload") or record.get("raw") or "null"
    try:
        payload = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(payload, dict):
        return {}
    if record.get("payload") is None and record.get("raw") is not None:
        if record.get("type") in CODEX_ITEMS:
            record["type"] = "response_item"
        elif record.get("type") is None and "id" in payload and "record_type" not in payload:
            record["type"] = "session_meta"
    return payload


class _Rollout:
    """One rollout file read into rows."""

    def __init__(self, source: SourceFile, records: list[dict[str, Any]]):
        self.source = source
        self.records = records
        self.session: str = source.path.stem
        self.agent: str | None = None
        self.model: str | None = None
        self.turn = 0
        self.at = Position()
        self.totals: Any = None
        self.call = 0
        self.answered: set[tuple[int, int]] = set()
        self.waiting: dict[str, Any] | None = None
        self.redacted = 0
        """Reasoning items whose encrypted content is a publisher's marker."""
        """A call whose response's items have not been written yet."""
        self.prompts: set[int] | None = None
        self.event_prompts: set[int] = set()  # prompts only as their event
        self.blocks: list[dict[str, Any]] = []
        self.parts: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.compactions: list[dict[str, Any]] = []
        self.identities: list[dict[str, Any]] = []
        self.names: dict[str, str] = {}

    def read(self) -> None:
        """Every record, in order, read by its type (`_RECORDS`); each gets its identity as
        it was before the record."""
        payloads = [_payload(record) for record in self.records]
        self.prompts, self.event_prompts = prompt_lines(self.records, payloads)
        for record, payload in zip(self.records, payloads, strict=True):
            kind = record.get("type")
            identity = {**self._identity(record), "kind": kind}
            reader = _RECORDS.get(kind)
            if reader is not None:
                reader(self, record, payload)
            self.identities.append(identity)

    def _identity(self, record: dict[str, Any]) -> dict[str, Any]:
        return {
            "source": SOURCE,
            "session_id": self.session,
            "agent_id": self.agent,
            "sidechain": self.agent is not None,
            "seq": record["line"],
            "timestamp": record.get("timestamp"),
            "turn": self.turn,
            "epoch": self.at.epoch,
            "segment": 0,
            "file": self.source.name,
            "line": record["line"],
        }

    # -- records, by type ---------------------------------------------------------------------

    def _meta(self, record: dict[str, Any], payload: dict[str, Any]) -> None:
        """The session's id; a subagent's file names its parent thread."""
        if isinstance(payload.get("id"), str) and self.agent is None:
            self.session = payload["id"]
        source = payload.get("source")
        spawn = source.get("subagent", {}) if isinstance(source, dict) else {}
        spawn = spawn.get("thread_spawn", {}) if isinstance(spawn, dict) else {}
        parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
        if isinstance(parent, str):
            self.agent, self.session = self.session, parent

    def _turn_context(self, record: dict[str, Any], payload: dict[str, Any]) -> None:
        self.model = payload.get("model") or self.model

    def _response_item(self, record: dict[str, Any], payload: dict[str, Any]) -> None:
        self._item(record, payload, new_turns=True)

    def _event(self, record: dict[str, Any], payload: dict[str, Any]) -> None:
        if payload.get("type") == "token_count":
            self._token_count(record, payload)
        elif payload.get("type") == "user_message" and record["line"] in self.event_prompts:
            self._add(record, typed_prompt(payload), new_turns=True)

    def _compacted(self, record: dict[str, Any], payload: dict[str, Any]) -> None:
        """A compaction: the next epoch opens with its replacement history, else its summary."""
        summary = payload.get("message")
        row = {
            **self._identity(record),
            "strategy": "summarise",
            "success": True,
            "summary": summary if isinstance(summary, str) else None,
            "summary_chars": len(summary) if isinstance(summary, str) else None,
        }
        self.compactions.append(row)
        self.at.new_epoch()
        history = payload.get("replacement_history")
        if isinstance(history, list) and history:
            for item in history:
                if isinstance(item, dict):
                    self._item(record, item, new_turns=False)
            for block in self.blocks:
                if block["epoch"] == self.at.epoch and block.get("message_kind") == "prompt":
                    block["message_kind"] = "compact_history"  # carried over, not typed now
        elif isinstance(summary, str):
            read = ("user", "compact_summary", [{"block_type": "text", "text": summary}])
            self._add(record, read, new_turns=False)

    # -- response items, by type --------------------------------------------------------------

    def _item(self, record: dict[str, Any], item: dict[str, Any], new_turns: bool) -> None:
        """A response item (`_ITEMS` reads each type): its blocks, in the message of its role."""
        kind = item.get("type")
        reader = _ITEMS.get(kind) if isinstance(kind, str) else None
        if reader is not None:
            self._add(record, reader(self, record, item, new_turns), new_turns)

    def _message(self, record: dict[str, Any], item: dict[str, Any], new_turns: bool) -> Read:
        role = item.get("role") or "user"
        content = item.get("content")
        texts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        kind = self._message_kind(record["line"], role, text_of(content), new_turns)
        return role, kind, [part_block(p) for p in texts]

    def _message_kind(self, line: int, role: str, text: str, new_turns: bool) -> str:
        if role == "assistant":
            return "response"
        if self.prompts is not None and role == "user" and new_turns:
            # The rollout says what a person typed (its `user_message` events).
            return "prompt" if line in self.prompts else user_kind(text, "meta")
        if role != "user" or text.lstrip().startswith(_META_PREFIXES):
            return "meta"
        return user_kind(text, "prompt")

    def _reasoning(self, record: dict[str, Any], item: dict[str, Any], new_turns: bool) -> Read:
        summary = text_of(item.get("summary")) or text_of(item.get("content"))
        block: dict[str, Any] = {"block_type": "thinking", "text": summary}
        sealed = item.get("encrypted_content")
        if isinstance(sealed, str) and sealed.startswith(REDACTED):
            block["status"] = "redacted"  # its publisher replaced what was sent back
            self.redacted += 1
        return "assistant", "response", [block]

    def _web_search(self, record: dict[str, Any], item: dict[str, Any], new_turns: bool) -> Read:
        return "assistant", "response", [web_search_block(item, record["line"])]

    def _tool_call(self, record: dict[str, Any], item: dict[str, Any], new_turns: bool) -> Read:
        kind = item["type"]
        call_id = item.get("call_id") or item.get("id")
        name = item.get("name") or {"local_shell_call": "local_shell"}.get(kind, kind)
        if kind == "function_call":
            text = item.get("arguments")
        elif kind == "custom_tool_call":
            text = item.get("input")
        else:
            text = json.dumps(item.get("action"), ensure_ascii=False, separators=(",", ":"))
        if isinstance(call_id, str):
            self.names[call_id] = name
        block = {
            "block_type": "tool_use",
            "tool_name": name,
            "tool_use_id": call_id,
            "text": text if isinstance(text, str) else json.dumps(text),
        }
        return "assistant", "response", [block]

    def _tool_output(self, record: dict[str, Any], item: dict[str, Any], new_turns: bool) -> Read:
        call_id = item.get("call_id")
        block = {
            "block_type": "tool_result",
            "tool_use_id": call_id,
            "tool_name": self.names.get(call_id),
            "is_error": False,
            "status": "ok",
        }
        return "user", "tool_result", [{**block, **tool_output(item.get("output"))}]

    def _compaction(self, record: dict[str, Any], item: dict[str, Any], new_turns: bool) -> Read:
        """The server's opaque summary: a `compaction` block of its size."""
        sealed = item.get("encrypted_content")
        size = len(sealed) if isinstance(sealed, str) else None
        return "user", "compact_summary", [{"block_type": "compaction", "chars": size}]

    # -- rows ---------------------------------------------------------------------------------

    def _add(self, record: dict[str, Any], read: Read, new_turns: bool) -> None:
        """An item's blocks as rows of the message of its role: consecutive items of one role
        are one message."""
        role, message_kind, blocks = read
        if message_kind == "prompt" and new_turns:
            self.turn += 1
        if self.at.message(role) and role == "assistant":
            self._response_started()
        identity = {**self._identity(record), "message_index": self.at.index, "role": role}
        for block in blocks:
            self._block(identity, message_kind, block)

    def _response_started(self) -> None:
        """A new assistant message: the response of the call waiting for its items, if any
        (Codex 0.58 and earlier write a response's token_count before them)."""
        if self.waiting is not None:
            self.waiting["message_index"] = self.at.index
            self.answered.add((self.at.epoch, self.at.index))
            self.waiting = None

    def _block(self, identity: dict[str, Any], message_kind: str, block: dict[str, Any]) -> None:
        row = {**identity, "message_kind": message_kind, "abandoned": False, **block}
        row["block_index"] = self.at.next_block
        if row.get("text") is not None and row.get("chars") is None:
            row["chars"] = len(row["text"])
        for n, part in enumerate(row.pop("_parts", [])):
            self.parts.append(
                {
                    **identity,
                    **part,
                    "abandoned": False,
                    "part_index": n,
                    "block_index": self.at.next_block,
                    "tool_use_id": row.get("tool_use_id"),
                }
            )
        self.blocks.append(row)
        self.at.next_block += 1

    def _token_count(self, record: dict[str, Any], payload: dict[str, Any]) -> None:
        info = payload.get("info")
        if not isinstance(info, dict) or not isinstance(info.get("last_token_usage"), dict):
            return
        totals = json.dumps(info.get("total_token_usage"), sort_keys=True)
        if totals == self.totals:  # the same count reported again
            return
        self.totals = totals
        last = {}
        for name, value in info["last_token_usage"].items():
            last[name], bad = usage_count(value)
            if bad:
                self.source.bad_usage.append(record["line"])
        sent = last.get("input_tokens")
        cached = last.get("cached_input_tokens")
        self.call += 1
        # A call produced the assistant message just written, unless that one already has its
        # call (or the last message is not the model's): then its items come next.
        latest = (self.at.epoch, self.at.index)
        produced = self.at.role == "assistant" and latest not in self.answered
        if produced:
            self.answered.add(latest)
        self.calls.append(
            {
                **self._identity(record),
                "call": self.call,
                "message_index": self.at.index if produced else None,
                "abandoned": False,
                "model": self.model,
                "input_tokens": None if sent is None else sent - (cached or 0),
                "cache_read_input_tokens": cached,
                "output_tokens": last.get("output_tokens"),
                "reasoning_output_tokens": last.get("reasoning_output_tokens"),
                "context_sent_tokens": sent,
                "context_sent_tokens_exact": sent is not None,
            }
        )
        self.waiting = None if produced else self.calls[-1]


_RECORDS: dict[str, Callable[[_Rollout, dict[str, Any], dict[str, Any]], None]] = {
    "session_meta": _Rollout._meta,
    "turn_context": _Rollout._turn_context,
    "response_item": _Rollout._response_item,
    "compacted": _Rollout._compacted,
    "event_msg": _Rollout._event,
}
"""How each type of record is read (other types are identities only)."""
_ITEMS: dict[str, Callable[[_Rollout, dict[str, Any], dict[str, Any], bool], Read]] = {
    "message": _Rollout._message,
    "reasoning": _Rollout._reasoning,
    "web_search_call": _Rollout._web_search,
    **dict.fromkeys(("function_call", "custom_tool_call", "local_shell_call"), _Rollout._tool_call),
    **dict.fromkeys(("function_call_output", "custom_tool_call_output"), _Rollout._tool_output),
    "compaction": _Rollout._compaction,
    "compaction_summary": _Rollout._compaction,
}
"""How each type of response item is read (other types are left out)."""


FORMAT = Format(
    name=SOURCE,
    reads="OpenAI Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)",
    recognised_by="JSON lines of `{type, payload}` records of Codex's types (session_meta, "
    "response_item, event_msg, turn_context, compacted), or the 2025 layout: an `{id, "
    "timestamp}` header, then state markers and response items",
    detect_hook=is_codex,
    read_hook=read,
)
"""The reader as registered (entry point `codex` of the group `evo_magic.formats`)."""
