"""rewind: strategies tried at the points a recorded session compacted, on the history exactly
as the session had it there. Expectations are read from the files with `json` here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.claude_code_session import SID, write_session
from support.compacting_session import compacting_session

from evo_magic import load_transcripts, rewind
from evo_magic.analysis.engine.cluster import LocalDaskCluster
from evo_magic.analysis.retention import Fact
from evo_magic.models import FunctionModel, ModelRequest

REAL = Path(__file__).parent / "fixtures" / "real" / "claude-code-compaction"
STRATEGIES = {
    "recorded": "recorded",
    "none": [],
    "seed": None,
    "masking": ["observation-masking"],
    "window": ["sliding-window"],
}


@pytest.fixture(scope="module")
def evo_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compacting_session(tmp_path_factory.mktemp("rewind"))


def records(session: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (session / "session.jsonl").read_text().splitlines()]


def modified_before_each_compaction(session: Path) -> list[set[str]]:
    """The files a write or edit changed (successfully) before each compaction, by hand."""
    found, changed, failed = [], set(), set()
    for r in records(session):
        writes = r["kind"] == "tool_finished" and r["name"] in ("write_file", "edit_file")
        if writes and not r["is_error"]:
            changed.add(r["input"]["path"])
        if r["kind"] == "tool_finished" and r["is_error"]:
            failed.add(r["tool_use_id"])
        if r["kind"] == "compaction" and r["success"]:
            found.append(set(changed))
    return found


def test_recorded_reproduces_the_recorded_compactions(evo_session: Path, tmp_path: Path):
    r = rewind(evo_session, {"recorded": "recorded"}, cache_dir=tmp_path)
    done = [x for x in records(evo_session) if x["kind"] == "compaction" and x["success"]]
    points = r.points.sort_values("point")
    assert len(points) == len(done) == 2
    assert list(points["before_chars"]) == [x["before"]["chars"] for x in done]
    assert list(points["after_chars"]) == [x["after"]["chars"] for x in done]
    assert list(points["before_tokens"]) == [x["before"]["tokens"] for x in done]


def test_a_real_claude_code_compaction_is_rebuilt_at_its_recorded_size(tmp_path: Path):
    (path,) = REAL.glob("*.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    boundary = next(x for x in lines if x.get("subtype") == "compact_boundary")
    r = rewind(path, {"recorded": "recorded", "none": []}, cache_dir=tmp_path)
    recorded = r.points[r.points["strategy"] == "recorded"].iloc[0]
    pre = boundary["compactMetadata"]["preTokens"]
    assert abs(recorded["before_tokens"] - pre) / pre < 0.01
    # What the session did there: its summary alone replaced the history (the next call's
    # prompt, which also holds the files Claude Code attaches after compacting, is larger).
    cut = lines.index(boundary)
    summary = next(x for x in lines[cut:] if x.get("isCompactSummary"))["message"]["content"]
    assert abs(recorded["after_chars"] - len(summary)) / len(summary) < 0.05
    usage = next(x for x in lines[cut:] if x.get("type") == "assistant")["message"]["usage"]
    prompt = sum(usage[k] for k in ("input_tokens", "cache_read_input_tokens"))
    prompt += usage["cache_creation_input_tokens"]
    assert recorded["after_tokens"] < prompt
    kept = r.points[r.points["strategy"] == "none"].iloc[0]
    assert kept["after_tokens"] == kept["before_tokens"] == recorded["before_tokens"]
    # The artifact trail: every file a Write or Edit changed before the boundary.
    ids = {
        b["tool_use_id"]
        for x in lines[:cut]
        if x.get("type") == "user" and isinstance(x["message"]["content"], list)
        for b in x["message"]["content"]
        if b.get("type") == "tool_result" and b.get("is_error")
    }
    changed = {
        b["input"]["file_path"]
        for x in lines[:cut]
        if x.get("type") == "assistant" and not x.get("isSidechain")
        for b in x["message"]["content"]
        if b["type"] == "tool_use"
        and b["name"] in ("Write", "Edit", "MultiEdit")
        and b["id"] not in ids
    }
    assert set(recorded["modified_files"].split("\n")) == changed


def test_the_artifact_trail_finds_every_file_modified_before_the_point(evo_session: Path):
    r = rewind(evo_session, STRATEGIES)
    expected = modified_before_each_compaction(evo_session)
    for point, files in enumerate(expected, start=1):
        rows = r.points[r.points["point"] == point]
        assert len(rows) == len(STRATEGIES)
        for trail in rows["modified_files"]:
            assert set(trail.split("\n")) == files
    assert expected[0] == {"c.txt"} and expected[1] == {"c.txt", "a.txt"}
    none = r.points[r.points["strategy"] == "none"]
    assert (none["kept_modified"] == 1).all() and (
        none["after_chars"] == none["before_chars"]
    ).all()
    # The user's instruction ("never touch d.txt") is in the history at the first point and
    # kept verbatim by "none"; the recorded summary does not repeat it, so by the second
    # point the session had lost it whatever a strategy does there.
    kept = r.points.set_index(["point", "strategy"])["kept_instruction"]
    assert kept[(1, "none")] == 1 and kept[(1, "recorded")] == 0
    assert (kept.loc[2].fillna(0) == 0).all()


def test_given_facts_are_followed_instead_of_the_extracted_ones(evo_session: Path):
    on_b = Fact("the first line of b", question="What is b.txt's first line?", answer="first")
    later = "Changed a."  # the agent says it only after the first compaction
    given = [on_b, later, "a text this session never held"]
    asked: list[str] = []

    def reader(request: ModelRequest) -> list[dict[str, Any]]:
        asked.append(request.messages[-1]["content"][-1]["text"])
        return [{"type": "text", "text": "first"}]

    model = FunctionModel(reader, name="claude-sonnet-4-5")
    r = rewind(evo_session, {"recorded": "recorded", "none": []}, facts=given, reader=model)
    rows = r.points.set_index(["point", "strategy"])
    # Counted where the history held them before: b's line at the first point, both at the
    # second; the text never held, nowhere.
    assert rows.loc[(1, "none"), "facts"] == 1 and rows.loc[(2, "none"), "facts"] == 2
    # Kept whole by "none"; the recorded summary ("We read a, b and c, and changed c.") does
    # not hold b's first line.
    assert rows.loc[(1, "none"), "kept_share"] == 1 and rows.loc[(1, "recorded"), "kept_share"] == 0
    assert rows.loc[(2, "none"), "kept_share"] == 1
    # Instead of the extracted facts: the user's instruction is neither counted nor asked.
    assert rows["facts_instruction"].eq(0).all()
    recall = r.probes[(r.probes["probe"] == "recall") & (r.probes["strategy"] == "none")]
    assert list(zip(recall["point"], recall["answer"], strict=True)) == [
        (1, "first"),
        (2, "first"),
        (2, "Changed"),  # the cloze of "Changed a."
    ]
    assert recall["question"].iloc[0] == "What is b.txt's first line?"
    assert set(r.probes["probe"]) == {"recall", "continuation", "decision"}  # no artifact
    assert not any("never touch" in question for question in asked)
    # The artifact trail stays the session's own.
    assert set(rows.loc[(1, "none"), "modified_files"].split("\n")) == {"c.txt"}


def test_points_at_given_calls_are_the_history_each_call_was_prepared_from(evo_session: Path):
    sent = {x["call"]: x for x in records(evo_session) if x["kind"] == "model_response"}
    r = rewind(evo_session, {"none": []}, at=[2, 7])
    assert list(r.points["call"]) == [2, 7]
    for row in r.points.itertuples():
        assert row.before_chars == sent[row.call]["context_before_micro"]["chars"]
    every = rewind(evo_session, {"none": []}, at="every 3 calls")
    assert list(every.points["call"]) == [c for c in sent if c % 3 == 0]
    with pytest.raises(ValueError, match="every N calls"):
        rewind(evo_session, {"none": []}, at="each call")


def test_probes_are_asked_one_at_a_time_and_summaries_cached(evo_session: Path, tmp_path: Path):
    asked: list[ModelRequest] = []

    def reader(request: ModelRequest) -> list[dict[str, Any]]:
        asked.append(request)
        return [{"type": "text", "text": "a.txt"}]

    model = FunctionModel(reader, name="claude-sonnet-4-5")
    r = rewind(evo_session, {"seed": None}, reader=model, replicates=2, cache_dir=tmp_path)
    assert len(r.probes) == r.points["probes"].sum() > 0
    assert set(r.probes["replicate"]) == {1, 2}
    assert {"artifact", "continuation", "decision"} <= set(r.probes["probe"])
    assert r.points["summary_output_tokens"].gt(0).all()
    first = len(asked)
    again = rewind(evo_session, {"seed": None}, reader=model, replicates=2, cache_dir=tmp_path)
    assert len(asked) == first  # summaries and answers came from the disk
    pd.testing.assert_frame_equal(again.points, r.points)
    low, high = r.points[["probe_accuracy_low", "probe_accuracy_high"]].iloc[0]
    assert low <= r.points["probe_accuracy"].iloc[0] <= high
    frontier = r.frontier()
    assert list(frontier["strategy"]) == ["seed"] and frontier["on_frontier"].all()


@pytest.mark.slow
def test_engines_give_the_same_rows(tmp_path: Path, dask_cluster: LocalDaskCluster):
    root = write_session(tmp_path / "cc", calls=70)
    other = "7e57a000-0000-4000-8000-0000000000bb"  # a second session: the same, renamed
    for path in [p for p in root.rglob("*.jsonl")]:
        renamed = Path(str(path).replace(SID, other))
        renamed.parent.mkdir(parents=True, exist_ok=True)
        renamed.write_text(path.read_text().replace(SID, other))
    here = rewind(root, STRATEGIES, reader="offline", engine="local", workers=1)
    local = rewind(root, STRATEGIES, reader="offline", engine="local", workers=2, progress=False)
    on_dask = {"engine": "dask", "client": dask_cluster.client, "progress": False}
    dask = rewind(root, STRATEGIES, reader="offline", **on_dask)
    assert set(here.points["session_id"]) == {SID, other}
    assert len(here.points) > len(STRATEGIES)
    for other in (local, dask):
        pd.testing.assert_frame_equal(other.points, here.points)
        pd.testing.assert_frame_equal(other.probes, here.probes)


def test_a_lake_is_rewound_session_by_session_with_the_same_rows(tmp_path: Path):
    root = write_session(tmp_path / "cc", calls=70)
    lake = load_transcripts(root, lake=tmp_path / "lake")
    strategies = {"recorded": "recorded", "masking": ["observation-masking"]}
    whole = rewind(root, strategies)
    from_lake = rewind(lake, strategies, progress=False)
    assert len(whole.points) == 2
    pd.testing.assert_frame_equal(from_lake.points, whole.points)


def test_bad_arguments_are_refused_in_one_line(evo_session: Path):
    with pytest.raises(ValueError, match="replicates"):
        rewind(evo_session, {"none": []}, replicates=0)
    with pytest.raises(TypeError, match="facts is a list of str or Fact, not str"):
        rewind(evo_session, {"none": []}, facts="never touch d.txt")
    with pytest.raises(TypeError, match="facts are str or Fact, not int"):
        rewind(evo_session, {"none": []}, facts=[3])
    with pytest.raises(TypeError, match="'speed'"):
        rewind(evo_session, {"none": []}, speed=2)
