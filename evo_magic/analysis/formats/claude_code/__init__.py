"""Claude Code sessions: `~/.claude/projects/<project>/<session>.jsonl`, and their subagents
(`agent-<id>.jsonl` beside them, or `<session>/subagents/agent-<id>.jsonl`).

A few columns per record are read in SQL; the rest is decided here, per conversation (the main
one, and each subagent's, flagged `sidechain` with its `agent_id`):

- **Branches.** Records form a tree by `parentUuid`. The conversation is the chain from its last
  message back to the root (as Claude Code resumes it), crossing compact boundaries by
  `logicalParentUuid`; what hangs beside that chain belongs to it: the other records of a
  response on it (Claude Code 2.1 parents a later parallel `tool_use` on an earlier one or its
  result) and the results of its tool calls. A response's records are put together, before its
  results: one response, one message, one call. Any other record below a record of the chain
  is on an abandoned branch (a rewind): it is flagged `abandoned`, indexed as its own
  continuation of the fork, and sorted after the conversation instead of into it.
- **Messages.** Consecutive records of the same role form one message (Claude Code writes each
  block of a streamed response as its own record); a `compact_boundary` starts a new epoch.
- **Kinds of user message** (`message_kind`): `prompt` (typed by a person), `command` (a slash
  command sent to the model), `local_command` (one that ran locally), `command_output`,
  `meta` (caveats, expanded command prompts), `interrupt`, `task_notification`, `bash`,
  `memory`, `tool_result`, `compact_summary`. `turn` counts prompts and commands sent to the model.
- **Manual /compact.** Claude Code writes the command, its caveat and its output after the
  boundary and the summary, with earlier timestamps: they are put back at the end of the epoch
  they happened in.
- **Compactions.** Without `postTokens`, the size after is the next call's prompt. The
  compaction's own call (`agent-acompact-*.jsonl`) is linked to it (its `summary_*` usage),
  not read as a subagent.
- **Usage** counts are read as written and checked: one that is not a count is NA, warned.
- **Not calls.** Claude Code's placeholders for failed requests (`isApiErrorMessage`, model
  `<synthetic>`) are neither messages nor calls; the failures themselves (`system` records,
  subtype `api_error`) are in `events`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evo_magic.analysis.blocks import as_blocks, block_frames, blocks_sql
from evo_magic.analysis.formats import USAGE_AS_READ, Part, usage_count_text
from evo_magic.analysis.frames import (
    BLOCK_COLUMNS,
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    IDENTITY,
    rows_table,
)
from evo_magic.analysis.loader import Engine, SourceFile

SOURCE = "claude_code"

STRUCTURE = {
    "type": "VARCHAR",
    "subtype": "VARCHAR",
    "uuid": "VARCHAR",
    "parentUuid": "VARCHAR",
    "logicalParentUuid": "VARCHAR",
    "isSidechain": "BOOLEAN",
    "agentId": "VARCHAR",
    "sessionId": "VARCHAR",
    "timestamp": "VARCHAR",
    "isMeta": "BOOLEAN",
    "isCompactSummary": "BOOLEAN",
    "isApiErrorMessage": "BOOLEAN",
    "message": {
        "id": "VARCHAR",
        "role": "VARCHAR",
        "model": "VARCHAR",
        "stop_reason": "VARCHAR",
        "usage": USAGE_AS_READ,
        "content": "JSON",
    },
    "compactMetadata": {
        "trigger": "VARCHAR",
        "preTokens": "BIGINT",
        "postTokens": "BIGINT",
        "durationMs": "DOUBLE",
    },
    "toolUseResult": {"agentId": "VARCHAR"},
}
# `content` (the blocks) is for SQL; the rest, small, is what the walk below reads.
_SELECT = f"""* exclude (message), try_cast(timestamp as TIMESTAMPTZ) as stamp,
    {as_blocks("message.content")} as content,
    struct_pack(id := message.id, role := message.role, model := message.model,
        stop_reason := message.stop_reason, usage := message.usage,
        content := case when starts_with(message.content, '[') then list_transform(content,
            lambda b: {{'type': b.type, 'id': b.id, 'tool_use_id': b.tool_use_id}}) end) as message,
    case when type = 'user' then left(content[1].text, 300) end as head,
    len(content) as block_count,
    case when isCompactSummary then array_to_string(list_transform(content, lambda b: b.text), '')
        end as summary_text"""
_UNITS = """select *, null::VARCHAR as status,
    null::STRUCT(id VARCHAR, text VARCHAR)[] as earlier from claude_units"""

_PREFIXES = (
    ("<local-command-stdout>", "command_output"),
    ("<local-command-stderr>", "command_output"),
    ("<local-command-caveat>", "meta"),
    ("<command-name>", "command"),
    ("<command-message>", "command"),
    ("[Request interrupted by user", "interrupt"),
    ("<task-notification>", "task_notification"),
    ("<bash-input>", "bash"),
    ("<bash-stdout>", "bash"),
    ("<bash-stderr>", "bash"),
    ("<user-memory-input>", "memory"),
)
_UNTIMED_KINDS = frozenset({"command", "local_command", "command_output", "meta"})


def user_kind(record: dict[str, Any]) -> str:
    """What a user record is (see the module's docstring); `local_command` is decided later,
    from what follows a command."""
    content = _content(record)
    if record.get("isCompactSummary"):
        return "compact_summary"
    if any(b.get("type") == "tool_result" for b in content):
        return "tool_result"
    head = (record.get("head") or "").lstrip()
    for prefix, kind in _PREFIXES:
        if head.startswith(prefix):
            return kind
    if record.get("isMeta"):
        return "meta"
    return "prompt"


def _content(record: dict[str, Any]) -> list[dict[str, Any]]:
    message = record.get("message") or {}
    return [b for b in (message.get("content") or []) if b]


def _blocks(record: dict[str, Any]) -> int:
    return record.get("block_count") or 0


@dataclass
class _State:
    """Where a walk over one conversation (or branch) is."""

    epoch: int = 0
    turn: int = 0
    index: int = -1
    role: str | None = None
    next_block: int = 0
    # epoch -> (last message index, its role, next block) for records put back into an epoch
    ends: dict[int, tuple[int, str | None, int]] = field(default_factory=dict)
    boundary_ts: str | None = None


_UNIT = {
    **{name: dtype for name, dtype in BLOCK_COLUMNS.items() if name in IDENTITY},
    "message_index": "Int64",
    "role": "category",
    "message_kind": "category",
    "abandoned": "boolean",
    "parent_tool_use_id": "string",
    "file_id": "Int64",
    "line": "Int64",
    "first_block": "Int64",
    "path": "string",
    "branch": "Int64",
}


def read(engine: Engine, sources: list[SourceFile]) -> Part:
    """The frames' rows of Claude Code session files."""
    records = engine.read(sources, STRUCTURE, _SELECT, key="type")
    walked = records.drop_columns(["content", "raw"]).to_pylist()
    by_file: dict[int, list[dict[str, Any]]] = {s.file_id: [] for s in sources}
    for record in walked:
        by_file[record["file_id"]].append(record)
    spawned = _spawned_agents(walked)
    skipped: dict[str, int] = {}
    readers = [_File(s, by_file[s.file_id], spawned, skipped) for s in sources]
    for reader in readers:
        reader.read()
        reader.after_tokens()
    _link_compaction_calls(readers, skipped)
    without = [r.source.name for r in readers if r.without_messages]
    calls = [row for reader in readers for row in reader.calls]
    compactions = [row for reader in readers for row in reader.compactions]
    _number(calls)
    for row in compactions:
        summary = row.get("summary")
        row["summary_chars"] = len(summary) if isinstance(summary, str) else None
    units = rows_table([unit for reader in readers for unit in reader.units], _UNIT)
    blocks, parts = block_frames(engine, blocks_sql(_UNITS), records=records, claude_units=units)
    return Part(
        blocks=blocks,
        parts=parts,
        calls=rows_table(calls, CALL_COLUMNS),
        compactions=rows_table(compactions, COMPACTION_COLUMNS),
        events=rows_table([row for reader in readers for row in reader.identities], EVENT_COLUMNS),
        records=records.num_rows,
        skipped=skipped,
        without_messages=without,
    )


_SUMMARY_USAGE = {
    "summary_input_tokens": "input_tokens",
    "summary_output_tokens": "output_tokens",
    "summary_cache_creation_input_tokens": "cache_creation_input_tokens",
    "summary_cache_read_input_tokens": "cache_read_input_tokens",
}


def _link_compaction_calls(readers: list[_File], skipped: dict[str, int]) -> None:
    """A compaction's own call (`<session>/subagents/agent-acompact-*.jsonl`: the conversation
    sent again with the request to summarise it) is not a subagent: its usage becomes the
    `summary_*` usage of the compaction of its session that came next (by time), and its
    records are left out of `blocks` and `calls` (they stay in `events`). A file whose
    compaction is not among those read is kept as a subagent."""
    compactions = [
        row
        for r in readers
        if not r.compaction_call
        for row in r.compactions
        if not row["agent_id"]
    ]
    for reader in (r for r in readers if r.compaction_call and r.calls):
        session = reader.calls[0]["session_id"]
        end = max(c["timestamp"] for c in reader.calls if c["timestamp"] is not None)
        after = [
            row
            for row in compactions
            if row["session_id"] == session
            and row["timestamp"] is not None
            and row["timestamp"] >= end
        ]
        if not after:
            continue
        row = min(after, key=lambda r: r["timestamp"])
        for column, name in _SUMMARY_USAGE.items():
            values = [c[name] for c in reader.calls if c.get(name) is not None]
            row[column] = (row.get(column) or 0) + sum(values) if values else row.get(column)
        reader.units, reader.calls = [], []
        skipped["claude_code: compaction's own call (linked to its compaction)"] = (
            skipped.get("claude_code: compaction's own call (linked to its compaction)", 0) + 1
        )


def _spawned_agents(records: list[dict[str, Any]]) -> dict[tuple[Any, str], str]:
    """(session id, agent id) -> the tool_use_id of the tool call that started the agent, from
    the `toolUseResult.agentId` of its result."""
    found: dict[tuple[Any, str], str] = {}
    for record in records:
        agent = (record.get("toolUseResult") or {}).get("agentId")
        if agent:
            for block in _content(record):
                if block.get("type") == "tool_result" and block.get("tool_use_id"):
                    found[(record.get("sessionId"), agent)] = block["tool_use_id"]
    return found


class _File:
    """One Claude Code file's records, read into units, calls, compactions and identities."""

    def __init__(
        self,
        source: SourceFile,
        records: list[dict[str, Any]],
        spawned: dict[tuple[Any, str], str],
        skipped: dict[str, int],
    ):
        self.source = source
        self.records = records
        self.spawned = spawned
        self.skipped = skipped
        self.units: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.compactions: list[dict[str, Any]] = []
        self.identities: list[dict[str, Any]] = []
        self.place: dict[int, dict[str, Any]] = {}  # line -> identity of a placed record
        self.without_messages = not any(r.get("type") in ("user", "assistant") for r in records)
        stem = source.path.stem
        self.file_agent = stem.removeprefix("agent-") if stem.startswith("agent-") else None

    def read(self) -> None:
        if self.without_messages:
            self._skip("claude_code: file without messages")
        seen: set[str] = set()
        conversations: dict[Any, list[dict[str, Any]]] = {}
        for record in self.records:
            uuid = record.get("uuid")
            if uuid is not None:
                if uuid in seen:  # a resumed session can repeat records
                    self._skip("claude_code: repeated uuid")
                    record["repeated"] = True
                    continue
                seen.add(uuid)
            conversations.setdefault(self._agent(record), []).append(record)
        for agent, records in conversations.items():
            self._conversation(agent, records)
        self._identities()

    @property
    def compaction_call(self) -> bool:
        """Whether the file is a compaction's own summarising call (`agent-acompact-*`)."""
        return (self.file_agent or "").startswith("acompact")

    def after_tokens(self) -> None:
        """A compaction without `postTokens` gets its size after from the next call of its
        conversation: that call's prompt (the summary and what followed it, system and
        tools included), so not exact."""
        for row in self.compactions:
            if row.get("after_tokens") is not None:
                continue
            later = [
                c
                for c in self.calls
                if c["agent_id"] == row["agent_id"]
                and c["epoch"] == row["epoch"] + 1
                and not c["abandoned"]
                and c.get("context_sent_tokens") is not None
            ]
            if later:
                first = min(later, key=lambda c: c["line"])
                row["after_tokens"] = first["context_sent_tokens"]
                row["after_tokens_exact"] = False

    def _skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def _agent(self, record: dict[str, Any]) -> str | None:
        if not record.get("isSidechain"):
            return None
        return record.get("agentId") or self.file_agent or "sidechain"

    def _session(self, record: dict[str, Any]) -> str:
        return record.get("sessionId") or self.source.path.stem

    def _conversation(self, agent: str | None, records: list[dict[str, Any]]) -> None:
        messages = [r for r in records if r.get("type") in ("user", "assistant")]
        if not messages:
            return
        by_uuid = {r["uuid"]: r for r in records if r.get("uuid")}
        active = _with_parallel_calls(_chain(messages[-1], by_uuid), messages)
        branches = _branches(records, active, by_uuid)
        _classify(messages, branches)
        main = _responses_together([r for r in records if branches.get(r.get("uuid"), 0) == 0])
        state = _State()
        self._walk(agent, main, state, 0)
        forks: dict[int, list[dict[str, Any]]] = {}
        for record in records:
            branch = branches.get(record.get("uuid"), 0)
            if branch:
                forks.setdefault(branch, []).append(record)
        for branch, chain in forks.items():
            parent = by_uuid.get(chain[0].get("parentUuid"))
            start = self.place.get(parent["line"]) if parent else None
            fork = _State()
            if start is not None:
                fork.epoch, fork.turn = start["epoch"], start["turn"]
                fork.index = start.get("message_index", start["at"][0])
                fork.role = start.get("role", start["at"][1])
                fork.next_block = start.get("next_block", start["at"][2])
            self._walk(agent, chain, fork, branch)

    def _walk(
        self, agent: str | None, records: list[dict[str, Any]], state: _State, branch: int
    ) -> None:
        calls: dict[Any, dict[str, Any]] = {}
        pending: dict[str, Any] | None = None  # the compaction awaiting its summary
        for record in records:
            kind = record.get("type")
            message = record.get("message") or {}
            if kind == "system" and record.get("subtype") == "compact_boundary":
                pending = self._boundary(agent, record, state, branch)
                continue
            if kind not in ("user", "assistant") or not message:
                self._identity(agent, record, state, branch)
                continue
            if record.get("isApiErrorMessage") or message.get("model") == "<synthetic>":
                self._skip("claude_code: API error placeholder (not a call)")
                self._identity(agent, record, state, branch)
                continue
            role = message.get("role") or kind
            message_kind = record.get("kind") if kind == "user" else "response"
            epoch = state.epoch
            late = (
                state.boundary_ts is not None
                and message_kind in _UNTIMED_KINDS
                and (record.get("timestamp") or "") < state.boundary_ts
                and epoch > 0
            )
            if late:  # a manual /compact's own records: back into the epoch they belong to
                epoch -= 1
                index, last_role, next_block = state.ends.get(epoch, (-1, None, 0))
                if role != last_role:
                    index, next_block = index + 1, 0
                first = next_block
                state.ends[epoch] = (index, role, next_block + _blocks(record))
            else:
                if message_kind in ("prompt", "command"):
                    state.turn += 1
                if role != state.role:
                    state.index, state.next_block, state.role = state.index + 1, 0, role
                index, first = state.index, state.next_block
                state.next_block += _blocks(record)
                state.ends[epoch] = (state.index, state.role, state.next_block)
            if pending is not None and record.get("isCompactSummary"):
                pending["summary"] = record.get("summary_text")
                pending = None
            identity = self._identity(agent, record, state, branch, epoch=epoch)
            identity.update(message_index=index, role=role, next_block=state.next_block)
            self.units.append(
                {
                    **identity,
                    "path": "message.content",
                    "first_block": first,
                    "message_kind": message_kind,
                    "branch": branch,
                }
            )
            if kind == "assistant" and message.get("usage"):
                key = message.get("id") or record["line"]
                if key in calls:
                    calls[key]["records"].append(record)
                else:
                    calls[key] = {"identity": dict(identity), "records": [record]}
        for call in calls.values():
            self.calls.append(_call_row(call["identity"], call["records"], self.source))

    def _boundary(
        self, agent: str | None, record: dict[str, Any], state: _State, branch: int
    ) -> dict[str, Any]:
        meta = record.get("compactMetadata") or {}
        identity = self._identity(agent, record, state, branch)
        trigger = meta.get("trigger")
        duration = meta.get("durationMs")
        row = {
            **identity,
            "strategy": "summarise",
            "layer": {"auto": "over_limit", "manual": "on_request"}.get(trigger),
            "trigger": trigger,
            "success": True,
            "duration": None if duration is None else duration / 1000,
            "before_tokens": meta.get("preTokens"),
            "after_tokens": meta.get("postTokens"),
        }
        self.compactions.append(row)
        state.epoch += 1
        state.index, state.role, state.next_block = -1, None, 0
        state.boundary_ts = record.get("timestamp")
        return row

    def _identity(
        self,
        agent: str | None,
        record: dict[str, Any],
        state: _State,
        branch: int,
        epoch: int | None = None,
    ) -> dict[str, Any]:
        session = self._session(record)
        identity = {
            "source": SOURCE,
            "session_id": session,
            "agent_id": agent,
            "sidechain": agent is not None,
            "seq": record["line"],
            "timestamp": record.get("stamp"),
            "turn": state.turn,
            "epoch": state.epoch if epoch is None else epoch,
            "segment": 0,
            "abandoned": branch > 0,
            "parent_tool_use_id": self.spawned.get((session, agent)) if agent else None,
            "file_id": self.source.file_id,
            "file": self.source.name,
            "line": record["line"],
            "at": (state.index, state.role, state.next_block),
        }
        self.place[record["line"]] = identity
        return identity

    def _identities(self) -> None:
        last: dict[str, Any] | None = None
        for record in self.records:
            placed = self.place.get(record["line"])
            if placed is None:
                placed = dict(last or {}, seq=record["line"], line=record["line"])
                placed.update(
                    source=SOURCE,
                    session_id=self._session(record),
                    timestamp=record.get("stamp"),
                    file=self.source.name,
                )
            last = placed
            self.identities.append({**placed, "kind": record.get("type")})


def _chain(last: dict[str, Any], by_uuid: dict[str, dict[str, Any]]) -> set[Any]:
    """The uuids from `last` back to the root, across compact boundaries."""
    found: set[Any] = set()
    record: dict[str, Any] | None = last
    while record is not None and record.get("uuid") not in found:
        found.add(record.get("uuid"))
        parent = record.get("parentUuid") or record.get("logicalParentUuid")
        record = by_uuid.get(parent) if parent else None
    return found


def _with_parallel_calls(active: set[Any], messages: list[dict[str, Any]]) -> set[Any]:
    """The chain `active` with what hangs beside it but belongs to it: the other records of a
    response on it (Claude Code writes each block of a response as a record, and with
    parallel tool calls parents a later tool_use on an earlier one's result, or on the
    previous block), and the results of its tool calls."""
    responses: set[Any] = set()
    used: set[Any] = set()
    while True:
        for record in messages:
            if record.get("uuid") in active and record.get("type") == "assistant":
                responses.add((record.get("message") or {}).get("id"))
                used.update(b.get("id") for b in _content(record) if b.get("type") == "tool_use")
        grown = set(active)
        for record in messages:
            if record.get("uuid") in grown:
                continue
            if record.get("type") == "assistant":
                if (record.get("message") or {}).get("id") in responses - {None}:
                    grown.add(record.get("uuid"))
                continue
            ids = [b.get("tool_use_id") for b in _content(record) if b.get("type") == "tool_result"]
            if ids and all(i in used for i in ids):
                grown.add(record.get("uuid"))
        if grown == active:
            return active
        active = grown


def _responses_together(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`records` in file order, except that a record of a response written after the results
    of its earlier tool calls joins the response's other records, before those results: one
    response is one message (and one call), its tool results the message after it."""
    out: list[dict[str, Any]] = []
    last_at: dict[Any, int] = {}  # response id -> position of its last record in `out`
    for record in records:
        message = record.get("message") or {}
        response = message.get("id") if record.get("type") == "assistant" else None
        at = last_at.get(response) if response is not None else None
        if at is not None and at + 1 < len(out):
            tail = range(at + 1, len(out))
            if all(_is_result_or_aside(out[i]) for i in tail):
                # Only results and asides follow it, so no response's position moves.
                out.insert(at + 1, record)
                last_at[response] = at + 1
                continue
        if response is not None:
            last_at[response] = len(out)
        out.append(record)
    return out


def _is_result_or_aside(record: dict[str, Any]) -> bool:
    """A tool_result record, or a record that is no message (progress, snapshots, ...)."""
    if record.get("type") not in ("user", "assistant"):
        return True
    content = _content(record)
    return (
        record.get("type") == "user"
        and bool(content)
        and all(b.get("type") == "tool_result" for b in content)
    )


def _branches(
    records: list[dict[str, Any]], active: set[Any], by_uuid: dict[str, dict[str, Any]]
) -> dict[Any, int]:
    """uuid -> 0 for the conversation (and records not below it), or the number (1, 2, ...) of
    the abandoned branch it is on."""
    branch: dict[Any, int] = {}
    numbers: dict[Any, int] = {}

    def of(record: dict[str, Any]) -> int:
        uuid = record.get("uuid")
        if uuid is None or uuid in active:
            return 0
        if uuid in branch:
            return branch[uuid]
        branch[uuid] = 0  # guards against a cycle
        parent = by_uuid.get(record.get("parentUuid") or "")
        if parent is None:
            result = 0
        elif parent.get("uuid") in active:  # a fork: this record starts an abandoned branch
            result = numbers.setdefault(uuid, len(numbers) + 1)
        else:
            result = of(parent)
        branch[uuid] = result
        return result

    for record in records:
        of(record)
    return branch


def _classify(messages: list[dict[str, Any]], branches: dict[Any, int]) -> None:
    """Set each user record's `kind`; a command followed by its local output (before the model
    answers) ran locally."""
    for record in messages:
        if record.get("type") == "user":
            record["kind"] = user_kind(record)
    for i, record in enumerate(messages):
        if record.get("kind") != "command":
            continue
        for later in messages[i + 1 :]:
            if later.get("type") == "assistant" or later.get("kind") in ("prompt", "command"):
                break
            if later.get("kind") == "command_output":
                record["kind"] = "local_command"
                break


def _call_row(
    identity: dict[str, Any], records: list[dict[str, Any]], source: SourceFile
) -> dict[str, Any]:
    """One model call from the records of one response (streamed blocks share its id; the last
    record's usage is the final one). A count that is not a count is NA, noted on `source`."""
    message = records[-1].get("message") or {}
    usage = _counts(message.get("usage") or {}, records[-1]["line"], source)
    stop = next(
        (r["message"]["stop_reason"] for r in reversed(records) if r["message"].get("stop_reason")),
        None,
    )
    inferred = False
    if stop is None:
        content = next((_content(r) for r in reversed(records) if _content(r)), [])
        if content and content[-1].get("type") == "tool_use":
            stop, inferred = "tool_use", True
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
        "context_sent_tokens": sent,
        "context_sent_tokens_exact": sent is not None,
    }


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


def _number(calls: list[dict[str, Any]]) -> None:
    """Number the calls 1, 2, ... per (session, agent), in order."""
    counts: dict[tuple[Any, Any], int] = {}
    for row in calls:
        if row.get("call") is None:
            key = (row["session_id"], row["agent_id"])
            counts[key] = counts.get(key, 0) + 1
            row["call"] = counts[key]
