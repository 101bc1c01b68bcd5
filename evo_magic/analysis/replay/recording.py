"""What a recorded conversation gives replay: its items in order, the recorded calls, the
compactions it asked for, its summaries and, for an evo_magic session, its settings timeline.

Everything here is read as data: a path a record names is read only inside the session's own
folder, and strategies stay descriptions (see `timeline`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.conversation import Call, Compaction, Message, conversation_of
from evo_magic.analysis.conversation_rows import ConversationRows, Key
from evo_magic.analysis.datafiles import NotInside, open_regular
from evo_magic.analysis.replay.timeline import Change, read_records, read_timeline, session_file
from evo_magic.compact.undo import UNDO
from evo_magic.encoded import EncodedBlocks
from evo_magic.measure import to_json
from evo_magic.usage import Usage

if TYPE_CHECKING:
    from evo_magic.analysis.transcripts import Transcripts

Item = Message | Call | Compaction


@dataclass
class Recording:
    """One recorded conversation (a session, or one of its subagents) as replay reads it."""

    session_id: str
    agent_id: str | None
    source: str
    items: list[Item]
    calls: dict[int, dict[str, Any]]
    """Per recorded call number: `timestamp` (seconds), `tokens` (input + cache), `model`,
    `output_tokens`, `chars` (what it sent, when recorded), `usage` (what the server reported,
    a Usage, or None), and when the server compacted during the call `server_compaction` (the
    key of `server_usage`) and `prompt_tokens` (the whole prompt, its compaction iteration's
    input: `tokens` is then the message iteration's)."""
    opening: dict[tuple[int, int], int]
    """(segment, epoch) -> how many of its first messages are the replacement history."""
    summaries: dict[str, str] = field(default_factory=dict)
    """Recorded summaries by the hash of what they summarised."""
    requests: dict[tuple[int, int], str | None] = field(default_factory=dict)
    """Compactions the user asked for (`%compact`, `/compact`): (segment, epoch they ended) ->
    the focus. Replay asks every strategy setting for them at the same place."""
    timeline: list[Change] = field(default_factory=list)
    """The settings an evo_magic session ran with, each where it was recorded."""
    lines: list[int | None] = field(default_factory=list)
    """Per item, the line of the session file where it was recorded (None: not known)."""
    server_usage: dict[tuple[int, int], Usage] = field(default_factory=dict)
    """Compactions the API made (trigger "server"): (segment, epoch they ended) -> the tokens
    of their compaction iteration, as the server reported them."""


def recordings(t: Transcripts) -> list[Recording]:
    """Every conversation of `t` (subagents as their own), ready for replay, session by
    session. Each frame is turned into rows once for every conversation (`ConversationRows`):
    masking every frame per conversation made this quadratic in the number of sessions, and
    converting a small frame per conversation cost most of a replay."""
    rows = ConversationRows.of(t)
    keys: dict[str, list[Key]] = {}
    for key in rows.conversations():
        keys.setdefault(key[0], []).append(key)
    sessions = t.session_ids()
    out = []
    for session_id in sessions:
        session = _Session(t, session_id, alone=len(sessions) == 1)
        for key in keys.get(session_id, []):
            items = list(conversation_of(rows, key))
            if any(isinstance(item, Call) for item in items):
                out.append(_recording(session, rows, key, items))
    return out


class _Session:
    """What a recording reads of its session besides its rows: the files it was loaded from
    (the only ones replay opens) and its events, cut out of `t` only when asked (most
    conversations need neither)."""

    def __init__(self, t: Transcripts, session_id: str, alone: bool):
        self._t = t
        self._session_id = session_id
        self._alone = alone

    @functools.cached_property
    def transcripts(self) -> Transcripts:
        return self._t if self._alone else self._t.session(self._session_id)

    @functools.cached_property
    def files(self) -> frozenset[str]:
        return frozenset(str(file) for file in self.transcripts.files)


def _count(value: Any) -> int:
    import pandas as pd

    return 0 if value is None or pd.isna(value) else int(value)


def _recording(session: _Session, rows: ConversationRows, key: Key, items: list[Item]) -> Recording:
    session_id, agent_id = key
    calls, call_lines = _recorded_calls(rows.calls.get(key, []))
    compactions = rows.compactions.get(key, [])
    blocks = rows.blocks.get(key, [])
    source = str(blocks[0].source) if blocks else "unknown"
    recording = Recording(session_id, agent_id, source, items, calls, _opening(compactions))
    recording.requests = _requests(compactions)
    recording.summaries = _recorded_summaries(recording, compactions, session)
    if source == "evo_magic":
        files = session.files
        recording.timeline = read_timeline(session.transcripts.events, session_id, files)
        recording.lines = _item_lines(items, blocks, call_lines, compactions)
        recording.items = _with_compaction_blocks(items, blocks, files)
        _server_compactions(recording, compactions, call_lines)
    return recording


def _recorded_calls(rows: list[Any]) -> tuple[dict[int, dict[str, Any]], dict[int, int]]:
    """The calls of the conversation (see `Recording.calls`) by number, and each one's line."""
    import pandas as pd

    calls = {}
    lines: dict[int, int] = {}
    for row in rows:
        if pd.isna(row.call) or bool(row.abandoned):
            continue
        calls[int(row.call)] = _recorded_call(row)
        if not pd.isna(row.line):
            lines[int(row.call)] = int(row.line)
    return calls, lines


def _recorded_call(row: Any) -> dict[str, Any]:
    import pandas as pd

    usage = Usage(
        input_tokens=_count(row.input_tokens),
        cache_read_input_tokens=_count(row.cache_read_input_tokens),
        cache_creation_input_tokens=_count(row.cache_creation_input_tokens),
    )
    chars = row.context_sent_chars
    call = {
        "timestamp": row.timestamp.timestamp() if not pd.isna(row.timestamp) else None,
        "tokens": usage.context_tokens or None,
        "usage": usage if usage.context_tokens else None,
        "model": None if pd.isna(row.model) else str(row.model),
        "output_tokens": _count(row.output_tokens),
        "chars": None if pd.isna(chars) else int(chars),
    }
    sent = row.context_sent_tokens
    if bool(row.context_sent_tokens_exact) and not pd.isna(sent) and sent > usage.context_tokens:
        # The server cleared part of the prompt: its usage counts the rest, the session
        # anchored the prompt as sent (usage and what was cleared).
        call["prompt_tokens"] = int(sent)
    return call


def _opening(compactions: list[Any]) -> dict[tuple[int, int], int]:
    """(segment, epoch) -> how many of its first messages are the replacement history."""
    import pandas as pd

    opening = {}
    for row in compactions:
        if bool(row.success) and not pd.isna(row.after_messages):
            opening[(int(row.segment), int(row.epoch) + 1)] = int(row.after_messages)
    return opening


def _requests(compactions: list[Any]) -> dict[tuple[int, int], str | None]:
    """The compactions the user asked for (see `Recording.requests`)."""
    import pandas as pd

    requests = {}
    for row in compactions:
        if str(row.strategy) == UNDO:  # an undo is not a compaction asked of the strategies
            continue
        if bool(row.success) and str(row.trigger) in ("user", "manual"):
            requests[(int(row.segment), int(row.epoch))] = (
                None if pd.isna(row.focus) else str(row.focus)
            )
    return requests


def _server_compactions(
    recording: Recording, compactions: list[Any], call_lines: dict[int, int]
) -> None:
    """The API's compactions: their iteration's usage, and the whole prompt of the call they
    happened in (the call recorded just before the compaction record)."""
    import pandas as pd

    for row in compactions:
        if str(row.trigger) != "server" or not bool(row.success) or pd.isna(row.line):
            continue
        usage = Usage(
            input_tokens=_count(row.summary_input_tokens),
            output_tokens=_count(row.summary_output_tokens),
            cache_creation_input_tokens=_count(row.summary_cache_creation_input_tokens),
            cache_read_input_tokens=_count(row.summary_cache_read_input_tokens),
        )
        recording.server_usage[(int(row.segment), int(row.epoch))] = usage
        before = [c for c, line in call_lines.items() if line < int(row.line)]
        if before:
            call = recording.calls[max(before, key=call_lines.__getitem__)]
            call["server_compaction"] = (int(row.segment), int(row.epoch))
            if usage.context_tokens:
                call["prompt_tokens"] = usage.context_tokens


COMPACTION_KEYS = {"type", "content", "encrypted_content", "signature", "tool_changes"}
MAX_BLOCK_CHARS = 10_000_000


def _with_compaction_blocks(
    items: list[Item], blocks: list[Any], files: frozenset[str]
) -> list[Item]:
    """The items with each compaction block the API returned as the session recorded it (the
    frames keep only its kind): read from its record's line, kept only when it has the API's
    shape (its fields, strings, a list of tool changes), else left as the placeholder."""
    import pandas as pd

    found = [
        row for row in blocks if isinstance(row.block_type, str) and row.block_type == "compaction"
    ]
    if not found:
        return items
    wanted: dict[str, set[int]] = {}
    for row in found:
        if not pd.isna(row.line):
            wanted.setdefault(str(row.file), set()).add(int(row.line))
    records = {
        (file, line): record
        for file, lines in wanted.items()
        for line, record in read_records(session_file(file, files), lines)
    }
    raw: dict[tuple[int, int, int], dict[int, dict[str, Any]]] = {}
    for row in found:
        record = records.get((str(row.file), int(row.line))) if not pd.isna(row.line) else None
        block = _compaction_block(record, int(row.block_index))
        if block is not None:
            key = (int(row.segment), int(row.epoch), int(row.message_index))
            raw.setdefault(key, {})[int(row.block_index)] = block
    out: list[Item] = []
    for item in items:
        restored = (
            raw.get((item.segment, item.epoch, item.index)) if isinstance(item, Message) else None
        )
        if restored:
            content = list(item.content)
            for index, block in restored.items():
                if index < len(content) and content[index].get("type") == "text":
                    content[index] = block
            item = replace(item, content=content)
        out.append(item)
    return out


def _compaction_block(record: Any, index: int) -> dict[str, Any] | None:
    message = record.get("message") if isinstance(record, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list) or not 0 <= index < len(content):
        return None
    block = content[index]
    if not isinstance(block, dict) or block.get("type") != "compaction":
        return None
    if set(block) - COMPACTION_KEYS:
        return None
    strings = ("content", "encrypted_content", "signature")
    if not all(block.get(k) is None or isinstance(block[k], str) for k in strings):
        return None
    if not isinstance(block.get("tool_changes", []), list | type(None)):
        return None
    if len(to_json(block)) > MAX_BLOCK_CHARS:
        return None
    return block


def _item_lines(
    items: list[Item], blocks: list[Any], calls: dict[int, int], compactions: list[Any]
) -> list[int | None]:
    """Where each item was recorded: a message at its first record, a call at its response,
    a compaction at its record."""
    import pandas as pd

    first: dict[tuple[int, int, int], int] = {}
    for row in blocks:
        if pd.isna(row.message_index) or pd.isna(row.line):
            continue
        key = (int(row.segment), int(row.epoch), int(row.message_index))
        first[key] = min(first.get(key, int(row.line)), int(row.line))
    done = {
        (int(r.segment), int(r.epoch) + 1): int(r.line)
        for r in compactions
        if bool(r.success) and not pd.isna(r.line)
    }
    lines: list[int | None] = []
    for item in items:
        if isinstance(item, Message):
            lines.append(first.get((item.segment, item.epoch, item.index)))
        elif isinstance(item, Call):
            lines.append(calls.get(item.call) if item.call is not None else None)
        else:
            lines.append(done.get((item.segment, item.epoch)))
    return lines


def _recorded_summaries(
    recording: Recording, compactions: list[Any], session: _Session
) -> dict[str, str]:
    """The recorded summaries, keyed by the hash of the history each one replaced (what a
    whole-history summariser was given): the snapshot when there is one in the session's
    folder, else the rebuilt epoch."""
    import pandas as pd

    found = {}
    for row in compactions:
        if not bool(row.success) or pd.isna(row.summary) or not row.summary:
            continue
        messages = None
        snapshot = None
        if not pd.isna(row.snapshot_path):
            snapshot = own_file(session_file(str(row.file), session.files), row.snapshot_path)
        if snapshot is not None:
            messages = _snapshot_messages(snapshot)
        if not messages:
            messages = _epoch_messages(recording, int(row.segment), int(row.epoch))
        if messages:
            # A strategy may summarise the older part only (SummariseOlder): every leading
            # part of what was replaced is a candidate; the whole history comes first.
            keys = prefix_digests(messages)
            found[keys[-1]] = str(row.summary)
            for key in keys[:-1]:
                found.setdefault(key, str(row.summary))
    return found


def own_file(session_file: Any, named: Any) -> Path | None:
    """The file a record of `session_file` names, if it is inside that session's folder (links
    resolved); None otherwise. A recorded absolute path from another machine is looked for at
    the same place under the folder (`snapshots/<name>`)."""
    if not isinstance(named, str) or not named or "\x00" in named:
        return None
    folder = Path(str(session_file)).parent.resolve()
    path = Path(named)
    candidates = [path if path.is_absolute() else folder / path]
    if len(path.parts) >= 2:
        candidates.append(folder / path.parts[-2] / path.parts[-1])
    for candidate in candidates:
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError):
            continue
        if resolved.is_relative_to(folder) and resolved.is_file():
            return resolved
    return None


