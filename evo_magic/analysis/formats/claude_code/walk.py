"""Walking one Claude Code file: its conversations (the main one, each subagent's), each split
into the conversation and its abandoned branches, and every record placed: in a message (a
unit of `blocks`), a call, a compaction, or only an identity (`events`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evo_magic.analysis.formats import Position
from evo_magic.analysis.formats.claude_code import branches
from evo_magic.analysis.formats.claude_code.calls import call_row, compaction_row
from evo_magic.analysis.formats.claude_code.records import (
    SOURCE,
    UNTIMED_KINDS,
    block_count,
    classify,
)
from evo_magic.analysis.loader import SourceFile

_REPEATED = "claude_code: repeated uuid"
_PLACEHOLDER = "claude_code: API error placeholder (not a call)"
_WITHOUT_MESSAGES = "claude_code: file without messages"


@dataclass
class _State(Position):
    """Where a walk over one conversation (or branch) is."""

    turn: int = 0
    # epoch -> (last message index, its role, next block) for records put back into an epoch
    ends: dict[int, tuple[int, str | None, int]] = field(default_factory=dict)
    boundary_ts: str | None = None


class ClaudeFile:
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
        stem = self.stem = source.path.stem
        self.name = source.name
        self.file_agent = stem.removeprefix("agent-") if stem.startswith("agent-") else None

    @property
    def compaction_call(self) -> bool:
        """Whether the file is a compaction's own summarising call (`agent-acompact-*`)."""
        return (self.file_agent or "").startswith("acompact")

    def read(self) -> None:
        """Walk every conversation of the file, then give every record its identity."""
        if self.without_messages:
            self.skip(_WITHOUT_MESSAGES)
        for agent, records in self._conversations().items():
            self._conversation(agent, records)
        self._identities()

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def _conversations(self) -> dict[Any, list[dict[str, Any]]]:
        """The records of each conversation (None: the main one), a repeated uuid once."""
        seen: set[str] = set()
        conversations: dict[Any, list[dict[str, Any]]] = {}
        for record in self.records:
            uuid = record.get("uuid")
            if uuid is not None:
                if uuid in seen:  # a resumed session can repeat records
                    self.skip(_REPEATED)
                    record["repeated"] = True
                    continue
                seen.add(uuid)
            conversations.setdefault(self._agent(record), []).append(record)
        return conversations

    def _agent(self, record: dict[str, Any]) -> str | None:
        if not record.get("isSidechain"):
            return None
        return record.get("agentId") or self.file_agent or "sidechain"

    def _session(self, record: dict[str, Any]) -> str:
        return record.get("sessionId") or self.stem

    def _conversation(self, agent: str | None, records: list[dict[str, Any]]) -> None:
        """Walk the conversation, then each abandoned branch from where it forked."""
        messages = [r for r in records if r.get("type") in ("user", "assistant")]
        if not messages:
            return
        by_uuid = {r["uuid"]: r for r in records if r.get("uuid")}
        numbers = branches.branch_numbers(records, branches.active(messages, by_uuid), by_uuid)
        classify(messages)
        main = [r for r in records if numbers.get(r.get("uuid"), 0) == 0]
        _Walk(self, agent, _State(), 0).run(branches.responses_together(main))
        for branch, chain in branches.forks(records, numbers).items():
            _Walk(self, agent, self._fork(chain, by_uuid), branch).run(chain)

    def _fork(self, chain: list[dict[str, Any]], by_uuid: dict[str, dict[str, Any]]) -> _State:
        """Where an abandoned branch starts: where the record it forked from was placed."""
        parent = by_uuid.get(chain[0].get("parentUuid"))
        start = self.place.get(parent["line"]) if parent else None
        fork = _State()
        if start is not None:
            fork.epoch, fork.turn = start["epoch"], start["turn"]
            fork.index = start.get("message_index", start["at"][0])
            fork.role = start.get("role", start["at"][1])
            fork.next_block = start.get("next_block", start["at"][2])
        return fork

    def identity(
        self,
        agent: str | None,
        record: dict[str, Any],
        state: _State,
        branch: int,
        epoch: int | None = None,
    ) -> dict[str, Any]:
        """The identity columns of a record placed at `state` (kept for its line)."""
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
            "file": self.name,
            "line": record["line"],
            "at": (state.index, state.role, state.next_block),
        }
        self.place[record["line"]] = identity
        return identity

    def _identities(self) -> None:
        """Every record's identity, in file order: a record no walk placed (a repeat, one of a
        file without messages) takes the one before it."""
        last: dict[str, Any] | None = None
        for record in self.records:
            placed = self.place.get(record["line"])
            if placed is None:
                placed = dict(last or {}, seq=record["line"], line=record["line"])
                placed.update(
                    source=SOURCE,
                    session_id=self._session(record),
                    timestamp=record.get("stamp"),
                    file=self.name,
                )
            last = placed
            self.identities.append({**placed, "kind": record.get("type")})


