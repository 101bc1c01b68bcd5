"""Which facts each call's context holds, followed incrementally through a replay.

A fact is kept at a call when its text is in a block of the messages that would be sent
(instructions verbatim, other facts with whitespace normalised; the system prompt is not in
the messages). Nothing scans every fact against every context: each block's text is searched
once (blocks are shared between calls and strategy settings, and a block a strategy rewrites is
a new block), each message's facts are the union of its blocks', and per call only the messages
that came or went since the previous call change the count of messages holding each fact.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evo_magic.analysis.replay import ReplayedCall
from evo_magic.analysis.retention.facts import Tracked
from evo_magic.events import CompactionFinished, MicroCompacted
from evo_magic.probe import block_text, normalise
from evo_magic.strategies.large_outputs import LargeOutputs

_SAVED_TO = re.compile(r"saved to (\S+?)\. ")


def _automaton(needles: Iterable[tuple[int, str]]) -> Any:
    """An Aho-Corasick automaton of the `needles` ((fact index, text) pairs), each text's
    value the indices of the facts it stands for (None when there is no needle)."""
    import ahocorasick

    indices: dict[str, list[int]] = {}
    for index, needle in needles:
        indices.setdefault(needle, []).append(index)
    if not indices:
        return None
    automaton = ahocorasick.Automaton()
    for needle, of in indices.items():
        automaton.add_word(needle, tuple(of))
    automaton.make_automaton()
    return automaton


class Matcher:
    """The facts of one conversation found in blocks and messages, each text searched once,
    for all the facts at once (one pass of an Aho-Corasick automaton over the text, however
    many facts there are)."""

    def __init__(self, facts: Sequence[Tracked]):
        self.facts = facts
        self._verbatim = _automaton((i, f.needle) for i, f in enumerate(facts) if f.verbatim)
        self._flat = _automaton((i, f.needle) for i, f in enumerate(facts) if not f.verbatim)
        self._blocks: dict[int, tuple[Mapping[str, Any], frozenset[int]]] = {}
        self._texts: dict[str, frozenset[int]] = {}
        self.searched = 0
        """Texts searched so far (the work: each distinct text once)."""

    def in_text(self, text: str) -> frozenset[int]:
        """Indices of the facts `text` holds: instructions verbatim, the others in the text
        with its whitespace normalised."""
        found = self._texts.get(text)
        if found is None:
            self.searched += 1
            hits: set[int] = set()
            if self._verbatim is not None:
                for _, indices in self._verbatim.iter(text):
                    hits.update(indices)
            if self._flat is not None:
                for _, indices in self._flat.iter(normalise(text)):
                    hits.update(indices)
            found = frozenset(hits)
            self._texts[text] = found
        return found

    def in_block(self, block: Mapping[str, Any]) -> frozenset[int]:
        cached = self._blocks.get(id(block))
        if cached is not None and cached[0] is block:
            return cached[1]
        found = self.in_text(block_text(block))
        tool_id = block.get("tool_use_id") or (
            block.get("id") if block.get("type") == "tool_use" else None
        )
        if found and isinstance(tool_id, str):
            for index in found:
                self.facts[index].tool_use_ids.add(tool_id)
        self._blocks[id(block)] = (block, found)  # held: its id is not reused while cached
        return found

    def in_message(self, message: Mapping[str, Any]) -> frozenset[int]:
        content = message.get("content")
        if isinstance(content, str):
            return self.in_text(content)
        found: frozenset[int] = frozenset()
        for block in content or []:
            if isinstance(block, dict):
                hit = self.in_block(block)
                if hit:
                    found = found | hit
        return found


@dataclass
class FactState:
    """How one fact fared under one strategy setting."""

    kept_calls: int = 0
    since: int | None = None
    """The call ordinal from which it has been held, while it is held."""
    last_kept_call: int | None = None
    lost_at_call: int | None = None
    lost_by: str | None = None
    recoverable: str | None = None


@dataclass
class Follow:
    """One conversation under one strategy setting: the observer's state."""

    strategy: str
    facts: Sequence[Tracked]
    first_ordinals: Sequence[int | None]
    matcher: Matcher
    last_call: int | None
    states: list[FactState] = field(default_factory=list)
    order: list[Mapping[str, Any]] = field(default_factory=list)
    """The messages of the previous call."""
    message_facts: dict[int, frozenset[int]] = field(default_factory=dict)
    counts: list[int] = field(default_factory=list)
    ordinal: int = 0
    calls: list[int | None] = field(default_factory=list)
    rows: list[tuple[int | None, int, int]] = field(default_factory=list)
    """Per call: (call, facts seen, facts kept)."""
    final: list[dict[str, Any]] | None = None
    """The messages of the last call (what a probe is asked after)."""

    def __post_init__(self) -> None:
        self.states = [FactState() for _ in self.facts]
        self.counts = [0] * len(self.facts)
        self._seen = sorted(o for o in self.first_ordinals if o is not None)
        self._arriving: dict[int, list[int]] = {}
        for index, ordinal in enumerate(self.first_ordinals):
            if ordinal is not None:
                self._arriving.setdefault(ordinal, []).append(index)
        self._held_now = 0

    def __call__(self, replayed: ReplayedCall) -> None:
        """Follow the facts into the call `replayed`: which arrived, which left and why."""
        k, call = self.ordinal, replayed.call
        messages = replayed.messages
        touched = self._recount(*self._diff(messages, replayed.changes))
        for index in touched:
            held_before = self.states[index].since is not None
            if self.counts[index] and not held_before:
                self._arrive(index, k)
            elif not self.counts[index] and held_before:
                self._leave(index, k, call, replayed)
        self._cut_before_sent(k, call, replayed)
        self._note_files(replayed)
        seen = bisect.bisect_right(self._seen, k)
        self.rows.append((call, seen, min(self._held_now, seen)))
        self.calls.append(call)
        if call is not None and call == self.last_call:
            self.final = list(messages)
        self.ordinal += 1

    def _recount(self, gone: list[Mapping[str, Any]], came: list[Mapping[str, Any]]) -> set[int]:
        """Count the messages holding each fact again for the messages gone and come; the
        facts whose count changed."""
        touched: set[int] = set()
        for message in gone:
            for index in self.message_facts.pop(id(message)):
                self.counts[index] -= 1
                touched.add(index)
        for message in came:
            found = self.matcher.in_message(message)
            self.message_facts[id(message)] = found
            for index in found:
                self.counts[index] += 1
                touched.add(index)
        return touched

    def _cut_before_sent(self, k: int, call: int | None, replayed: ReplayedCall) -> None:
        """Facts first seen at this call but not in its context: lost before ever sent."""
        for index in self._arriving.get(k, []):
            if not self.counts[index] and self.states[index].lost_at_call is None:
                self.states[index].lost_at_call = call
                self.states[index].lost_by = _culprit(self.facts[index], replayed.changes)

    def _diff(
        self, messages: Sequence[Mapping[str, Any]], changes: Sequence[Any]
    ) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
        """(messages gone, messages come) since the previous call, `order` brought up to date
        (it holds them: their ids stay theirs until the next call). Usually only the end grew
        and the blocks that `MicroCompacted` events name were rewritten: then only those are
        looked at, and `order` changes in their places (a copy of the whole context per call
        would grow with the history); otherwise (a replacement, anything unexpected) the two
        lists are compared by identity."""
        old = self.order
        n = len(old)
        fast = (
            n
            and len(messages) >= n
            and messages[0] is old[0]
            and messages[n - 1] is old[n - 1]
            and all(isinstance(e, MicroCompacted) for e in changes)
        )
        if fast:
            positions = {edit.index for e in changes for edit in e.edits if edit.index < n}
            changed = [i for i in positions if messages[i] is not old[i]]
            gone = [old[i] for i in changed]
            came = [messages[i] for i in changed]
            for i in changed:
                old[i] = messages[i]
            added = messages[n:]
            old.extend(added)
            return gone, came + list(added)
        self.order = list(messages)
        now = dict(zip(map(id, messages), messages, strict=True))
        before = dict(zip(map(id, old), old, strict=True))
        return (
            [before[key] for key in before.keys() - now.keys()],
            [now[key] for key in now.keys() - before.keys()],
        )

    def _arrive(self, index: int, k: int) -> None:
        self.states[index].since = k
        self._held_now += 1

    def _leave(self, index: int, k: int, call: int | None, replayed: ReplayedCall) -> None:
        state = self.states[index]
        if state.since is not None:
            state.kept_calls += k - state.since
            state.last_kept_call = self.calls[k - 1] if k else None
        state.since = None
        self._held_now -= 1
        first = self.first_ordinals[index]
        if state.lost_at_call is None and first is not None and k >= first:
            state.lost_at_call = call
            state.lost_by = _culprit(self.facts[index], replayed.changes)

    def _note_files(self, replayed: ReplayedCall) -> None:
        """Facts in a tool output a strategy saved to a file: recoverable from that file."""
        for event in replayed.changes:
            if not isinstance(event, MicroCompacted) or event.strategy != LargeOutputs.name:
                continue
            for edit in event.edits:
                saved = _SAVED_TO.search(block_text(edit.block))
                tool_id = edit.block.get("tool_use_id")
                if saved is None or not tool_id:
                    continue
                for fact, state in zip(self.facts, self.states, strict=True):
                    if tool_id in fact.tool_use_ids:
                        state.recoverable = saved.group(1)

    def finish(self) -> None:
        """Close the facts still held at the last call."""
        end = self.ordinal
        for state in self.states:
            if state.since is not None:
                state.kept_calls += end - state.since
                state.last_kept_call = self.calls[-1] if self.calls else None

    def kept_at_end(self, index: int) -> bool:
        return self.states[index].since is not None

    def span(self, index: int) -> int:
        """Calls from the fact's first call to the end."""
        first = self.first_ordinals[index]
        return 0 if first is None else max(self.ordinal - first, 0)


def _culprit(fact: Tracked, changes: Sequence[Any]) -> str | None:
    """The strategy whose change since the previous call removed `fact`: one that rewrote a
    block of a tool call holding it, else the last that replaced the history, else the last
    change."""
    for event in reversed(changes):
        if isinstance(event, MicroCompacted) and fact.tool_use_ids & set(event.cleared_ids):
            return event.strategy
    for event in reversed(changes):
        if isinstance(event, CompactionFinished):
            return event.strategy
    return changes[-1].strategy if changes else None