def _snapshot_messages(path: Path) -> list[dict[str, Any]] | None:
    try:
        with open_regular(path) as handle:  # a link or a FIFO swapped in is refused
            lines = handle.read().decode("utf-8").splitlines()
        messages = [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError, RecursionError, NotInside):
        return None
    return messages if all(isinstance(m, dict) for m in messages) else None


def _epoch_messages(recording: Recording, segment: int, epoch: int) -> list[dict[str, Any]]:
    return [
        item.as_api()
        for item in recording.items
        if isinstance(item, Message) and item.segment == segment and item.epoch == epoch
    ]


def digest(value: Any) -> str:
    """A short hash of `value`'s JSON (summaries are keyed by what they summarised)."""
    return hashlib.blake2b(to_json(value).encode(), digest_size=16).hexdigest()


def prefix_digests(messages: list[dict[str, Any]]) -> list[str]:
    """`digest(messages[:k])` for k = 1 .. len(messages), each message encoded once."""
    running = hashlib.blake2b(b"[", digest_size=16)
    keys = []
    for position, message in enumerate(messages):
        running.update(("," if position else "").encode() + to_json(message).encode())
        closed = running.copy()
        closed.update(b"]")
        keys.append(closed.hexdigest())
    return keys


def first_model(recording: Recording) -> str | None:
    return next((c["model"] for c in recording.calls.values() if c.get("model")), None)


def recorded_blocks(recording: Recording) -> EncodedBlocks:
    """The JSON of every block the recording's messages hold, each encoded once: what its runs
    (the calibration pass and each strategy setting) share instead of encoding it again."""
    return EncodedBlocks.of(
        block
        for item in recording.items
        if isinstance(item, Message) and isinstance(item.content, list)
        for block in item.content
    )
