"""Inspect AI evaluation logs: `.eval` (a zip: `header.json`, `samples/<id>_epoch_<n>.json`)
and `.json` (one document, its samples in `samples`). Read as data: a zip's members are read
by name into memory, each within `MAX_MEMBER_BYTES`, and no name inside it is ever used as a
path to write or read on disk.

Each sample's epoch is a session of its own, named `<log file>/<sample id>/epoch-<n>`:

- Its `messages` are the conversation: `system` (kind "system"), `user` (the first the
  `prompt`, later ones `meta`), `assistant` (text, then each tool call as a `tool_use`),
  `tool` (a `tool_result` of a user message; an `error` makes it an error). Content an
  Inspect log moved to `attachments` (`attachment://<hash>`) is put back.
- Each `ModelEvent` is a call (in its `events`, or `transcript.events` in older logs): its
  model, the usage of its output (`input_tokens`, `output_tokens`, `input_tokens_cache_read`
  and `_cache_write`, `reasoning_tokens`, as Inspect reports them: input excludes the cached
  tokens), its time; its response is the message after the `input` it was sent (`input`, or
  `input_refs` ranges into the sample's `message_pool`) when that message is the model's.
- A `CompactionEvent` is a row of `compactions`: `strategy` its `type` (summary, edit,
  trim), `trigger` its `source`, `before_tokens` and `after_tokens`. The messages stay in one
  epoch (the sample's messages are the whole history).
- Every event is a row of `events` (`kind` the event's type).
"""

from __future__ import annotations

import io
import re
import warnings
import zipfile
from collections.abc import Iterator
from typing import Any

from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.formats import Part
from evo_magic.analysis.formats.documents import (
    Conversation,
    arguments,
    document,
    part,
    text_block,
    text_of,
    timestamp,
)
from evo_magic.analysis.formats.registry import Format, Sniff

SOURCE = "inspect"
MAX_MEMBER_BYTES = 256 << 20
"""The largest zip member read (uncompressed); a larger one is refused, by name."""
MAX_MEMBERS = 100_000
"""The most members an `.eval` zip may list."""
_JSON_LOG = re.compile(rb'\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')
_ATTACHMENT = "attachment://"


def is_inspect(sniff: Sniff) -> bool:
    """An Inspect log: a zip whose members are an Inspect log's (`_journal/start.json`,
    `header.json`), or a JSON object opening with `version` and `status` and holding `eval`."""
    head = sniff.head
    if head.startswith(b"PK\x03\x04"):
        return b"_journal/start.json" in head[:256] or b"header.json" in head + sniff.tail
    return bool(_JSON_LOG.match(head)) and b'"eval"' in head


def read(engine: Any, sources: list[Any]) -> Part:
    """The frames' rows of Inspect logs (see the module's docstring)."""
    conversations: list[Conversation] = []
    records, skipped = 0, {}
    for source in sources:
        try:
            found = list(_log(source))
        except TranscriptError as error:
            warnings.warn(f"{error}; skipped", TranscriptWarning, stacklevel=6)
            skipped["unreadable file"] = skipped.get("unreadable file", 0) + 1
            continue
        for conversation, count in found:
            conversations.append(conversation)
            records += count
    return part(conversations, records, skipped=skipped)


def _log(source: Any) -> Iterator[tuple[Conversation, int]]:
    """Each sample's conversation in a log, and how many records it held."""
    if source.data.startswith(b"PK\x03\x04"):
        samples = _zip_samples(source)
    else:
        log = document(source)
        if not isinstance(log, dict):
            raise TranscriptError(f"{source.path}: the log is not a JSON object")
        found = log.get("samples") or []
        if not isinstance(found, list):
            raise TranscriptError(f"{source.path}: `samples` is not a list")
        samples = iter([(f"samples[{n}]", s) for n, s in enumerate(found)])
    for where, sample in samples:
        if not isinstance(sample, dict):
            raise TranscriptError(f"{source.path} {where}: a sample is not a JSON object")
        yield _sample(source, sample)


