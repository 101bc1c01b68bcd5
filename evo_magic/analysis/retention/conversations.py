"""The main conversations retention follows: each one's facts, and the call where each fact was
first sent (subagents are not followed)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evo_magic.analysis.conversation import Call, Message
from evo_magic.analysis.replay import Recording, recordings
from evo_magic.analysis.retention.facts import Fact, Tracked, extract, tracked
from evo_magic.analysis.retention.kept import Matcher

if TYPE_CHECKING:
    from evo_magic.analysis.transcripts import Transcripts


@dataclass
class Conversation:
    """A main conversation's facts, the call (ordinal) where each was first sent, and the
    numbers of its calls in order."""

    session_id: str
    facts: list[Tracked]
    first_ordinals: list[int | None]
    calls: list[int | None]
    matcher: Matcher

    def first_call(self, index: int) -> int | None:
        ordinal = self.first_ordinals[index]
        return None if ordinal is None else self.calls[ordinal]


def conversations(t: Transcripts, given: list[Fact] | None) -> Iterator[Conversation]:
    """Every main conversation of `t`, following the `given` facts (None: those extracted from
    what it sent)."""
    for recording in recordings(t):
        if recording.agent_id is None:
            yield _conversation(recording, given)


def _conversation(recording: Recording, given: list[Fact] | None) -> Conversation:
    messages = list(_sent_messages(recording))
    if given is None:
        facts = extract(recording.session_id, ((m.role, m.kind, m.content) for m in messages))
    else:
        facts = tracked(recording.session_id, given)
    matcher = Matcher(facts)
    firsts, calls = _first_sent(recording, matcher, {id(m) for m in messages}, len(facts))
    return Conversation(recording.session_id, facts, firsts, calls, matcher)


def _first_sent(
    recording: Recording, matcher: Matcher, sent: set[int], count: int
) -> tuple[list[int | None], list[int | None]]:
    """The ordinal of the call where each of the `count` facts was first sent (None: never),
    and the numbers of the calls replay makes, in order. `sent` holds the ids of the messages
    as sent."""
    firsts: list[int | None] = [None] * count
    calls: list[int | None] = []
    started = False
    for item in recording.items:
        if isinstance(item, Message):
            started = True  # replay calls once the history holds a message
            if id(item) in sent:
                _note_first(firsts, matcher, item, len(calls))  # first sent at the next call
        elif isinstance(item, Call) and started:
            calls.append(item.call)
    # A fact that came after the last call was never sent.
    return [f if f is not None and f < len(calls) else None for f in firsts], calls


def _note_first(firsts: list[int | None], matcher: Matcher, message: Message, at: int) -> None:
    for block in message.content:
        for index in matcher.in_block(block):
            if firsts[index] is None:
                firsts[index] = at


def _sent_messages(recording: Recording) -> Iterator[Message]:
    """The messages as recorded, without the histories that replaced old ones (a replacement
    repeats what came before)."""
    for item in recording.items:
        if not isinstance(item, Message):
            continue
        opening = recording.opening.get((item.segment, item.epoch))
        if item.epoch > 0 and opening is not None and item.index < opening:
            continue
        if item.kind in ("compact_summary", "compact_history"):
            continue
        yield item
