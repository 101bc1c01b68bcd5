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


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The prefix keys hashed (`prefix._next_key`, still run) from now on."""
    from evo_magic.prompt_cache import prefix

    seen: list[int] = []
    next_key = prefix._next_key

    def counted(previous: bytes, encoded: str) -> bytes:
        seen.append(len(encoded))
        return next_key(previous, encoded)

    monkeypatch.setattr(prefix, "_next_key", counted)
    return seen


def test_settings_that_never_compact_hash_no_prefix_of_their_own(
    tmp_path: Path, hashed: list[int]
) -> None:
    from evo_magic import replay
    from evo_magic.strategies import ClearToolUses

    t = load_transcripts(write_session(tmp_path / "session", 40))
    work, frames = {}, {}
    for idle in (1, 4):
        # A trigger no prompt reaches: each of these settings sends what "none" sends.
        strategies = {"none": [], **{f"idle-{i}": [ClearToolUses(trigger_tokens=10**9)]
                                     for i in range(idle)}}  # fmt: skip
        hashed.clear()
        calls = replay(t, strategies, model="claude-sonnet-4-5").calls
        work[idle], frames[idle] = len(hashed), calls
    # Every key of the conversation is hashed once for all its runs: three more settings
    # that never compact hash nothing (each hashed every block of its own before).
    assert work[1] > 0
    assert work[4] == work[1]
    # ...and their rows are "none"'s, call for call.
    calls = frames[4]
    none = calls[calls["strategy"] == "none"].drop(columns="strategy").reset_index(drop=True)
    for i in range(4):
        idle = calls[calls["strategy"] == f"idle-{i}"]
        pd.testing.assert_frame_equal(idle.drop(columns="strategy").reset_index(drop=True), none)
