"""Linear-time properties of the analyses guarded by counting work, not seconds (their speed at
1x, 10x and 100x lives in benchmarks/bench_scale_analyses.py): what `rewind` looks at of the
frames over n sessions grows with n, not with n squared; `after_compaction` judges each tool
call a fixed number of times, however many sessions there are."""

from __future__ import annotations

import importlib
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evo_magic import after_compaction, load_transcripts, rewind
from evo_magic.analysis.after_compaction.measure import Memory

# The modules themselves (their packages export functions of the same names).
conversation_rows = importlib.import_module("evo_magic.analysis.conversation_rows")

REAL = Path(__file__).parent / "fixtures" / "real" / "claude-code-compaction"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _copies(folder: Path, count: int) -> list[str]:
    """`count` copies of the real compacted session, every id in each replaced by a new one."""
    (original,) = REAL.glob("*.jsonl")
    text = original.read_text(encoding="utf-8")
    ids = []
    for _ in range(count):
        copied, mapping = _renamed(text)
        (folder / f"{mapping[original.stem]}.jsonl").write_text(copied, encoding="utf-8")
        ids.append(mapping[original.stem])
    return ids


def _renamed(text: str) -> tuple[str, dict[str, str]]:
    mapping: dict[str, str] = {}
    return UUID.sub(lambda m: mapping.setdefault(m.group(0), str(uuid.uuid4())), text), mapping


def _counting(convert: Callable[[pd.DataFrame], Any], looked_at: list[int]) -> Callable[..., Any]:
    """`convert` (a frame turned into rows per conversation), noting how many rows it read."""

    def counted(frame: pd.DataFrame) -> Any:
        looked_at.append(len(frame))
        return convert(frame)

    return counted


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("copies")
    return folder, _copies(folder, 4)


@pytest.mark.filterwarnings("ignore:.*usage_partial")
def test_rewind_looks_at_each_row_of_the_frames_once_for_all_sessions(
    copies: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, ids = copies
    t = load_transcripts(folder)
    looked_at: list[int] = []
    convert = _counting(conversation_rows.by_conversation, looked_at)
    monkeypatch.setattr(conversation_rows, "by_conversation", convert)
    r = rewind(t, {"none": []}, workers=1, cache_dir=tmp_path)
    # One point per copy (each compacted once), found in every copy.
    assert sorted(r.points["session_id"].astype(str)) == sorted(ids)
    # Each frame is turned into rows once for every conversation of every session, where
    # picking a conversation's rows out of the whole frames read all four sessions' rows for
    # each conversation.
    frames = (t.blocks, t.calls, t.compactions, t.parts)
    assert 0 < sum(looked_at) <= sum(len(f) for f in frames)
    assert t._rows.rows_scanned <= sum(len(f) for f in frames) + t._identities.num_rows


@pytest.mark.filterwarnings("ignore:.*usage_partial")
def test_rewind_of_copies_gives_each_copy_the_same_rows(
    copies: tuple[Path, list[str]], tmp_path: Path
) -> None:
    folder, ids = copies
    r = rewind(load_transcripts(folder), {"none": [], "seed": None}, workers=1, cache_dir=tmp_path)
    per_copy = [
        r.points[r.points["session_id"].astype(str) == sid]
        .drop(columns=["session_id"])
        .reset_index(drop=True)
        for sid in ids
    ]
    assert all(len(rows) == 2 for rows in per_copy)  # one point x two strategies
    for rows in per_copy[1:]:
        pd.testing.assert_frame_equal(rows, per_copy[0])


@pytest.mark.filterwarnings("ignore:.*usage_partial")
def test_after_compaction_judges_each_tool_call_at_most_twice_over_all_sessions(
    copies: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, ids = copies
    t = load_transcripts(folder)
    judged: list[int] = []
    assess = Memory.assess

    def counted(self: Memory, *args: Any) -> Any:
        judged.append(1)
        return assess(self, *args)

    monkeypatch.setattr(Memory, "assess", counted)
    a = after_compaction(t)
    assert len(a.compactions) == len(ids)  # each copy's compaction measured
    # Each tool call judged against all before it, and once more after a compaction against
    # what the boundary held: at most twice each, however many sessions the folder holds.
    blocks = t.blocks
    uses = blocks[(blocks["block_type"] == "tool_use") & ~blocks["abandoned"].astype(bool)]
    after = uses[uses["epoch"] > 0]  # each copy compacted once: epoch 1 follows it
    assert len(judged) == len(uses) + len(after)