class _Walk:
    """One pass, in order, over a conversation or one of its abandoned branches."""

    def __init__(self, file: ClaudeFile, agent: str | None, state: _State, branch: int):
        self.file = file
        self.agent = agent
        self.state = state
        self.branch = branch
        self.responses: dict[Any, dict[str, Any]] = {}
        """Response id (or line) -> the identity of its first record, and its records."""
        self.pending: dict[str, Any] | None = None
        """The compaction awaiting its summary."""

    def run(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._record(record)
        for response in self.responses.values():
            row = call_row(response["identity"], response["records"], self.file.source)
            self.file.calls.append(row)

    def _record(self, record: dict[str, Any]) -> None:
        """A record, by what it is: a compaction's boundary, no message (an identity only), a
        placeholder for a failed request, or a record of a message."""
        kind = record.get("type")
        message = record.get("message") or {}
        if kind == "system" and record.get("subtype") == "compact_boundary":
            self._boundary(record)
        elif kind not in ("user", "assistant") or not message:
            self._identity(record)
        elif record.get("isApiErrorMessage") or message.get("model") == "<synthetic>":
            self.file.skip(_PLACEHOLDER)
            self._identity(record)
        else:
            self._message(record, kind, message)

    def _identity(self, record: dict[str, Any], epoch: int | None = None) -> dict[str, Any]:
        return self.file.identity(self.agent, record, self.state, self.branch, epoch=epoch)

    def _boundary(self, record: dict[str, Any]) -> None:
        """A compaction: it opens the next epoch."""
        row = compaction_row(self._identity(record), record)
        self.file.compactions.append(row)
        self.state.new_epoch()
        self.state.boundary_ts = record.get("timestamp")
        self.pending = row

    def _message(self, record: dict[str, Any], kind: str, message: dict[str, Any]) -> None:
        """A record of a message: a unit of its blocks, and of its response's call."""
        role = message.get("role") or kind
        message_kind = record.get("kind") if kind == "user" else "response"
        epoch, index, first = self._place(record, role, message_kind)
        if self.pending is not None and record.get("isCompactSummary"):
            self.pending["summary"] = record.get("summary_text")
            self.pending = None
        identity = self._identity(record, epoch=epoch)
        identity.update(message_index=index, role=role, next_block=self.state.next_block)
        unit = {"path": "message.content", "first_block": first, "message_kind": message_kind}
        self.file.units.append({**identity, **unit, "branch": self.branch})
        if kind == "assistant" and message.get("usage"):
            key = message.get("id") or record["line"]
            if key in self.responses:
                self.responses[key]["records"].append(record)
            else:
                self.responses[key] = {"identity": dict(identity), "records": [record]}

    def _place(self, record: dict[str, Any], role: str, message_kind: str) -> tuple[int, int, int]:
        """(epoch, message index, first block) of a message record: consecutive records of one
        role are one message."""
        state = self.state
        if self._late(record, message_kind):
            return self._put_back(record, role)
        if message_kind in ("prompt", "command"):
            state.turn += 1
        state.message(role)
        index, first = state.index, state.next_block
        state.next_block += block_count(record)
        state.ends[state.epoch] = (state.index, state.role, state.next_block)
        return state.epoch, index, first

    def _late(self, record: dict[str, Any], message_kind: str) -> bool:
        """A manual /compact's own records, written after its boundary with earlier times."""
        state = self.state
        return (
            state.boundary_ts is not None
            and message_kind in UNTIMED_KINDS
            and (record.get("timestamp") or "") < state.boundary_ts
            and state.epoch > 0
        )

    def _put_back(self, record: dict[str, Any], role: str) -> tuple[int, int, int]:
        """Place a late record at the end of the epoch it happened in."""
        epoch = self.state.epoch - 1
        index, last_role, next_block = self.state.ends.get(epoch, (-1, None, 0))
        if role != last_role:
            index, next_block = index + 1, 0
        self.state.ends[epoch] = (index, role, next_block + block_count(record))
        return epoch, index, next_block
