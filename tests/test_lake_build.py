"""A lake's build: an interrupted one goes on where it stopped, with the manifest it saved."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from support.claude_code_session import SID, copy_session, write_session

from evo_magic import load_transcripts
from evo_magic.analysis import lake_build

COUNT = 5


def _corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    for seed in range(COUNT):
        project = write_session(tmp_path / f"made{seed}", calls=6, seed=seed)
        copy_session(project, root, SID[:-4] + f"{seed:04d}")
    return root


def _edges(path: Path) -> str:
    """The hash a lake's manifest keeps of a file: its first and last 64 KiB."""
    data = path.read_bytes()
    edge = 1 << 16
    tail = data[max(len(data) - edge, edge) :] if len(data) > edge else b""
    return hashlib.sha256(data[:edge] + tail).hexdigest()


def test_an_interrupted_build_goes_on_from_the_manifest_it_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    corpus, lake = _corpus(tmp_path), tmp_path / "lake"
    monkeypatch.setattr(lake_build, "BATCH_BYTES", 1)  # a batch per session
    monkeypatch.setattr(lake_build, "SAVE_SECONDS", 0.0)  # the manifest saved after each
    real = lake_build.read_batch
    batches: list[int] = []

    def stopped_at_the_third(*args, **kwargs):
        batches.append(len(batches))
        if len(batches) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(lake_build, "read_batch", stopped_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        load_transcripts(corpus, lake=lake)
    # The manifest saved names the files read so far with their hashes (made in a thread of
    # their own while the build parsed): a later build trusts them.
    saved = json.loads((lake / "manifest.json").read_text())
    files = {name: stamp for e in saved["groups"].values() for name, stamp in e["files"].items()}
    assert len(saved["groups"]) == 2 and files
    assert all(stamp["hash"] == _edges(Path(name)) for name, stamp in files.items())
    monkeypatch.setattr(lake_build, "read_batch", real)
    again = load_transcripts(corpus, lake=lake)
    assert (again.update.kept, again.update.read) == (2, COUNT - 2)
    whole = load_transcripts(corpus)
    for name in ("calls", "blocks"):
        mine = getattr(again, name).sort_values(["file", "line"], kind="stable")
        plain = getattr(whole, name).sort_values(["file", "line"], kind="stable")
        pd.testing.assert_frame_equal(mine.reset_index(drop=True), plain.reset_index(drop=True))
