"""Replay over a lake opens only the session's own files: a lake's `file` column is data, and a
changed one makes replay refuse rather than read settings or compaction records elsewhere."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.fake_api import FakeAnthropic
from support.responders import offline_responder

from evo_magic import load_transcripts, replay
from evo_magic.analysis.errors import TranscriptError
from evo_magic.analysis.lake_transcripts import LakeTranscripts
from evo_magic.analysis.transcripts import Transcripts
from evo_magic.compact.policy import CompactPolicy
from evo_magic.models import AnthropicModel
from evo_magic.session import Session


@pytest.fixture
def session_file(workspace: Path) -> Path:
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, policy=CompactPolicy(context_limit=9_000)) as s:
            s.ask("Survey this project: what does it do, and where are the TODOs?")
            s.ask("Now compact yourself.")
    return s.directory / "session.jsonl"


def _retarget(lake: Path, old: str, new: str) -> int:
    """Every Parquet file of the lake with `file` = `old` rewritten to `new` (as an attacker
    with write access to the lake would); how many files changed."""
    changed = 0
    for path in lake.rglob("*.parquet"):
        table = pq.read_table(path)
        if "file" not in table.column_names:
            continue
        column = table.column("file").cast(pa.string()).to_pylist()
        if old not in column:
            continue
        values = pa.array([new if v == old else v for v in column]).dictionary_encode()
        values = values.cast(table.schema.field("file").type)
        table = table.set_column(table.column_names.index("file"), "file", values)
        pq.write_table(table, path)
        changed += 1
    return changed


def test_a_lake_naming_a_file_outside_the_session_makes_replay_refuse(
    session_file: Path, tmp_path: Path
):
    lake = tmp_path / "lake"
    load_transcripts(session_file.parent, lake=lake)
    outside = tmp_path / "elsewhere" / "session.jsonl"
    outside.parent.mkdir()
    outside.write_bytes(session_file.read_bytes())  # records replay would take as the session's
    assert _retarget(lake, str(session_file), str(outside)) >= 3
    t = LakeTranscripts(lake, Transcripts)
    with pytest.raises(TranscriptError, match="not one of the files it was loaded from"):
        replay(t.session(t.session_ids()[0]), {"recorded": "recorded"})


def test_replay_never_waits_on_a_fifo_in_place_of_the_session_file(
    session_file: Path, tmp_path: Path
):
    lake = tmp_path / "lake"
    t = load_transcripts(session_file.parent, lake=lake)
    whole = replay(t, {"recorded": "recorded"})
    session_file.unlink()
    os.mkfifo(session_file)  # a writer waiting on it would feed replay any record
    opened = threading.Event()

    def writer() -> None:
        with open(session_file, "w") as end:  # blocks until someone opens it for reading
            opened.set()
            end.write("{}\n")

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        with pytest.raises(TranscriptError, match="not a regular file"):
            replay(t.session(t.session_ids()[0]), {"recorded": "recorded"})
        assert not opened.is_set()
    finally:
        with open(session_file) as end:  # release the writer
            end.read()
        thread.join(timeout=5)
    assert len(whole.calls) > 0
