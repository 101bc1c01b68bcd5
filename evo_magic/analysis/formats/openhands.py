"""OpenHands event lists (a trajectory saved as one JSON array of events, as its UI exports
and its replay tests keep them). Read whole (see `documents`).

Each event has `id`, `timestamp`, `source` (user, agent, environment) and either `action` or
`observation`:

- A `message` action of the user is a user message (the first the `prompt`); of the agent,
  an assistant message.
- An agent action with `tool_call_metadata` is a `tool_use` block (`tool_call_id`,
  `function_name`, its arguments as the model response spelled them, else the action's
  `args`); the model response's text (or the action's `thought`) is a text block before the
  first of its calls. Each distinct `model_response.id` is one call, with its usage
  (litellm's counts: `prompt_tokens` includes the cached tokens, read from
  `cache_read_input_tokens` or `prompt_tokens_details.cached_tokens`, and the cache writes,
  `cache_creation_input_tokens`; `input_tokens` is the rest); an agent message without one is
  a call without usage (NA).
- An observation with `tool_call_metadata` is the `tool_result` of its call (`content`; an
  `error` observation, or `success` false, makes it an error).
- A `condensation` action is a compaction: the events it forgets (`forgotten_event_ids`, or
  the range `forgotten_events_start_id`..`end_id`) leave the history; the next epoch opens
  with the events kept, the `summary` (as a user message) at `summary_offset`.
- Other events (state changes, `null` observations, ...) are rows of `events` only.
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
    arguments,
    document,
    litellm_usage,
    part,
    text_block,
    text_of,
    timestamp,
)
from evo_magic.analysis.formats.openhands_folders import (
    Said,
    after_condensation,
    folder_of,
    read_folders,
)
from evo_magic.analysis.formats.registry import Format, Sniff

SOURCE = "openhands"
_START = re.compile(rb'\s*\[\s*\{\s*"(id|timestamp|source|action|observation|message)"\s*:')


def is_openhands(sniff: Sniff) -> bool:
    """An OpenHands event list: a JSON array of objects with a `source` and an `action` or an
    `observation`; or a file of a conversation folder (`openhands_folders`)."""
    head = sniff.head
    if folder_of(sniff.path, head) is not None:
        return True
    if not _START.match(head):
        return False
    return b'"source"' in head and (b'"action"' in head or b'"observation"' in head)


class _Events:
    """One event list being read."""

    def __init__(self, source: Any) -> None:
        folder = source.path.parent.name
        stem = source.path.name.removesuffix(".json")
        self.c = Conversation(SOURCE, source, f"{folder}/{stem}" if folder else stem)
        self.history: list[Said] = []
        self.responses: dict[str, int] = {}  # model response id -> its message index
        self.prompted = False

    def say(self, said: Said) -> int:
        self.history.append(said)
        return self.c.message(said.role, said.kind, said.blocks, said.timestamp, seq=said.seq)

    def event(self, n: int, event: dict[str, Any]) -> None:
        stamp = timestamp(event.get("timestamp"))
        action, observation = event.get("action"), event.get("observation")
        self.c.event(str(action or observation), stamp, seq=n)
        meta = event.get("tool_call_metadata")
        meta = meta if isinstance(meta, dict) else None
        source = event.get("source")
        if action == "condensation":
            self.condensation(event, stamp, n)
        elif action == "message" and source == "user":
            kind = "meta" if self.prompted else "prompt"
            self.prompted = True
            self.say(Said(event.get("id"), "user", kind, [text_block(_content(event))], stamp, n))
        elif action == "message" and source == "agent" and meta is None:
            index = self.say(
                Said(
                    event.get("id"),
                    "assistant",
                    "response",
                    [text_block(_content(event))],
                    stamp,
                    n,
                )
            )
            self.c.call(None, None, index, stamp, seq=n)
        elif action is not None and meta is not None:
            self.tool_call(event, meta, stamp, n)
        elif observation is not None and meta is not None:
            call_id = meta.get("tool_call_id")
            failed = observation == "error" or event.get("success") is False
            block = {
                "block_type": "tool_result",
                "tool_use_id": call_id if isinstance(call_id, str) else f"result-{n}",
                "tool_name": meta.get("function_name"),
                "text": text_of(event.get("content")) or "",
                "is_error": failed,
            }
            self.say(Said(event.get("id"), "user", "tool_result", [block], stamp, n))

    def tool_call(self, event: dict[str, Any], meta: dict[str, Any], stamp: Any, n: int) -> None:
        response = (
            meta.get("model_response") if isinstance(meta.get("model_response"), dict) else {}
        )
        reply = _reply(response)
        call_id = meta.get("tool_call_id")
        call_id = call_id if isinstance(call_id, str) else f"call-{n}"
        blocks = []
        response_id = response.get("id") if isinstance(response.get("id"), str) else f"event-{n}"
        first = response_id not in self.responses
        if first:
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            said = text_of(reply.get("content")) or args.get("thought")
            if isinstance(said, str) and said:
                blocks.append(text_block(said))
        blocks.append(
            {
                "block_type": "tool_use",
                "tool_name": meta.get("function_name"),
                "tool_use_id": call_id,
                "text": _arguments(reply, call_id, event),
            }
        )
        index = self.say(Said(event.get("id"), "assistant", "response", blocks, stamp, n))
        if first:
            self.responses[response_id] = index
            model = response.get("model") if isinstance(response.get("model"), str) else None
            self.c.call(model, litellm_usage(response.get("usage")), index, stamp, seq=n)

    def condensation(self, event: dict[str, Any], stamp: Any, n: int) -> None:
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        forgotten = _forgotten(args)
        summary = args.get("summary") if isinstance(args.get("summary"), str) else None
        before = len(self.history)
        kept = [s for s in self.history if _id(s.event_id) not in forgotten]
        self.c.compaction(
            stamp,
            None,
            strategy="condensation",
            trigger="condenser",
            summary=summary,
            before_messages=before,
            seq=n,
        )
        self.history = []
        said = Said(None, "user", "compact_summary", [text_block(summary)], stamp, n)
        for kept_said in after_condensation(
            kept, said if summary else None, args.get("summary_offset")
        ):
            self.say(kept_said)


def conversation_folder(sniff: Sniff) -> str | None:
    """The conversation folder a file of one belongs to (its files are read together)."""
    folder = folder_of(sniff.path, sniff.head)
    return str(folder) if folder is not None else None


def read(engine: Any, sources: list[Any]) -> Part:
    """The frames' rows of OpenHands event lists and conversation folders."""
    conversations, records, skipped, empty = [], 0, {}, []
    folders = [s for s in sources if folder_of(s.path, bytes(s.data[:4096])) is not None]
    if folders:
        conversations, records, empty = read_folders(folders, skipped)
    for source in sources:
        if any(source is f for f in folders):
            continue
        try:
            events = document(source)
            if not isinstance(events, list):
                raise TranscriptError(f"{source.path}: not a list of events")
            reading = _Events(source)
            for n, event in enumerate(events):
                if not isinstance(event, dict):
                    raise TranscriptError(f"{source.path}: event [{n}] is not a JSON object")
                reading.event(n, event)
        except TranscriptError as error:
            warnings.warn(f"{error}; skipped", TranscriptWarning, stacklevel=5)
            skipped["unreadable file"] = skipped.get("unreadable file", 0) + 1
            continue
        conversations.append(reading.c)
        records += len(events)
    return part(conversations, records, skipped=skipped, without_messages=empty)


