"""Replay's work counted, not timed (speed lives in benchmarks/): building the conversations
of many sessions turns each frame into Python rows once, whatever the number of sessions and
of their conversations (subagents)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.claude_code_session import copy_session, write_session

from evo_magic.analysis import conversation, load_transcripts
from evo_magic.analysis.replay import recordings


def _sessions(root: Path, count: int) -> Path:
    """`count` copies of a generated session (a main conversation and a subagent, a
    compaction, a rewind), each under a new session id."""
    source = write_session(root / "source", 40)
    folder = root / f"copies-{count}"
    for _ in range(count):
        new = str(uuid.uuid4())
        copy_session(source, folder, new)
    return folder


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The frames turned into rows (`DataFrame.itertuples`, still run) from now on, by size."""
    seen: list[int] = []
    itertuples = pd.DataFrame.itertuples

    def counted(self: pd.DataFrame, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(self))
        return itertuples(self, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "itertuples", counted)
    return seen


def test_each_frame_is_turned_into_rows_once_for_every_session(
    tmp_path: Path, conversions: list[int]
) -> None:
    seen = []
    for count in (2, 6):
        t = load_transcripts(_sessions(tmp_path, count))
        frames = [f for f in (t.blocks, t.calls, t.compactions, t.parts) if len(f)]
        conversions.clear()
        found = recordings(t)
        # Two conversations per session (the main one and its subagent), both replayed.
        assert len(found) == 2 * count
        assert {r.agent_id is None for r in found} == {True, False}
        # One conversion of each non-empty frame for all the sessions and their
        # conversations: building a conversation converted every frame again for each of
        # them (about ten per conversation).
        assert sorted(conversions) == sorted(len(f) for f in frames)
        seen.append(len(conversions))
    assert seen[0] == seen[1]


def test_one_conversation_asked_alone_is_built_as_replay_builds_it(tmp_path: Path) -> None:
    t = load_transcripts(_sessions(tmp_path, 2))
    found = recordings(t)
    assert len(found) == 4
    for recording in found:
        alone = list(conversation(t, recording.session_id, recording.agent_id))
        # Replay may restore what the frames lack (an evo_magic compaction block); these
        # Claude Code sessions have none, so the items are the same.
        assert alone == recording.items
