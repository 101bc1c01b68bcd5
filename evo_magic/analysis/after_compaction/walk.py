"""One walk through each conversation's calls: every action judged once against everything
before it (the baseline) and, after a compaction, against what the conversation had read and
run at the boundary; the rows of `compactions`, `calls` and `stretches` (see measure.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.after_compaction.measure import (
    CONVERSATION,
    COUNTS,
    Call,
    Memory,
    Tally,
    conversations,
)

if TYPE_CHECKING:
    import pandas as pd

    from evo_magic.analysis.transcripts import Transcripts


@dataclass
class Boundary:
    """A recorded compaction of a conversation: its place (segment, compacted epoch) and what
    the recording says of it."""

    number: int
    segment: int
    epoch: int
    recorded: dict[str, Any]


@dataclass
class Stretch:
    """The calls of one epoch of a conversation: judged against all before them (`before`) and,
    when a compaction opened it, against its boundary (`after`)."""

    segment: int
    epoch: int
    before: Tally = field(default_factory=Tally)
    after: Tally = field(default_factory=Tally)
    resume: int | None = None
    first_call: int | None = None


@dataclass
class Rows:
    """The rows one walk gives, as plain dicts."""

    compactions: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    stretches: list[dict[str, Any]] = field(default_factory=list)


RECORDED = ("trigger", "strategy", "before_tokens", "after_tokens", "file", "line")
"""What a compaction row takes from the recording's `compactions` frame."""


def walked(t: Transcripts) -> Rows:
    """Every conversation of `t` walked: the rows of the three frames."""
    boundaries = _boundaries(t.compactions)
    rows = Rows()
    for conversation, calls in conversations(t):
        _walk(conversation, calls, boundaries.get(conversation, []), rows)
    return rows


def _boundaries(compactions: pd.DataFrame) -> dict[tuple[Any, ...], list[Boundary]]:
    """The successful compactions of each conversation, in order."""
    from evo_magic.analysis.after_compaction.measure import _plain

    found: dict[tuple[Any, ...], list[Boundary]] = {}
    done = compactions[compactions["success"].fillna(True).astype(bool)]
    done = done.sort_values([*CONVERSATION, "segment", "epoch", "line"], kind="stable")
    for row in done.to_dict("records"):
        conversation = tuple(_plain(row[k]) for k in CONVERSATION)
        listed = found.setdefault(conversation, [])
        recorded = {k: _plain(row[k]) for k in RECORDED}
        listed.append(Boundary(len(listed) + 1, int(row["segment"]), int(row["epoch"]), recorded))
    return found


def _walk(
    conversation: tuple[Any, ...], calls: Sequence[Call], boundaries: list[Boundary], rows: Rows
) -> None:
    source, session_id, agent_id = conversation
    opened = {(b.segment, b.epoch + 1): b for b in boundaries}
    stretches: dict[tuple[int, int], Stretch] = {}
    memory = Memory()
    frozen: tuple[dict[str, int], set[str]] = ({}, set())
    segment = None
    for call in calls:
        if call.segment != segment:
            memory, segment = Memory(), call.segment  # a reset: the history starts afresh
        place = (call.segment, call.epoch)
        stretch = stretches.get(place)
        if stretch is None:
            stretch = stretches[place] = Stretch(*place)
            frozen = memory.frozen()
        boundary = opened.get(place)
        before, after, new = _assessed(call, memory, frozen if boundary is not None else None)
        stretch.before.add(before)
        if boundary is None:
            continue
        stretch.after.add(after)
        stretch.first_call = stretch.first_call or call.call
        if new and stretch.resume is None:
            stretch.resume = stretch.after.calls
        rows.calls.append(
            {
                "session_id": session_id,
                "agent_id": agent_id,
                "compaction": boundary.number,
                "call": call.call,
                "calls_since": stretch.after.calls,
                **{k: getattr(after, k) for k in COUNTS[1:]},
                "new_work": new,
                "context_tokens": call.context_tokens,
                "source": source,
            }
        )
    compacted = {(b.segment, b.epoch) for b in boundaries}
    rows.stretches += [_stretch_row(conversation, s, compacted) for s in stretches.values()]
    for i, boundary in enumerate(boundaries):
        following = boundaries[i + 1] if i + 1 < len(boundaries) else None
        if following is not None and following.segment != boundary.segment:
            following = None
        rows.compactions.append(_compaction_row(conversation, boundary, following, stretches))


def _assessed(
    call: Call, memory: Memory, frozen: tuple[dict[str, int], set[str]] | None
) -> tuple[Tally, Tally, bool]:
    """The call's actions counted against everything read before (`before`) and, after a
    compaction (`frozen`: what was read when its stretch opened), against that alone
    (`after`); whether one of them was new work. Each action is remembered as it is counted."""
    before, after, new = Tally(calls=1), Tally(calls=1), False
    for action in call.actions:
        tally, _ = memory.assess(action, memory.read, memory.keys)
        before.add(tally)
        if frozen is not None:
            tally, fresh = memory.assess(action, *frozen)
            after.add(tally)
            new = new or fresh
        memory.remember(action)
    return before, after, new


def _stretch_row(
    conversation: tuple[Any, ...], stretch: Stretch, compacted: set[tuple[int, int]]
) -> dict[str, Any]:
    """A stretch's row: its counts, and whether a compaction opened it."""
    source, session_id, agent_id = conversation
    return {
        "session_id": session_id,
        "agent_id": agent_id,
        "segment": stretch.segment,
        "epoch": stretch.epoch,
        "compacted": (stretch.segment, stretch.epoch) in compacted,
        **{k: getattr(stretch.before, k) for k in COUNTS},
        "source": source,
    }


def _compaction_row(
    conversation: tuple[Any, ...],
    boundary: Boundary,
    following: Boundary | None,
    stretches: dict[tuple[int, int], Stretch],
) -> dict[str, Any]:
    source, session_id, agent_id = conversation
    empty = Stretch(boundary.segment, boundary.epoch)
    before = stretches.get((boundary.segment, boundary.epoch), empty).before
    stretch = stretches.get((boundary.segment, boundary.epoch + 1), empty)
    after = stretch.after
    recorded = boundary.recorded
    refill = None
    if following is not None:
        now, then = recorded["after_tokens"], following.recorded["before_tokens"]
        refill = None if now is None or then is None else then - now
    return {
        "session_id": session_id,
        "agent_id": agent_id,
        "compaction": boundary.number,
        "call": stretch.first_call,
        "trigger": recorded["trigger"],
        "strategy": recorded["strategy"],
        "before_tokens": recorded["before_tokens"],
        "after_tokens": recorded["after_tokens"],
        "calls_after": after.calls,
        "reads_after": after.reads,
        "repeated_reads": after.repeated_reads,
        "commands_after": after.commands,
        "repeated_commands": after.repeated_commands,
        "reacquired_tokens": after.reacquired_tokens,
        "calls_to_resume": stretch.resume,
        "calls_to_next_compaction": after.calls if following is not None else None,
        "tokens_to_next_compaction": refill,
        "calls_before": before.calls,
        "reads_before": before.reads,
        "repeated_reads_before": before.repeated_reads,
        "commands_before": before.commands,
        "repeated_commands_before": before.repeated_commands,
        "reacquired_tokens_before": before.reacquired_tokens,
        "source": source,
        "file": recorded["file"],
        "line": recorded["line"],
    }
