"""The rows conversations are built from: each frame a conversation reads (blocks, calls,
compactions, parts) turned into Python rows once and grouped by conversation (session, agent)
in the same pass.

Building conversations one at a time from the frames turned a frame into rows for each of
them (`itertuples`), and that costs per column, not per row: on a session's small frames it
was most of a replay. Here a frame is converted once for every conversation it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from evo_magic.analysis.transcripts import Transcripts

Key = tuple[str, str | None]
"""A conversation: (session_id, agent_id), agent_id None for the main one."""


@dataclass(frozen=True)
class ConversationRows:
    """Per frame, the rows of each conversation in the frame's order (abandoned ones included:
    what builds a conversation leaves them out). A row is a named tuple of the frame's columns,
    its values as `DataFrame.itertuples` gives them."""

    blocks: dict[Key, list[Any]]
    calls: dict[Key, list[Any]]
    compactions: dict[Key, list[Any]]
    parts: dict[Key, list[Any]]

    @classmethod
    def of(cls, t: Transcripts) -> ConversationRows:
        """The rows of every conversation of `t`: each frame converted once."""
        return cls.of_frames(t.blocks, t.calls, t.compactions, t.parts)

    @classmethod
    def of_frames(
        cls,
        blocks: pd.DataFrame,
        calls: pd.DataFrame,
        compactions: pd.DataFrame,
        parts: pd.DataFrame,
    ) -> ConversationRows:
        return cls(
            blocks=by_conversation(blocks),
            calls=by_conversation(calls),
            compactions=by_conversation(compactions),
            parts=by_conversation(parts),
        )

    def conversations(self) -> list[Key]:
        """Every conversation with blocks, in the order its first block was read."""
        return list(self.blocks)


def by_conversation(frame: pd.DataFrame) -> dict[Key, list[Any]]:
    """The rows of `frame` per (session_id, agent_id), in the frame's order: one conversion
    of the whole frame (none when it is empty)."""
    found: dict[Key, list[Any]] = {}
    if not len(frame):
        return found
    for row in frame.itertuples(index=False, name="Row"):
        agent = row.agent_id
        key = (row.session_id, None if pd.isna(agent) else agent)
        found.setdefault(key, []).append(row)
    return found


def active(rows: list[Any]) -> list[Any]:
    """The rows not on an abandoned branch (an unknown mark counts as not abandoned)."""
    return [row for row in rows if pd.isna(row.abandoned) or not bool(row.abandoned)]