def _zip_samples(source: Any) -> Iterator[tuple[str, Any]]:
    """Each sample member's JSON, one at a time (a log of many samples is never all decoded
    at once)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(source.data))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise TranscriptError(f"{source.path}: not a readable zip ({error})") from None
    if len(members) > MAX_MEMBERS:
        raise TranscriptError(f"{source.path}: {len(members):,} members, over {MAX_MEMBERS:,}")
    for member in members:
        name = member.filename
        if name.startswith("samples/") and name.endswith(".json"):
            yield f"member {name}", document(source, _member(source, archive, member), name)


def _member(source: Any, archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> bytes:
    """A member's bytes, never more than `MAX_MEMBER_BYTES` (whatever its header says)."""
    name = member.filename
    if member.file_size > MAX_MEMBER_BYTES:
        raise TranscriptError(f"{source.path} member {name}: over {MAX_MEMBER_BYTES:,} bytes")
    try:
        with archive.open(member) as handle:
            data = handle.read(MAX_MEMBER_BYTES + 1)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as error:
        raise TranscriptError(f"{source.path} member {name}: unreadable ({error})") from None
    if len(data) > MAX_MEMBER_BYTES:
        raise TranscriptError(f"{source.path} member {name}: over {MAX_MEMBER_BYTES:,} bytes")
    return data


def _sample(source: Any, sample: dict[str, Any]) -> tuple[Conversation, int]:
    name = source.path.name.removesuffix(".eval").removesuffix(".json")
    session = f"{name}/{sample.get('id')}/epoch-{sample.get('epoch', 1)}"
    c = Conversation(SOURCE, source, session)
    attachments = sample.get("attachments") if isinstance(sample.get("attachments"), dict) else {}
    messages = sample.get("messages") if isinstance(sample.get("messages"), list) else []
    placed: dict[int, int] = {}  # position in `messages` -> message index of its response
    prompted = False
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        content = _resolve(message.get("content"), attachments)
        if role == "assistant":
            blocks = [text_block(content)] if content or not message.get("tool_calls") else []
            for i, call in enumerate(message.get("tool_calls") or []):
                if isinstance(call, dict):
                    blocks.append(_use(call, f"call-{n}-{i}", attachments))
            placed[n] = c.message("assistant", "response", blocks, seq=n)
        elif role == "tool":
            c.message("user", "tool_result", [_result(message, content, n)], seq=n)
        elif role == "system":
            c.message("system", "system", [text_block(content)], seq=n)
        else:
            c.message("user", "meta" if prompted else "prompt", [text_block(content)], seq=n)
            prompted = True
    events = _events_of(sample)
    for n, event in enumerate(events):
        if isinstance(event, dict):
            _event(c, event, n, messages, placed)
    return c, len(messages) + len(events)


def _result(message: dict[str, Any], content: Any, n: int) -> dict[str, Any]:
    """A tool message's `tool_result` block (its id made from its place when it has none)."""
    call_id = message.get("tool_call_id")
    return {
        "block_type": "tool_result",
        "tool_use_id": call_id if isinstance(call_id, str) else f"result-{n}",
        "tool_name": message.get("function"),
        "text": content,
        "is_error": message.get("error") is not None,
    }


def _events_of(sample: dict[str, Any]) -> list[Any]:
    """The sample's events: its own list, or its transcript's (older logs); [] when neither."""
    events = sample.get("events")
    if not isinstance(events, list):
        transcript = sample.get("transcript")
        events = transcript.get("events") if isinstance(transcript, dict) else None
    return events if isinstance(events, list) else []


