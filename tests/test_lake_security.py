"""A lake is data: the paths it names stay inside it, a damaged part is read again or reported,
and builds of one lake at the same time wait for each other."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
from support.claude_code_session import SID, copy_session, write_session

from evo_magic import load_transcripts
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.lake_transcripts import LakeTranscripts
from evo_magic.analysis.transcripts import Transcripts


def _corpus(tmp: Path, count: int = 3) -> Path:
    """`count` Claude Code sessions (each with a subagent's file) under `tmp/corpus`."""
    root = tmp / "corpus"
    for seed in range(count):
        project = write_session(tmp / f"made{seed}", calls=12, seed=seed)
        new_id = SID[:-4] + f"{seed:04d}"
        copy_session(project, root, new_id)
    return root


def _manifest(lake: Path) -> dict:
    return json.loads((lake / "manifest.json").read_text())


def _rows(frame: pd.DataFrame) -> list[tuple]:
    keys = ["session_id", "agent_id", "file", "line", "block_index"]
    keys = [k for k in keys if k in frame.columns]
    rows = frame[keys].astype(object).itertuples(index=False, name=None)
    return sorted(tuple("" if pd.isna(v) else str(v) for v in row) for row in rows)


def _a_part(lake: Path, frame: str) -> str:
    """The name (relative to the lake) of one group's part of `frame`."""
    for entry in _manifest(lake)["groups"].values():
        for relative in entry["written"]:
            if relative.startswith(f"{frame}/"):
                return relative
    raise AssertionError(f"no part of {frame}")


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, Transcripts]:
    corpus = _corpus(tmp_path)
    lake = tmp_path / "lake"
    load_transcripts(corpus, lake=lake).calls  # noqa: B018 (writes the small frames' file)
    return corpus, lake, load_transcripts(corpus)


def test_a_manifest_entry_leading_outside_the_lake_is_never_read(built, tmp_path: Path):
    corpus, lake, whole = built
    outside = tmp_path / "outside"
    outside.mkdir()
    part = _a_part(lake, "blocks")
    (outside / "x.parquet").write_bytes((lake / part).read_bytes())  # rows that are not its own
    manifest = _manifest(lake)
    entry = next(iter(manifest["groups"].values()))
    entry["written"].append("blocks/../../outside/x.parquet")
    entry["written"].append(str(outside / "x.parquet"))
    (lake / "manifest.json").write_text(json.dumps(manifest))

    opened = LakeTranscripts(lake, Transcripts)  # read as it is: the names are refused
    assert _rows(opened.blocks) == _rows(whole.blocks)
    (lake / "more").mkdir()
    os.symlink(outside, lake / "more" / "blocks")  # SQL reads the lake's files, none through it
    assert opened.sql("select count(*) as n from blocks")["n"].item() == len(whole.blocks)
    with pytest.warns(TranscriptWarning, match="not a regular file"):
        t = load_transcripts(corpus, lake=lake)  # the group is made again, whole
    assert _rows(t.blocks) == _rows(whole.blocks)
    assert not any("outside" in r for e in _manifest(lake)["groups"].values() for r in e["written"])


def test_folders_of_the_lake_replaced_by_links_never_make_a_build_write_outside(
    built, tmp_path: Path
):
    corpus, lake, _ = built
    outside = tmp_path / "outside"
    outside.mkdir()
    (lake / "_frames").rename(tmp_path / "frames-before")
    os.symlink(outside, lake / "_frames")
    for folder in ("blocks", "calls"):
        target = outside / folder
        (lake / folder).rename(target)
        os.symlink(target, lake / folder)
    before = sorted(p.relative_to(outside) for p in outside.rglob("*"))
    session = next(corpus.glob("*.jsonl"))
    with session.open("a") as handle:  # a changed session: its group is written again
        handle.write(session.read_text().splitlines()[-1] + "\n")
    with pytest.raises(TranscriptError, match="link"), warnings.catch_warnings():
        warnings.simplefilter("ignore", TranscriptWarning)
        load_transcripts(corpus, lake=lake).calls  # noqa: B018
    assert sorted(p.relative_to(outside) for p in outside.rglob("*")) == before


