"""A load of several batches parses the next batch's records in a thread while it reads the one
before: the frames, warnings and counts are those of a load of one batch, the statements run
ahead are the ones the batches' reads then take (not run twice), and the warning filters are
left as they were."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.claude_code_session import SID, copy_session, write_session

from evo_magic import load_transcripts
from evo_magic.analysis import loader, transcripts
from evo_magic.analysis.errors import TranscriptWarning

FRAMES = ("blocks", "parts", "calls", "compactions", "events")


def _sessions(root: Path, count: int) -> Path:
    """`count` Claude Code sessions of their own ids (a subagent and a compaction each), each
    in a folder `s<n>` under `root`."""
    for n in range(count):
        made = write_session(root.parent / f"made-{root.name}-{n}", calls=8, seed=n)
        copy_session(made, root / f"s{n}", SID[:-8] + f"{n:08d}")
    return root


def _folder(root: Path) -> Path:
    """Four sessions, one with a line nested too deep for the readers and one with a torn
    last line."""
    _sessions(root, 4)
    files = sorted(p for p in root.rglob("*.jsonl") if "subagents" not in p.parts)
    with files[1].open("a") as handle:
        handle.write('{"type": "user", "message": {"content": ' + "[" * 300 + "]" * 300 + "}}\n")
    with files[2].open("a") as handle:
        handle.write('{"type": "user", "message": {"con')
    return root


def _load(path: Path) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = load_transcripts(path)
    return t, [f"{w.category.__name__}: {w.message}" for w in caught]


def _records_by_thread(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of `read_json` statements of records run, by the thread that ran them."""
    counts = {"calling": 0, "ahead": 0}
    records = loader.Engine.records

    def counted(self: loader.Engine, *args: Any) -> Any:
        main = threading.current_thread() is threading.main_thread()
        counts["calling" if main else "ahead"] += 1
        return records(self, *args)

    monkeypatch.setattr(loader.Engine, "records", counted)
    return counts


def test_a_load_of_several_batches_gives_the_frames_and_warnings_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path / "sessions")
    whole, said = _load(folder)
    assert len(transcripts._batches(whole.files)) == 1  # smaller than a batch
    assert any("nested too deep" in w for w in said) and any("torn" in w for w in said)

    counts = _records_by_thread(monkeypatch)
    monkeypatch.setattr(transcripts, "BATCH_BYTES", 1)  # a batch per session
    batches = len(transcripts._batches(whole.files))
    assert batches == 4
    batched, said_batched = _load(folder)

    for name in FRAMES:
        pd.testing.assert_frame_equal(getattr(batched, name), getattr(whole, name), obj=name)
    assert batched.skipped == whole.skipped and batched.files == whole.files
    assert sorted(said_batched) == sorted(said)  # DuckDB's own copy warning not among them
    # Every batch's records parsed ahead, in the thread, once; none again in the calling one.
    assert counts == {"ahead": batches, "calling": 0}


def test_a_load_of_one_batch_starts_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sessions(tmp_path / "one", 1)
    counts = _records_by_thread(monkeypatch)
    load_transcripts(tmp_path / "one")
    assert counts == {"calling": 1, "ahead": 0}


def test_a_load_leaves_the_warning_filters_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _sessions(tmp_path / "sessions", 3)
    monkeypatch.setattr(transcripts, "BATCH_BYTES", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # DuckDB's copy warning would raise here
        before = list(warnings.filters)
        t = load_transcripts(folder)
        assert warnings.filters == before
    assert len(t.calls)


def test_a_failure_in_a_batch_read_ahead_is_raised_and_nothing_is_left_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _sessions(tmp_path / "sessions", 3)
    monkeypatch.setattr(transcripts, "BATCH_BYTES", 1)
    records = loader.Engine.records

    def failing(self: loader.Engine, sources: list[Any], *args: Any) -> Any:
        if any(source.path.parent.name == "s1" for source in sources):
            raise OSError("the disk went away")
        return records(self, sources, *args)

    monkeypatch.setattr(loader.Engine, "records", failing)
    before = {thread.name for thread in threading.enumerate()}
    with pytest.raises(OSError, match="the disk went away"):
        load_transcripts(folder)
    after = {thread.name for thread in threading.enumerate()}
    assert not {name for name in after - before if name.startswith("evo-magic")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TranscriptWarning)
        monkeypatch.setattr(loader.Engine, "records", records)
        assert len(load_transcripts(folder).calls)  # the next load is not disturbed
