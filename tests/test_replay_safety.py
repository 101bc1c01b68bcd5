"""A transcript is data: replaying a session file never imports or calls anything it names, and
reads no path outside that session's folder."""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path

import pytest
from support.example_strategy import KeepLastTurns
from support.fake_api import FakeAnthropic
from support.responders import offline_responder

from evo_magic import load_transcripts, replay
from evo_magic.analysis.replay import ReplayWarning
from evo_magic.analysis.replay.recording import own_file
from evo_magic.compact.policy import CompactPolicy
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import MicroCompact
from evo_magic.strategies.registry import NotRebuildable, describe, rebuild

ASKS = ("Survey this project: what does it do, and where are the TODOs?", "Now compact yourself.")


@pytest.fixture
def session_file(workspace: Path) -> Path:
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, policy=CompactPolicy(context_limit=9_000)) as s:
            for ask in ASKS:
                s.ask(ask)
    return s.directory / "session.jsonl"


def rewrite_first(path: Path, change) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    change(record)
    path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n", encoding="utf-8")


def test_a_strategy_a_file_names_is_never_run(session_file: Path, tmp_path: Path):
    marker = tmp_path / "MARKER"
    hostile = {
        "name": "evil",
        "when": "every_call",
        "class": "os.system",
        "params": {"command": f"touch {marker}"},
    }
    rewrite_first(session_file, lambda record: record["strategies"].append(hostile))
    t = load_transcripts(session_file)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = replay(t, {"none": [], "recorded": "recorded"})
    assert not marker.exists()
    # "none" needs nothing rebuilt: it is replayed; "recorded" says why it is skipped.
    assert set(r.calls["strategy"]) == {"none"} and len(r.calls) == len(t.calls)
    said = [str(w.message) for w in caught if issubclass(w.category, ReplayWarning)]
    assert len(said) == 1 and "'recorded'" in said[0] and "os.system" in said[0]
    assert "trust=True" in said[0]
    assert r.totals.set_index("strategy").loc["recorded", "calls"] == 0


def test_rebuild_makes_registered_strategies_only():
    micro = MicroCompact(keep_recent=5, cache_aware=True)
    assert describe(rebuild(describe(micro))) == describe(micro)
    with pytest.raises(NotRebuildable, match="not a registered strategy"):
        rebuild(describe(KeepLastTurns(n=3)))
    trusted = rebuild(describe(KeepLastTurns(n=3)), trust=True)
    assert isinstance(trusted, KeepLastTurns) and trusted.n == 3
    # A registered name with another class is not that strategy.
    forged = {**describe(micro), "class": "os.system", "params": {"command": "true"}}
    with pytest.raises(NotRebuildable):
        rebuild(forged)
    with pytest.raises(NotRebuildable, match="not names"):
        rebuild({**describe(micro), "params": {"**x": 1}})


def test_paths_a_record_names_are_read_only_inside_the_session_folder(tmp_path: Path):
    folder = tmp_path / "session"
    (folder / "snapshots").mkdir(parents=True)
    log = folder / "session.jsonl"
    inside = folder / "snapshots" / "compaction-0001.jsonl"
    inside.write_text("{}\n")
    outside = tmp_path / "secret.jsonl"
    outside.write_text("{}\n")
    (folder / "snapshots" / "link.jsonl").symlink_to(outside)
    assert own_file(log, str(inside)) == inside.resolve()
    assert own_file(log, "snapshots/compaction-0001.jsonl") == inside.resolve()
    # Recorded on another machine: found at the same place under this folder.
    assert own_file(log, "/elsewhere/old/snapshots/compaction-0001.jsonl") == inside.resolve()
    for named in (str(outside), "../secret.jsonl", "snapshots/link.jsonl", "/etc/passwd", ""):
        assert own_file(log, named) is None, named


def test_replay_never_opens_a_snapshot_outside_the_folder(session_file: Path, tmp_path: Path):
    """A compaction whose snapshot_path names a pipe outside the folder: had replay opened it,
    the writer waiting on the other end would have got in."""
    pipe = tmp_path / "outside.fifo"
    os.mkfifo(pipe)
    lines = session_file.read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    compactions = [r for r in records if r.get("kind") == "compaction" and r.get("success")]
    assert compactions
    for record in compactions:
        record["snapshot_path"] = str(pipe)
    session_file.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    opened = threading.Event()

    def writer() -> None:
        with open(pipe, "w") as end:  # blocks until someone opens the pipe for reading
            opened.set()
            end.write('{"role": "user", "content": "x"}\n')

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        r = replay(session_file, {"recorded": "recorded"})
        assert len(r.calls) > 0
        assert not opened.is_set()
    finally:
        with open(pipe) as end:  # release the writer
            end.read()
        thread.join(timeout=5)
