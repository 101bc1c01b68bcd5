"""A sweep over a lake in this process reads its sessions a batch at a time: each batch's frames
are read and turned into pandas once, then each session is cut out of them. The sessions are
the ones `LakeTranscripts.session` gives, and the work grows with the batches, not the
sessions."""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from support.claude_code_session import SID, copy_session, write_session

from evo_magic import load_transcripts, replay
from evo_magic.analysis import lake_index, lake_sessions
from evo_magic.analysis.lake_sessions import READ, LakeBatches, LakeSession
from evo_magic.analysis.sources import session_units, unit_session
from evo_magic.strategies import ObservationMasking

STRATEGIES = {"recorded": "recorded", "none": [], "masking": [ObservationMasking(3)]}


def _corpus(root: Path, made: Path, count: int) -> Path:
    """`count` Claude Code sessions (each with a subagent's file) under `root`."""
    for seed in range(count):
        project = write_session(made / f"cc{seed}", calls=8, seed=seed)
        new_id = SID[:-4] + f"{seed:04d}"
        copy_session(project, root, new_id)
    return root


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Frames turned from the lake's Parquet into pandas, by name (counted, then done)."""
    counted: Counter[str] = Counter()
    real = lake_index.to_frame

    def counting(name, table):
        counted[name] += 1
        return real(name, table)

    monkeypatch.setattr(lake_index, "to_frame", counting)
    return counted


def _lake(tmp_path: Path, count: int):
    corpus = _corpus(tmp_path / f"corpus{count}", tmp_path / f"made{count}", count)
    return corpus, load_transcripts(corpus, lake=tmp_path / f"lake{count}")


def test_each_session_of_a_batch_is_the_session_the_lake_reads_alone(tmp_path: Path):
    _, t = _lake(tmp_path, 4)
    batched = LakeBatches.of(t)
    assert len(batched.order) == 1  # four small sessions: one batch
    for sid in t.session_ids():
        mine, alone = batched.session(sid), t.session(sid)
        for name in (*READ, "events"):
            pd.testing.assert_frame_equal(getattr(mine, name), getattr(alone, name))
        assert mine.files == alone.files
    assert batched.reads == 1


def test_sessions_read_in_order_read_each_batch_once(tmp_path: Path):
    _, t = _lake(tmp_path, 4)
    batched = LakeBatches.of(t, limit=1)  # every session a batch of its own
    assert [len(ids) for ids in batched.order] == [1, 1, 1, 1]
    for sid in t.session_ids():
        batched.session(sid)
        batched.session(sid)  # the batch held is not read again
    assert batched.reads == 4
    with pytest.raises(KeyError, match="no session 'nope'"):
        batched.session("nope")


def test_replay_over_a_lake_converts_per_batch_not_per_session(
    tmp_path: Path, conversions: Counter[str], monkeypatch: pytest.MonkeyPatch
):
    counts = {}
    for count in (3, 6):
        corpus, t = _lake(tmp_path, count)
        whole = replay(corpus, STRATEGIES, model="claude-sonnet-4-5")
        conversions.clear()
        over = replay(t, STRATEGIES, model="claude-sonnet-4-5", progress=False)
        counts[count] = sum(conversions.values())
        assert conversions["events"] == 0  # a Claude Code replay never needs them
        pd.testing.assert_frame_equal(over.calls, whole.calls)
        pd.testing.assert_frame_equal(over.totals, whole.totals)
    assert counts[6] == counts[3]  # one batch each: twice the sessions, the same work
    monkeypatch.setattr(lake_sessions, "BATCH_BYTES", 1)  # a batch per session
    t = load_transcripts(corpus, lake=tmp_path / "lake6")
    conversions.clear()
    replay(t, STRATEGIES, model="claude-sonnet-4-5", progress=False)
    assert sum(conversions.values()) == counts[6] + (6 - 1) * len(READ)


def test_a_lake_session_sent_to_another_process_is_its_lake_and_id(tmp_path: Path):
    _, t = _lake(tmp_path, 2)
    units = session_units(t)
    assert all(isinstance(unit.payload, LakeSession) for unit in units)
    sent = pickle.loads(pickle.dumps(units[1].payload))
    assert sent == (str(t.lake), units[1].key)
    here, there = unit_session(units[1].payload), unit_session(sent)
    for name in READ:
        pd.testing.assert_frame_equal(getattr(here, name), getattr(there, name))


def test_a_sweep_over_a_lake_takes_the_sessions_of_the_transcripts_it_is_given(tmp_path: Path):
    # The sweep opens the lake afresh (as a worker does) but replays the sessions of the
    # transcripts it was given: taking the fresh lake's replayed every session of the lake
    # (2,000 where a benchmark asked for 50).
    _, t = _lake(tmp_path, 4)
    keep = t.session_ids()[:2]
    t.index.by_session = {sid: t.index.by_session[sid] for sid in keep}
    units = session_units(t)
    assert [unit.key for unit in units] == keep
    assert [unit_session(unit.payload).session_ids() for unit in units] == [[sid] for sid in keep]
