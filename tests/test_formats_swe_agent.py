"""SWE-agent and mini-swe-agent trajectories: real public files of several versions, every frame
checked against counts made here with plain `json`, replayed, and bad files refused clearly."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from evo_magic import load_transcripts, replay
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning

REAL = Path(__file__).parent / "fixtures" / "real"
SWE = sorted((REAL / "swe-agent-0.x").glob("*.traj")) + sorted(
    (REAL / "swe-agent-1.0").glob("*.traj")
)
MINI = sorted(REAL.glob("mini-swe-agent-*/*.traj.json"))


def session_of(path: Path) -> str:
    task = path.name.split(".traj")[0]
    return f"{path.parent.name}/{task}"


def swe_counts(path: Path) -> dict[str, int]:
    """What a SWE-agent file holds, counted from its JSON: a call per assistant message that is
    not a demonstration, a tool call per function call (or per action where there are none)."""
    run = json.loads(path.read_text())
    assistants = [m for m in run["history"] if m["role"] == "assistant" and not m.get("is_demo")]
    tool_uses = 0
    for m in assistants:
        calls = m.get("tool_calls")
        tool_uses += str(calls).count("'id':") if calls else int(bool(m.get("action")))
    return {
        "calls": len(assistants),
        "tool_use": tool_uses,
        "system": sum(m["role"] == "system" for m in run["history"]),
        "demonstration": sum(bool(m.get("is_demo")) for m in run["history"]),
        "tokens_sent": run["info"]["model_stats"]["tokens_sent"],
        "api_calls": run["info"]["model_stats"]["api_calls"],
    }


@pytest.mark.parametrize("path", SWE, ids=lambda p: f"{p.parent.name}/{p.name[:20]}")
def test_a_swe_agent_trajectory_gives_a_call_per_model_response(path):
    expected = swe_counts(path)
    t = load_transcripts(path)
    assert set(t.calls["source"]) == {"swe_agent"}
    assert set(t.calls["session_id"]) == {session_of(path)}
    assert len(t.calls) == expected["calls"]
    assert t.calls["input_tokens"].isna().all()  # no per-call usage in the file
    blocks = t.blocks
    assert (blocks["block_type"] == "tool_use").sum() == expected["tool_use"]
    # every call is answered by exactly one result (the last may be the submission's)
    results = blocks[blocks["block_type"] == "tool_result"]
    uses = blocks[blocks["block_type"] == "tool_use"]
    assert set(results["tool_use_id"]) <= set(uses["tool_use_id"])
    assert len(uses) - len(results) in (0, 1)
    kinds = blocks.drop_duplicates(["epoch", "message_index"])["message_kind"]
    assert (kinds == "system").sum() == expected["system"]
    assert (kinds == "demonstration").sum() == expected["demonstration"]
    stats = t.events[t.events["kind"] == "model_stats"]
    assert stats["tokens_sent"].tolist() == [expected["tokens_sent"]]
    assert stats["api_calls"].tolist() == [expected["api_calls"]]


def test_the_0x_step_keeps_its_thought_as_text_and_its_action_as_a_tool_call():
    path = REAL / "swe-agent-0.x" / "pydicom__pydicom-1458.traj"
    run = json.loads(path.read_text())
    first = next(m for m in run["history"] if m["role"] == "assistant")
    t = load_transcripts(path)
    response = t.blocks[t.blocks["message_kind"] == "response"].iloc[:2]
    assert response["text"].iloc[0] == first["thought"]
    assert json.loads(response["text"].iloc[1]) == {"command": first["action"]}
    observation = t.blocks[t.blocks["block_type"] == "tool_result"].iloc[0]
    following = run["history"][run["history"].index(first) + 1]
    assert observation["text"] == following["content"]


def mini_counts(path: Path) -> dict[str, int]:
    run = json.loads(path.read_text())
    assistants = [m for m in run["messages"] if m["role"] == "assistant"]
    usages = [((m.get("extra") or {}).get("response") or {}).get("usage") for m in assistants]
    prompt = sum(u["prompt_tokens"] for u in usages if u)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages if u)
    return {
        "calls": len(assistants),
        "tool_use": sum(len(m.get("tool_calls") or []) for m in assistants),
        "tool_result": sum(m["role"] == "tool" for m in run["messages"]),
        "input": prompt - cached,
        "cached": cached,
        "output": sum(u["completion_tokens"] for u in usages if u),
        "api_calls": run["info"]["model_stats"]["api_calls"],
        "exits": sum(m["role"] == "exit" for m in run["messages"]),
    }


@pytest.mark.parametrize("path", MINI, ids=lambda p: f"{p.parent.name}/{p.name[:20]}")
def test_a_mini_swe_agent_trajectory_gives_each_call_its_usage(path):
    expected = mini_counts(path)
    t = load_transcripts(path)
    calls = t.calls
    assert len(calls) == expected["calls"]
    assert set(calls["source"]) <= {"mini_swe_agent"}
    assert (t.blocks["block_type"] == "tool_use").sum() == expected["tool_use"]
    assert (t.blocks["block_type"] == "tool_result").sum() == expected["tool_result"]
    assert int(calls["input_tokens"].sum()) == expected["input"]
    assert int(calls["cache_read_input_tokens"].sum()) == expected["cached"]
    assert int(calls["output_tokens"].sum()) == expected["output"]
    assert (t.events["kind"] == "message.exit").sum() == expected["exits"]
    stats = t.events[t.events["kind"] == "model_stats"]
    assert stats["api_calls"].tolist() == [expected["api_calls"]]


def test_every_trajectory_replays_with_recorded_tokens_where_the_file_has_usage(tmp_path):
    folder = tmp_path / "runs"
    for path in [SWE[0], *MINI]:
        target = folder / path.parent.name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    t = load_transcripts(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unpriced models
        r = replay(t, {"none": [], "masking": "observation-masking"})
    calls = r.calls
    by_source = calls.groupby("source", observed=True)
    assert by_source.size().to_dict() == {
        "mini_swe_agent": 2 * int((t.calls["source"] == "mini_swe_agent").sum()),
        "swe_agent": 2 * int((t.calls["source"] == "swe_agent").sum()),
    }
    assert calls[calls["source"] == "swe_agent"]["recorded_tokens"].isna().all()
    mini = calls[calls["source"] == "mini_swe_agent"]
    assert mini["recorded_tokens"].notna().all()
    # masking old observations sends less than keeping every one, on the long runs
    sent = calls.groupby("strategy")["context_tokens"].sum()
    assert sent["masking"] < sent["none"]


def test_a_truncated_trajectory_is_named_with_its_line(tmp_path):
    data = (REAL / "swe-agent-0.x" / "pydicom__pydicom-1458.traj").read_bytes()
    torn = tmp_path / "runs" / "torn.traj"
    torn.parent.mkdir()
    torn.write_bytes(data[: len(data) // 2])
    shutil.copy(REAL / "mini-swe-agent-2.2" / "sqlfluff__sqlfluff-2419.traj.json", torn.parent)
    with pytest.warns(TranscriptWarning, match=r"torn\.traj: line \d+ not a whole JSON document"):
        t = load_transcripts(torn.parent)
    assert t.skipped == {"unreadable file": 1}
    assert len(t.calls) == 41  # the other file is read
    with pytest.warns(TranscriptWarning, match="torn.traj"), pytest.raises(TranscriptError):
        load_transcripts(torn)


def test_a_trajectory_of_the_wrong_shape_is_refused_by_name(tmp_path):
    bad = tmp_path / "bad.traj"
    bad.write_text(json.dumps({"environment": "swe_main", "history": {"role": "user"}}))
    refused = pytest.raises(TranscriptError)
    with pytest.warns(TranscriptWarning, match=r"bad\.traj: `history` is not a list"), refused:
        load_transcripts(bad)
