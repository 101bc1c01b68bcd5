"""The facts of a conversation up to a rewind point, and the probes asked about them.

Kinds: `modified` (a file a tool call changed before the point, by the rules of
`after_compaction`'s actions: the artifact trail), `read` (a file read and not modified),
`instruction` (the user's constraints, matched verbatim), `error` and `identifier` (as
retention extracts them from tool results). Probes, one question a request: `recall` (a cloze
of an instruction, error or identifier), `artifact` (a cloze of a modified file's path),
`continuation` (which file the session's next action touched, from the recording) and
`decision` (a cloze of the agent's last statement before the point). At most `MAX_PER_KIND`
recall and artifact probes a point, spread evenly over its facts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.analysis.after_compaction.actions import effect
from evo_magic.analysis.conversation import Message as RecordedMessage
from evo_magic.analysis.retention.facts import Fact, Tracked, extract, tracked
from evo_magic.probe import block_text

KINDS = ("modified", "read", "instruction", "error", "identifier")
FILE_KINDS = frozenset({"modified", "read"})
"""Kinds kept when the context names the file (see `measure.names_file`)."""
PROBES = ("recall", "artifact", "continuation", "decision")
CONTINUATION = (
    "You are about to continue this work. Which file will you open or change next? Answer "
    "with its path only."
)
MIN_DECISION_CHARS = 20
MAX_PER_KIND = 12
"""Recall and artifact probes asked at a point, at most (spread evenly over the facts)."""


@dataclass(frozen=True)
class Probe:
    """One question about a point, its expected answer and its kind."""

    kind: str
    question: str
    answer: str


def facts_before(session_id: str, messages: Sequence[RecordedMessage]) -> list[Tracked]:
    """The facts of `messages` (what the conversation had before the point), by kind."""
    facts = [
        f
        for f in extract(session_id, ((m.role, m.kind, m.content) for m in messages))
        if f.kind in ("instruction", "error", "identifier")
    ]
    modified, read = files_touched(messages)
    for kind, paths in (("modified", modified), ("read", [p for p in read if p not in modified])):
        for found in tracked(session_id, [Fact(path, kind="path") for path in paths]):
            found.kind = kind
            found.fact_id = f"{kind}-{found.fact_id.split('-', 1)[1]}"
            facts.append(found)
    return facts


def files_touched(messages: Iterable[RecordedMessage]) -> tuple[list[str], list[str]]:
    """The files changed and the files read by the successful tool calls of `messages`, in
    order of first appearance."""
    calls: dict[str, dict[str, Any]] = {}
    failed: set[str] = set()
    for message in messages:
        for block in message.content:
            if block.get("type") == "tool_use":
                calls[str(block.get("id"))] = block
            elif block.get("type") == "tool_result" and block.get("is_error"):
                failed.add(str(block.get("tool_use_id")))
    modified: dict[str, None] = {}
    read: dict[str, None] = {}
    for tool_use_id, block in calls.items():
        if tool_use_id in failed:
            continue
        done = effect(str(block.get("name")), json.dumps(block.get("input")))
        modified.update(dict.fromkeys(done.writes))
        read.update(dict.fromkeys(done.reads))
    return list(modified), list(read)


def probes_of(
    facts: Sequence[Tracked], before: Sequence[RecordedMessage], after: Sequence[RecordedMessage]
) -> list[Probe]:
    """The probes of a point: its facts' clozes, where the next action went, the last
    statement."""
    found = [
        Probe("artifact" if f.kind == "modified" else "recall", f.question, f.answer)
        for f in facts
        if f.kind != "read" and f.question and f.answer  # a read file is not asked about
    ]
    found = [
        *spread([p for p in found if p.kind == "recall"]),
        *spread([p for p in found if p.kind == "artifact"]),
    ]
    following = next_file(after)
    if following is not None:
        found.append(Probe("continuation", CONTINUATION, following))
    statement = last_statement(before)
    if statement is not None:
        (decided,) = tracked("", [Fact(statement)])
        if decided.question and decided.answer:
            found.append(Probe("decision", decided.question, decided.answer))
    return found


def spread(probes: Sequence[Probe], most: int = MAX_PER_KIND) -> list[Probe]:
    """At most `most` of `probes`, evenly spread over them (all when there are fewer)."""
    if len(probes) <= most:
        return list(probes)
    step = len(probes) / most
    return [probes[int(i * step)] for i in range(most)]


def next_file(after: Sequence[RecordedMessage]) -> str | None:
    """The first file the session's actions after the point read or changed (None: none)."""
    for message in after:
        for block in message.content:
            if block.get("type") == "tool_use":
                done = effect(str(block.get("name")), json.dumps(block.get("input")))
                if done.writes or done.reads:
                    return (done.writes or done.reads)[0]
    return None


def last_statement(before: Sequence[RecordedMessage]) -> str | None:
    """The agent's last statement before the point: the first sentence of its last text
    block of `MIN_DECISION_CHARS` or more."""
    for message in reversed(before):
        if message.role != "assistant":
            continue
        for block in reversed(message.content):
            if block.get("type") != "text":
                continue
            text = " ".join(block_text(block).split())
            sentence = text.split(". ")[0][:300]
            if len(sentence) >= MIN_DECISION_CHARS:
                return sentence
    return None