def _reply(response: dict[str, Any]) -> dict[str, Any]:
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    message = first.get("message") if isinstance(first, dict) else None
    return message if isinstance(message, dict) else {}


def _arguments(reply: dict[str, Any], call_id: str, event: dict[str, Any]) -> str:
    """The call's arguments as the model spelled them, else the action's `args` (without the
    fields OpenHands adds)."""
    for call in reply.get("tool_calls") or []:
        if isinstance(call, dict) and call.get("id") == call_id:
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            return arguments(function.get("arguments"))
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    return arguments({k: v for k, v in args.items() if k not in ("thought", "impl_source")})


def _forgotten(args: dict[str, Any]) -> set[int]:
    ids = args.get("forgotten_event_ids")
    if isinstance(ids, list):
        return {i for i in (_id(x) for x in ids) if i is not None}
    start, end = (
        _id(args.get("forgotten_events_start_id")),
        _id(args.get("forgotten_events_end_id")),
    )
    if start is None or end is None or end < start:
        return set()
    return set(range(start, end + 1))


def _id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _content(event: dict[str, Any]) -> str:
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    content = args.get("content")
    if isinstance(content, str) and content:
        return content
    message = event.get("message")
    return message if isinstance(message, str) else json.dumps(content)


FORMAT = Format(
    name=SOURCE,
    reads="OpenHands event lists (a trajectory as one JSON array of actions and observations, "
    "with each model response and its usage, and condensations) and conversation folders of "
    "the agent SDK (base_state.json with each call's usage, events/event-*.json)",
    recognised_by="a JSON array of objects with `source` and `action` or `observation`; a JSON "
    "object opening with `id`, `timestamp`, `source` (an event), or with `id` and `agent` (a "
    "base state)",
    detect_hook=is_openhands,
    read_hook=read,
    suffixes=(".json",),
    group_hook=conversation_folder,
)
"""The reader as registered (entry point `openhands` of the group `evo_magic.formats`)."""
