"""The measures of `after_compaction`, per conversation (a session's main conversation or one
subagent's), from the loaded frames.

A conversation's actions are the tool calls of the responses its model calls produced, in call
order (a message a compaction carried into the new history is not acted again). A call's
action took in its result; a read or change counts only when its result is not an error. A
compaction is a boundary between the epoch it compacted and the next (within a segment): the
calls before it since the previous compaction are its *before* stretch, those after it until
the next compaction or the end its *after* stretch.

- A read after the boundary is *repeated* when every file it reads was read before the
  boundary and not changed since that read (up to this one); a command is *repeated* when the
  same tool with the same input (as canonical JSON) was called before the boundary. In the
  before stretch (the baseline), the same tests are made against everything earlier in the
  conversation. `reacquired_tokens`: the tokens (characters / 4) of the results of the calls
  that were a repeated read or a repeated command.
- A *new* action changes a file or reads one not read before the boundary; `calls_to_resume`
  counts the calls after the boundary up to and including the first with a new action (1: the
  first call already did new work; `<NA>`: none did).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.after_compaction.actions import Effect, effect
from evo_magic.measure import estimate_tokens

if TYPE_CHECKING:
    from evo_magic.analysis.transcripts import Transcripts

COUNTS = ("calls", "reads", "repeated_reads", "commands", "repeated_commands", "reacquired_tokens")
"""What each stretch counts."""
CONVERSATION = ("source", "session_id", "agent_id")


@dataclass
class Action:
    """One tool call, what it did, and what its result cost to take in."""

    effect: Effect
    ok: bool
    result_chars: int


@dataclass
class Call:
    """One model call of a conversation and the actions of the response it produced."""

    call: int
    segment: int
    epoch: int
    context_tokens: Any
    actions: list[Action] = field(default_factory=list)


@dataclass
class Tally:
    """What one action or stretch did again."""

    calls: int = 0
    reads: int = 0
    repeated_reads: int = 0
    commands: int = 0
    repeated_commands: int = 0
    reacquired_tokens: int = 0

    def add(self, other: Tally) -> None:
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Memory:
    """What a conversation did so far: the last read and change of each path, and the commands
    made. `frozen()` is what it had read and run at a boundary (changes after it still count)."""

    def __init__(self) -> None:
        self.read: dict[str, int] = {}
        self.written: dict[str, int] = {}
        self.keys: set[str] = set()
        self.position = 0

    def frozen(self) -> tuple[dict[str, int], set[str]]:
        return dict(self.read), set(self.keys)

    def assess(self, action: Action, read: dict[str, int], keys: set[str]) -> tuple[Tally, bool]:
        """`action` judged against `read` and `keys` (all before it, or those of a boundary)
        and the changes made so far: its tally, and whether it was new work."""
        reads = action.effect.reads if action.ok else ()
        writes = action.effect.writes if action.ok else ()
        repeated_read = bool(reads) and all(
            p in read and self.written.get(p, -1) < read[p] for p in reads
        )
        repeated_command = action.effect.key in keys
        tally = Tally(
            commands=1,
            reads=int(bool(reads)),
            repeated_reads=int(repeated_read),
            repeated_commands=int(repeated_command),
            reacquired_tokens=estimate_tokens(action.result_chars)
            if repeated_read or repeated_command
            else 0,
        )
        return tally, bool(writes) or any(p not in read for p in reads)

    def remember(self, action: Action) -> None:
        self.position += 1
        if action.ok:
            for path in action.effect.reads:
                self.read[path] = self.position
            for path in action.effect.writes:
                self.written[path] = self.position
        self.keys.add(action.effect.key)


def conversations(t: Transcripts) -> Iterator[tuple[tuple[Any, ...], list[Call]]]:
    """Each conversation of `t` (source, session, agent) and its calls in order, with their
    actions."""
    import pandas as pd

    calls = t.calls
    calls = calls[~calls["abandoned"].fillna(False).astype(bool)]
    if calls.empty:
        return
    blocks = t.blocks
    blocks = blocks[~blocks["abandoned"].fillna(False).astype(bool)]
    keys = [*CONVERSATION, "segment", "epoch", "message_index"]
    uses = blocks[blocks["block_type"] == "tool_use"][[*keys, "tool_name", "tool_use_id", "text"]]
    results = blocks[blocks["block_type"] == "tool_result"]
    results = results.drop_duplicates([*CONVERSATION, "tool_use_id"])[
        [*CONVERSATION, "tool_use_id", "is_error", "chars"]
    ]
    uses = uses.merge(results, on=[*CONVERSATION, "tool_use_id"], how="left", sort=False)
    by_message: dict[tuple[Any, ...], list[Action]] = {}
    for row in uses.itertuples(index=False):
        key = tuple(_plain(getattr(row, k)) for k in keys)
        ok = _plain(row.is_error) is not True
        chars = 0 if pd.isna(row.chars) else int(row.chars)
        by_message.setdefault(key, []).append(
            Action(effect(str(row.tool_name), None if pd.isna(row.text) else row.text), ok, chars)
        )
    ordered = calls.sort_values([*CONVERSATION, "segment", "call"], kind="stable")
    current: tuple[Any, ...] | None = None
    found: list[Call] = []
    for row in ordered[[*keys, "call", "context_sent_tokens"]].itertuples(index=False):
        conversation = tuple(_plain(getattr(row, k)) for k in CONVERSATION)
        if conversation != current:
            if current is not None:
                yield current, found
            current, found = conversation, []
        message = tuple(_plain(getattr(row, k)) for k in keys)
        found.append(
            Call(
                int(row.call),
                int(row.segment),
                int(row.epoch),
                _plain(row.context_sent_tokens),
                by_message.pop(message, []),
            )
        )
    if current is not None:
        yield current, found


def _plain(value: Any) -> Any:
    """A frame's value as plain Python (`<NA>` and NaN as None, numpy scalars as Python's)."""
    import pandas as pd

    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and value != value:
        return None
    return value.item() if hasattr(value, "item") else value
