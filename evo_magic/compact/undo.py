"""Undoing the last full compaction: the history it replaced, and the CompactState as it was,
put back whole (Roo Code and Cline restore a checkpoint; opencode and hermes-agent users ask
for it).

The compactor remembers, at each full compaction it adopts (a strategy's, the server's, or a
recorded one replay applies), the messages it replaced and a copy of the state (`Undoable`);
`Compactor.undo` swaps them back in (`restore`) as the next epoch and records it as a
compaction of its own (strategy "undo", trigger "user"), so the loader and replay see a
replacement where it happened. Only the last compaction can be undone, once: the one before
it is no longer remembered (its snapshot stays on disk).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

from evo_magic.compact.state import CompactState
from evo_magic.events import CompactionFinished
from evo_magic.history import History
from evo_magic.messages import Message
from evo_magic.prompt_cache import PrefixTracker

UNDO = "undo"
"""The strategy name of the record an undo writes."""


@dataclass(frozen=True)
class Undoable:
    """What the last full compaction replaced: the messages (the dicts themselves, never
    changed in place), the state before it, and the snapshot that holds them on disk."""

    messages: tuple[Message, ...]
    state: CompactState
    snapshot: str


def remember(messages: list[Message], state: CompactState, snapshot: str) -> Undoable:
    """What undoing the compaction about to replace `messages` restores."""
    return Undoable(tuple(messages), copy.deepcopy(state), snapshot)


def restore(
    history: History, cache: PrefixTracker | None, undoable: Undoable | None
) -> tuple[CompactionFinished, CompactState]:
    """Put back in `history` the messages the last full compaction replaced, byte for byte
    (the next epoch; `cache` told the prompt was replaced); the event that records it and the
    state to continue with. ValueError, nothing changed, when there is nothing to undo."""
    if undoable is None:
        raise ValueError(
            "there is no compaction to undo (none since the start, the last reset or undo)"
        )
    started = time.perf_counter()
    before = history.size()
    history.replace(undoable.messages)
    if cache is not None:
        cache.replaced()
    event = CompactionFinished(
        trigger="user",
        focus=None,
        before=before,
        after=history.size(),
        success=True,
        duration=time.perf_counter() - started,
        snapshot_path=undoable.snapshot or None,
        strategy=UNDO,
        layer="on_request",
    )
    return event, copy.deepcopy(undoable.state)
