"""Linear-time properties guarded by counting work, not seconds (speed lives in benchmarks/):
what an operation over n sessions touches must grow with n, not with n squared."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pandas as pd

from evo_magic.analysis import load_transcripts

REAL = Path(__file__).parent / "fixtures" / "real" / "claude-code-2.1"


def _copies(folder: Path, count: int) -> list[str]:
    """`count` copies of the real Claude Code sessions, each under new session ids."""
    ids = []
    for original in sorted(REAL.glob("*.jsonl")):
        lines = original.read_text().splitlines()
        old = json.loads(lines[0]).get("sessionId") or next(
            json.loads(line)["sessionId"] for line in lines if '"sessionId"' in line
        )
        for _ in range(count):
            new = str(uuid.uuid4())
            (folder / f"{new}.jsonl").write_text("\n".join(lines).replace(old, new) + "\n")
            ids.append(new)
    return ids


def test_cutting_every_session_out_scans_each_frame_once(tmp_path: Path) -> None:
    ids = _copies(tmp_path, 12)
    t = load_transcripts(tmp_path)
    assert sorted(t.session_ids()) == sorted(ids)
    frames = {"blocks": t.blocks, "calls": t.calls, "compactions": t.compactions, "parts": t.parts}
    for sid in t.session_ids():
        one = t.session(sid)
        for name, frame in frames.items():
            if "session_id" not in frame.columns:
                continue
            # The oracle: a plain mask over the whole frame, in the order the rows were read.
            expected = frame[frame["session_id"].astype(object) == sid].reset_index(drop=True)
            pd.testing.assert_frame_equal(getattr(one, name), expected)
        assert one.session_ids() == [sid]
        assert [p.name for p in one.files] == [f"{sid}.jsonl"]
    # Each row of each frame (and of the identities table) looked at once for all 24 sessions,
    # where masking per session looked at every row 24 times.
    identities = t._identities.num_rows if t._identities is not None else 0
    total = sum(len(f) for f in frames.values() if "session_id" in f.columns) + identities
    assert t._rows.rows_scanned == total


def test_a_frame_replaced_after_a_cut_is_indexed_again(tmp_path: Path) -> None:
    _copies(tmp_path, 2)
    t = load_transcripts(tmp_path)
    first = t.session_ids()[0]
    assert len(t.session(first).calls)
    t.calls = t.calls[t.calls["session_id"].astype(object) != first].reset_index(drop=True)
    assert len(t.session(first).calls) == 0  # the old index is not reused for the new frame
