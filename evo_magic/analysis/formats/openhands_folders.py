"""OpenHands conversation folders (the software agent SDK, "V1"): a folder per conversation
holding `base_state.json` and `events/event-<index>-<event id>.json`, one JSON object per
event (`id`, `timestamp`, `source`, and `kind` its class). Read whole, a file at a time (see
`documents`), as part of the `openhands` format.

Files are recognised by content (`is_event`, `is_base_state`); a conversation is the files of
one folder (an event's folder is the one above its own), and its events are taken in the
order of the index in their names (the order the SDK replays them), else of their time.
Nothing outside the files the load was given is read.

- `SystemPromptEvent` / `SystemPromptUpdateEvent`: a `system` message (`system_prompt.text`).
- `MessageEvent` of the `user`: a `prompt` (`llm_message.content`); of the `agent`: a
  `response` (its `thinking_blocks` and `reasoning_content` as `thinking` blocks, then its
  text) and one call.
- `ActionEvent`: a `tool_use` block (`tool_call.name`, `tool_call_id`, `tool_call.arguments`);
  consecutive actions of one `llm_response_id` are one response and one call (parallel tool
  calls), its `thought` and thinking before the first.
- `ObservationEvent`: the `tool_result` of its call (`observation.content`, `is_error`);
  `UserRejectObservation` and `AgentErrorEvent` an error result (the reason, the error).
- `Condensation`: a compaction (`strategy` "condensation"): the events it forgets
  (`forgotten_event_ids`) leave the history, the next epoch opens with the events kept and its
  `summary` (a user message) at `summary_offset`.
- Every event: an `events` row of `kind` its class.

Per-call usage is not in the events: `base_state.json` keeps it, in `stats.usage_to_metrics`
(`service_to_metrics` in 2025) per LLM use, as `token_usages` each naming the `response_id` of
its call: a call's usage is the one of its `llm_response_id` (litellm's counts, see
`documents.litellm_usage`), a condensation's the summary's (`summary_*` columns). A call
without one (no `base_state.json`, or statistics that do not list it) is NA.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.formats.documents import (
    Conversation,
    arguments,
    document,
    litellm_usage,
    text_block,
    text_of,
    timestamp,
)

SOURCE = "openhands"
_EVENT = re.compile(
    rb'\s*\{\s*("kind"\s*:\s*"\w+"\s*,\s*)?"id"\s*:\s*"[^"]*"\s*,\s*"timestamp"\s*:\s*"[^"]*"'
    rb'\s*,\s*"source"\s*:\s*"(agent|user|environment|hook)"'
)
_BASE_STATE = re.compile(rb'\s*\{\s*"id"\s*:\s*"[^"]*"\s*,\s*"agent"\s*:\s*\{')
_INDEX = re.compile(r"-(\d+)-")
_RESULTS = frozenset({"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"})


def is_event(head: bytes) -> bool:
    """An event file of a conversation folder: a JSON object opening with the SDK's event
    fields in its order (`id`, `timestamp`, `source`; `kind` first in 2025)."""
    return bool(_EVENT.match(head))


def is_base_state(head: bytes) -> bool:
    """A conversation's `base_state.json`: a JSON object opening with `id` and the `agent`
    (its LLM settings)."""
    return bool(_BASE_STATE.match(head)) and b'"llm"' in head


def folder_of(path: Path, head: bytes) -> Path | None:
    """The conversation folder a file of one belongs to, or None."""
    if is_event(head):
        return path.parent.parent
    return path.parent if is_base_state(head) else None


@dataclass
class Said:
    """What an event added to the history (kept to rebuild it after a condensation)."""

    event_id: Any
    role: str
    kind: str
    blocks: list[dict[str, Any]]
    timestamp: Any
    seq: int
    source: Any = None  # the event's source (a folder's events say who acted)


class _Folder:
    """One conversation folder being read."""

    def __init__(self, state: dict[str, Any], source: Any, session: str) -> None:
        self.c = Conversation(SOURCE, source, session)
        self.usage = _usages(state)
        self.model = _model(state)
        self.history: list[Said] = []
        self.response: str | None = None  # the response the last actions belong to

    def say(self, said: Said) -> int:
        self.history.append(said)
        self.c.source = said.source
        return self.c.message(said.role, said.kind, said.blocks, said.timestamp, seq=said.seq)

    def event(self, n: int, event: dict[str, Any], source: Any) -> None:
        self.c.source = source
        kind, who = event.get("kind"), event.get("source")
        stamp = timestamp(event.get("timestamp"))
        self.c.event(str(kind), stamp, seq=n)
        said = Said(_text(event.get("id")), "", "", [], stamp, n, source)
        if kind in ("SystemPromptEvent", "SystemPromptUpdateEvent"):
            prompt = event.get("system_prompt")
            text = prompt.get("text") if isinstance(prompt, dict) else None
            self.say(_with(said, "system", "system", [text_block(text or "")]))
        elif kind == "MessageEvent" and who == "user":
            self.response = None
            self.say(_with(said, "user", "prompt", [text_block(_message_text(event))]))
        elif kind == "MessageEvent" and who == "agent":
            self.response = None
            blocks = [*_thinking(_dict(event.get("llm_message"))), text_block(_message_text(event))]
            index = self.say(_with(said, "assistant", "response", blocks))
            self.call(event, index, stamp, n)
        elif kind == "ActionEvent":
            self.action(event, said)
        elif kind in _RESULTS:
            self.response = None
            self.say(_with(said, "user", "tool_result", [_result(event, kind, n)]))
        elif kind == "Condensation":
            self.condensation(event, stamp, n)

    def action(self, event: dict[str, Any], said: Said) -> None:
        response = _text(event.get("llm_response_id"))
        first = response is None or response != self.response
        blocks = []
        if first:
            blocks += _thinking(event)
            thought = text_of(event.get("thought"))
            if thought:
                blocks.append(text_block(thought))
        call = _dict(event.get("tool_call"))
        call_id = event.get("tool_call_id") or call.get("id")
        blocks.append(
            {
                "block_type": "tool_use",
                "tool_name": call.get("name") or event.get("tool_name"),
                "tool_use_id": call_id if isinstance(call_id, str) else f"call-{said.seq}",
                "text": arguments(call.get("arguments", event.get("action"))),
            }
        )
        index = self.say(_with(said, "assistant", "response", blocks))
        if first:
            self.call(event, index, said.timestamp, said.seq)
        self.response = response

    def call(self, event: dict[str, Any], index: int, stamp: Any, n: int) -> None:
        model, usage = self.usage.get(_text(event.get("llm_response_id")), (self.model, None))
        self.c.call(model, usage, index, stamp, seq=n)

    def condensation(self, event: dict[str, Any], stamp: Any, n: int) -> None:
        self.response = None
        ids = event.get("forgotten_event_ids")
        forgotten = {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()
        summary = event.get("summary") if isinstance(event.get("summary"), str) else None
        kept = [s for s in self.history if s.event_id not in forgotten]
        _, usage = self.usage.get(_text(event.get("llm_response_id")), (None, None))
        spent = {
            f"summary_{k}": v for k, v in (usage or {}).items() if k != "reasoning_output_tokens"
        }
        self.c.compaction(
            stamp,
            None,
            strategy="condensation",
            trigger="condenser",
            summary=summary,
            before_messages=len(self.history),
            seq=n,
            **spent,
        )
        self.history = []
        # Its id as the SDK makes it: a later condensation may forget the summary.
        said = Said(f"{_text(event.get('id'))}-summary", "user", "compact_summary",
                    [text_block(summary)], stamp, n, self.c.source)  # fmt: skip
        offset = event.get("summary_offset")
        for kept_said in after_condensation(kept, said if summary else None, offset):
            self.say(kept_said)


def read_folders(
    sources: list[Any], skipped: dict[str, int]
) -> tuple[list[Conversation], int, list[str]]:
    """The conversations of conversation folders' files (`sources`), how many files were read,
    and the folders without events (a `base_state.json` alone). A file that is not whole JSON
    is skipped with a warning naming it and the line."""
    by_folder: dict[Path, list[Any]] = {}
    for source in sources:
        folder = folder_of(source.path, bytes(source.data[:4096])) or source.path.parent
        if not _inside(source.path, folder):
            warnings.warn(
                f"{source.path}: a link, or not inside its conversation folder {folder}; skipped",
                TranscriptWarning,
                stacklevel=5,
            )
            skipped["file outside its conversation folder"] = (
                skipped.get("file outside its conversation folder", 0) + 1
            )
            continue
        by_folder.setdefault(folder, []).append(source)
    conversations, records, empty = [], 0, []
    for folder, files in by_folder.items():
        reading = _folder(folder, files, skipped)
        records += len(files)
        if reading is None:
            empty.append(str(folder))
            skipped["conversation folder without events"] = (
                skipped.get("conversation folder without events", 0) + 1
            )
        else:
            conversations.append(reading.c)
    return conversations, records, empty


def _folder(folder: Path, files: list[Any], skipped: dict[str, int]) -> _Folder | None:
    state_source, state, events = None, {}, []
    for source in files:
        value = _decoded(source, skipped)
        if not isinstance(value, dict):
            continue
        if "source" in value and "kind" in value:
            events.append((_order(source.path, value), value, source))
        elif "agent" in value and state_source is None:
            state_source, state = source, value
    if not events:
        return None
    events.sort(key=lambda e: e[0])
    session = state.get("id") if isinstance(state.get("id"), str) else folder.name
    reading = _Folder(state, state_source or events[0][2], session)
    for n, (_, event, source) in enumerate(events):
        reading.event(n, event, source)
    return reading


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path` is a regular file of `folder` reached without following a link below it
    (a conversation's files are read as its data, and only those; where the folder itself is
    is the user's choice)."""
    try:
        below = path.relative_to(folder)
    except ValueError:
        return False
    step = folder
    for part in below.parts:
        step = step / part
        if step.is_symlink():
            return False
    return path.is_file()