def _event(
    c: Conversation, event: dict[str, Any], n: int, messages: list[Any], placed: dict[int, int]
) -> None:
    kind = event.get("event")
    stamp = timestamp(event.get("timestamp"))
    c.event(str(kind), stamp, seq=n)
    if kind == "model":
        output = event.get("output") if isinstance(event.get("output"), dict) else {}
        usage = output.get("usage") if isinstance(output.get("usage"), dict) else None
        counts = None
        if usage is not None:
            counts = {
                "input_tokens": usage.get("input_tokens"),
                "output_tokens": usage.get("output_tokens"),
                "cache_read_input_tokens": usage.get("input_tokens_cache_read"),
                "cache_creation_input_tokens": usage.get("input_tokens_cache_write"),
                "reasoning_output_tokens": usage.get("reasoning_tokens"),
            }
        at = _sent(event)
        response = placed.get(at) if at is not None else None
        if response is not None and not _same_reply(output, messages[at]):
            response = None
        model = event.get("model") if isinstance(event.get("model"), str) else None
        duration = event.get("working_time")
        c.call(
            model,
            counts,
            response,
            stamp,
            seq=n,
            stop_reason=_stop_reason(output),
            duration=duration if isinstance(duration, int | float) else None,
        )
    elif kind == "compaction":
        c.compactions.append(
            {
                **c.identity(stamp, None, n),
                "strategy": event.get("type") or "summary",
                "trigger": event.get("source"),
                "success": True,
                "before_tokens": event.get("tokens_before"),
                "after_tokens": event.get("tokens_after"),
            }
        )


def _sent(event: dict[str, Any]) -> int | None:
    """How many messages a model event sent: its `input`, or the spans of its `input_refs`."""
    refs = event.get("input_refs")
    if isinstance(refs, list) and refs:
        total = 0
        for span in refs:
            if not (
                isinstance(span, list) and len(span) == 2 and all(type(x) is int for x in span)
            ):
                return None
            total += max(0, span[1] - span[0])
        return total
    sent = event.get("input")
    return len(sent) if isinstance(sent, list) else None


def _same_reply(output: dict[str, Any], message: Any) -> bool:
    """Whether the event's output is `message` (by id, when both have one)."""
    choices = output.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    reply = first.get("message") if isinstance(first, dict) else None
    ours = reply.get("id") if isinstance(reply, dict) else None
    theirs = message.get("id") if isinstance(message, dict) else None
    return ours is None or theirs is None or ours == theirs


def _stop_reason(output: dict[str, Any]) -> str | None:
    choices = output.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    reason = first.get("stop_reason") if isinstance(first, dict) else None
    return reason if isinstance(reason, str) else None


def _resolve(content: Any, attachments: dict[str, Any]) -> str:
    """Text of a message's content, with attachments put back."""
    if isinstance(content, list):
        content = [
            {**p, "text": _attached(p.get("text"), attachments)} if isinstance(p, dict) else p
            for p in content
        ]
    elif isinstance(content, str):
        content = _attached(content, attachments)
    return text_of(content) or ""


def _attached(text: Any, attachments: dict[str, Any]) -> Any:
    if isinstance(text, str) and text.startswith(_ATTACHMENT):
        found = attachments.get(text[len(_ATTACHMENT) :])
        return found if isinstance(found, str) else text
    return text


def _use(call: dict[str, Any], fallback: str, attachments: dict[str, Any]) -> dict[str, Any]:
    call_id = call.get("id")
    name = call.get("function")
    return {
        "block_type": "tool_use",
        "tool_name": name if isinstance(name, str) else None,
        "tool_use_id": call_id if isinstance(call_id, str) and call_id else fallback,
        "text": _attached(arguments(call.get("arguments")), attachments),
    }


FORMAT = Format(
    name=SOURCE,
    reads="Inspect AI evaluation logs (.eval zips and .json): each sample's epoch a session, "
    "ModelEvents as calls with usage, CompactionEvents",
    recognised_by="a zip whose first member is `_journal/start.json` (or that holds "
    "`header.json`), or a JSON object opening with `version` and `status` that has `eval`",
    detect_hook=is_inspect,
    read_hook=read,
    suffixes=(".eval", ".json"),
)
"""The reader as registered (entry point `inspect` of the group `evo_magic.formats`)."""