def test_a_part_replaced_by_a_link_or_a_fifo_is_not_read_through(built, tmp_path: Path):
    corpus, lake, whole = built
    part = _a_part(lake, "blocks")
    elsewhere = tmp_path / "elsewhere.parquet"
    (lake / part).rename(elsewhere)
    os.symlink(elsewhere, lake / part)
    with pytest.warns(TranscriptWarning, match=f"{part}.*(read again|not a regular)"):
        t = load_transcripts(corpus, lake=lake)
    assert _rows(t.blocks) == _rows(whole.blocks)
    assert not (lake / part).is_symlink()
    fifo_part = _a_part(lake, "events")
    (lake / fifo_part).unlink()
    os.mkfifo(lake / fifo_part)
    opened = LakeTranscripts(lake, Transcripts)  # no reader: it says so, it never hangs
    with pytest.warns(TranscriptWarning, match="cannot be read again"):
        opened.events  # noqa: B018


def test_a_deleted_part_is_read_again_from_the_session_files(built):
    corpus, lake, whole = built
    part = _a_part(lake, "blocks")
    (lake / part).unlink()
    with pytest.warns(TranscriptWarning, match=f"{part}: a part of the lake is missing"):
        t = load_transcripts(corpus, lake=lake)
    assert t.update.read == 1
    assert _rows(t.blocks) == _rows(whole.blocks)


def test_a_damaged_part_is_read_again_or_reported_never_dropped(built):
    corpus, lake, whole = built
    part = _a_part(lake, "blocks")
    (lake / part).write_bytes(b"PAR1 not parquet")
    t = load_transcripts(corpus, lake=lake)  # the part is there: found damaged on use
    with pytest.warns(TranscriptWarning, match=f"{part} .*unreadable.*read again"):
        blocks = t.blocks
    assert _rows(blocks) == _rows(whole.blocks)
    assert _rows(load_transcripts(corpus, lake=lake).blocks) == _rows(whole.blocks)

    (lake / part).write_bytes(b"garbage")
    for file in corpus.rglob("*.jsonl"):
        file.unlink()  # its files are gone: it cannot be read again, and says so
    opened = LakeTranscripts(lake, Transcripts, read=None)
    with pytest.warns(TranscriptWarning, match=f"{part} .*rows are missing from blocks"):
        assert len(opened.blocks) < len(whole.blocks)


_BUILD = """
import sys, warnings
warnings.simplefilter("error")
from evo_magic import load_transcripts
t = load_transcripts(sys.argv[1], lake=sys.argv[2])
print(len(t.blocks), len(t.calls), len(t.parts), len(t.events))
"""


@pytest.mark.slow
def test_builds_of_one_lake_at_the_same_time_all_succeed_and_leave_it_whole(tmp_path: Path):
    corpus = _corpus(tmp_path, count=4)
    whole = load_transcripts(corpus)
    expected = f"{len(whole.blocks)} {len(whole.calls)} {len(whole.parts)} {len(whole.events)}"
    lake = tmp_path / "lake"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _BUILD, str(corpus), str(lake)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for run in runs:
        out, err = run.communicate(timeout=110)
        assert run.returncode == 0, err
        assert out.strip() == expected
    assert not list(lake.rglob("*.tmp"))
    t = LakeTranscripts(lake, Transcripts)
    assert _rows(t.blocks) == _rows(whole.blocks) and len(t.calls) == len(whole.calls)


def test_frames_written_as_parquet_never_go_through_a_link(tmp_path: Path):
    t = load_transcripts(_corpus(tmp_path, count=1))
    out, outside = tmp_path / "out", tmp_path / "outside"
    t.to_parquet(out)
    outside.mkdir()
    shutil.rmtree(out / "calls")
    os.symlink(outside, out / "calls")
    with pytest.raises(TranscriptError, match="is a link: nothing was written"):
        t.to_parquet(out)
    assert not list(outside.iterdir())