def _decoded(source: Any, skipped: dict[str, int]) -> Any:
    try:
        value = document(source)
        if not isinstance(value, dict):
            raise TranscriptError(f"{source.path}: not a JSON object")
        return value
    except TranscriptError as error:
        warnings.warn(f"{error}; skipped", TranscriptWarning, stacklevel=6)
        skipped["unreadable file"] = skipped.get("unreadable file", 0) + 1
        return None


def _order(path: Path, event: dict[str, Any]) -> tuple[int, str, str]:
    """Where an event goes: the index in its file's name (`event-00012-<id>.json`; its digits
    grow past five), else after those, by time."""
    found = _INDEX.search(path.name)
    stamp = event.get("timestamp") if isinstance(event.get("timestamp"), str) else ""
    return (int(found.group(1)) if found else 1 << 62, stamp, path.name)


def _usages(state: Any) -> dict[str, tuple[str | None, dict[str, Any] | None]]:
    """Each call's model and usage by its response id, from `base_state.json`'s stats."""
    stats = _dict(_dict(state).get("stats"))
    metrics = _dict(stats.get("usage_to_metrics") or stats.get("service_to_metrics"))
    found: dict[str, tuple[str | None, dict[str, Any] | None]] = {}
    for kept in metrics.values():
        for usage in _dict(kept).get("token_usages") or []:
            usage = _dict(usage)
            response = usage.get("response_id")
            if not isinstance(response, str) or not response:
                continue
            counts = litellm_usage(
                {
                    "prompt_tokens": usage.get("prompt_tokens"),
                    "cache_read_input_tokens": usage.get("cache_read_tokens"),
                    "cache_creation_input_tokens": usage.get("cache_write_tokens"),
                    "completion_tokens": usage.get("completion_tokens"),
                    "completion_tokens_details": {
                        "reasoning_tokens": usage.get("reasoning_tokens")
                    },
                }
            )
            model = usage.get("model") if isinstance(usage.get("model"), str) else None
            found[response] = (model, counts)
    return found


def _model(state: Any) -> str | None:
    model = _dict(_dict(_dict(state).get("agent")).get("llm")).get("model")
    return model if isinstance(model, str) else None


def _message_text(event: dict[str, Any]) -> str:
    return text_of(_dict(event.get("llm_message")).get("content")) or ""


def _thinking(holder: dict[str, Any]) -> list[dict[str, Any]]:
    """`thinking` blocks of a response: its thinking blocks, else its reasoning text."""
    blocks = []
    for block in holder.get("thinking_blocks") or []:
        thinking = _dict(block).get("thinking")
        if isinstance(thinking, str) and thinking:
            blocks.append({"block_type": "thinking", "text": thinking})
    reasoning = holder.get("reasoning_content")
    if not blocks and isinstance(reasoning, str) and reasoning:
        blocks.append({"block_type": "thinking", "text": reasoning})
    return blocks


def _result(event: dict[str, Any], kind: str, n: int) -> dict[str, Any]:
    observation = _dict(event.get("observation"))
    if kind == "ObservationEvent":
        text, failed = text_of(observation.get("content")), observation.get("is_error") is True
    elif kind == "UserRejectObservation":
        text, failed = event.get("rejection_reason"), True
    else:
        text, failed = event.get("error"), True
    call_id = event.get("tool_call_id")
    return {
        "block_type": "tool_result",
        "tool_use_id": call_id if isinstance(call_id, str) else f"result-{n}",
        "tool_name": event.get("tool_name"),
        "text": text if isinstance(text, str) else "",
        "is_error": failed,
    }


def after_condensation(kept: list[Said], summary: Said | None, offset: Any) -> list[Said]:
    """The history a condensation leaves, as OpenHands rebuilds it: the kept events with the
    summary (when there is one) at the condenser's `summary_offset` (at the end when the offset
    is not a position in them), a kept prompt read as `compact_history`."""
    at = offset if isinstance(offset, int) and 0 <= offset <= len(kept) else len(kept)
    rest = [replace(s, kind="compact_history") if s.kind == "prompt" else s for s in kept]
    return [*rest[:at], *([summary] if summary is not None else []), *rest[at:]]


def _with(said: Said, role: str, kind: str, blocks: list[dict[str, Any]]) -> Said:
    return Said(said.event_id, role, kind, blocks, said.timestamp, said.seq, said.source)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
