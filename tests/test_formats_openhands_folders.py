"""OpenHands conversation folders (the agent SDK's `base_state.json` and `events/`): real public
folders checked against counts made here with `json`, a condensation as a compaction, files
recognised by content, and a torn event named."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from evo_magic import load_transcripts, replay
from evo_magic.analysis.errors import TranscriptWarning

REAL = Path(__file__).parent / "fixtures" / "real" / "openhands-conversations"
FOLDERS = sorted(p for p in REAL.iterdir() if p.is_dir())
TALKING = [f for f in FOLDERS if len(list((f / "events").glob("*.json"))) > 1]
RUN = REAL / "cd94562403b9487ebdd4018e3f531dfd"


def events_of(folder: Path) -> list[dict]:
    files = sorted((folder / "events").glob("event-*.json"), key=lambda p: int(p.name[6:11]))
    return [json.loads(p.read_text()) for p in files]


def counts(folder: Path) -> dict:
    """What the frames should hold, counted from the files with `json` alone."""
    events = events_of(folder)
    state = json.loads((folder / "base_state.json").read_text())
    stats = state["stats"]
    metrics = stats.get("usage_to_metrics", stats.get("service_to_metrics", {}))
    usage = {u["response_id"]: u for m in metrics.values() for u in m["token_usages"]}
    responses, previous = [], None
    for e in events:
        if e["kind"] == "MessageEvent" and e["source"] == "agent":
            responses.append(e["llm_response_id"])
            previous = None
        elif e["kind"] == "ActionEvent":
            if e["llm_response_id"] != previous:
                responses.append(e["llm_response_id"])
            previous = e["llm_response_id"]
        else:
            previous = None
    metered = [usage[r] for r in responses if r in usage]
    return {
        "events": len(events),
        "calls": len(responses),
        "metered": len(metered),
        "input": sum(u["prompt_tokens"] - u["cache_read_tokens"] for u in metered),
        "cached": sum(u["cache_read_tokens"] for u in metered),
        "output": sum(u["completion_tokens"] for u in metered),
        "tool_use": sum(e["kind"] == "ActionEvent" for e in events),
        "tool_result": sum(e["kind"] == "ObservationEvent" for e in events),
        "prompts": sum(e["kind"] == "MessageEvent" and e["source"] == "user" for e in events),
        "session": state["id"],
    }


@pytest.mark.parametrize("folder", TALKING, ids=lambda p: p.name[:12])
def test_a_conversation_folder_gives_a_call_per_response_with_its_usage(folder):
    expected = counts(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # models without a price
        t = load_transcripts(folder)
    assert set(t.calls["source"]) == {"openhands"}
    assert set(t.calls["session_id"]) == {expected["session"]}
    assert len(t.calls) == expected["calls"]
    assert int(t.calls["input_tokens"].notna().sum()) == expected["metered"]
    assert int(t.calls["input_tokens"].sum()) == expected["input"]
    assert int(t.calls["cache_read_input_tokens"].sum()) == expected["cached"]
    assert int(t.calls["output_tokens"].sum()) == expected["output"]
    assert (t.blocks["block_type"] == "tool_use").sum() == expected["tool_use"]
    assert (t.blocks["block_type"] == "tool_result").sum() == expected["tool_result"]
    assert (t.blocks["message_kind"] == "prompt").sum() == expected["prompts"]
    assert len(t.events) == expected["events"]
    assert t.events["file"].map(lambda f: Path(f).parent.parent == folder).all()


def test_every_folder_of_a_tree_is_one_session_read_with_its_events_in_order():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = load_transcripts(REAL)
    states = [json.loads((f / "base_state.json").read_text())["id"] for f in TALKING]
    assert set(t.calls["session_id"]) == set(states)
    for folder in TALKING:
        rows = t.events[t.events["file"].str.startswith(str(folder))]
        assert rows["kind"].tolist() == [e["kind"] for e in events_of(folder)]
    # a folder whose only event is its system prompt, from the SDK of September 2025
    assert (t.blocks["message_kind"] == "system").sum() == sum(
        e["kind"].startswith("SystemPrompt") for f in FOLDERS for e in events_of(f)
    )


def test_event_files_are_ordered_by_their_index_past_five_digits(tmp_path):
    folder = shutil.copytree(RUN, tmp_path / RUN.name)
    last = sorted((folder / "events").glob("event-00007-*.json"))[0]
    last.rename(last.with_name(last.name.replace("event-00007-", "event-100000-")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = load_transcripts(folder)
    assert t.events["kind"].tolist() == [e["kind"] for e in events_of(RUN)]
    assert t.blocks["text"].iloc[-1] == events_of(RUN)[-1]["llm_message"]["content"][0]["text"]


def condensed(tmp_path: Path) -> tuple[Path, dict]:
    """The real run with a condensation added after its first action and observation (the
    later events' indexes moved up one), in the SDK's schema: those two forgotten, a summary at
    offset 2 (after the system prompt and the prompt), its own call's usage under the
    condenser's metrics."""
    folder = shutil.copytree(RUN, tmp_path / RUN.name)
    for later in sorted((folder / "events").glob("event-0000[4-7]-*.json"), reverse=True):
        index = int(later.name[6:11])
        later.rename(later.with_name(f"event-{index + 1:05d}{later.name[11:]}"))
    events = events_of(RUN)
    condensation = {
        "id": "0f0e0d0c-0000-4000-8000-000000000001",
        "timestamp": "2026-02-05T11:24:47.300000",
        "source": "environment",
        "forgotten_event_ids": [events[2]["id"], events[3]["id"]],
        "summary": "Ran pwd > tool_output.txt; the file holds the working directory.",
        "summary_offset": 2,
        "llm_response_id": "chatcmpl-condenser-1",
        "kind": "Condensation",
    }
    name = f"event-00004-{condensation['id']}.json"
    (folder / "events" / name).write_text(json.dumps(condensation, separators=(",", ":")))
    state = json.loads((RUN / "base_state.json").read_text())
    state["stats"]["usage_to_metrics"]["condenser"] = {
        "model_name": "openai/gpt-4o-mini",
        "token_usages": [
            {
                "model": "openai/gpt-4o-mini",
                "prompt_tokens": 4000,
                "completion_tokens": 120,
                "cache_read_tokens": 1000,
                "cache_write_tokens": 0,
                "reasoning_tokens": 0,
                "response_id": "chatcmpl-condenser-1",
            }
        ],
    }
    (folder / "base_state.json").write_text(json.dumps(state))
    return folder, condensation


def test_a_condensation_is_a_compaction_with_its_summary_call(tmp_path):
    folder, condensation = condensed(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = load_transcripts(folder)
    (row,) = t.compactions.itertuples()
    assert row.strategy == "condensation"
    assert row.summary == condensation["summary"]
    assert (row.summary_input_tokens, row.summary_cache_read_input_tokens) == (3000, 1000)
    assert row.summary_output_tokens == 120
    after = t.blocks[t.blocks["epoch"] == 1]
    # the system prompt, the prompt kept, the summary after it (one user message with it)
    assert after["message_kind"].tolist()[:3] == ["system", "compact_history", "compact_summary"]
    assert after["message_index"].tolist()[:3] == [0, 1, 1]
    forgotten = events_of(RUN)[2]["tool_call_id"]
    assert forgotten not in set(after["tool_use_id"].dropna())
    assert len(t.calls) == counts(RUN)["calls"]  # the condenser's call is the compaction's


def test_conversation_folders_replay(tmp_path):
    folder, _ = condensed(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = load_transcripts(folder)
        r = replay(t, {"recorded": "recorded", "none": []})
    none = r.calls[r.calls["strategy"] == "none"]
    assert len(none) == len(t.calls)
    assert none["recorded_tokens"].notna().sum() == t.calls["input_tokens"].notna().sum()
    assert r.calls[r.calls["strategy"] == "recorded"]["compactions_so_far"].max() == 1


def test_a_torn_event_is_named_and_the_rest_of_the_folder_is_read(tmp_path):
    folder = shutil.copytree(RUN, tmp_path / RUN.name)
    torn = sorted((folder / "events").glob("event-00007-*.json"))[0]
    torn.write_bytes(torn.read_bytes()[:-60])  # the run stopped while writing it
    with pytest.warns(TranscriptWarning, match=rf"{torn.name}: line 1 not a whole JSON"):
        t = load_transcripts(folder)
    assert len(t.calls) == counts(RUN)["calls"] - 1
    assert t.skipped.get("unreadable file") == 1


def test_a_folder_of_event_lists_and_conversation_folders_reads_both(tmp_path):
    shutil.copytree(RUN, tmp_path / RUN.name)
    v0 = Path(__file__).parent / "fixtures" / "real" / "openhands-events" / "basic.json"
    shutil.copy(v0, tmp_path)
    (tmp_path / "notes.json").write_text(json.dumps({"id": "x", "agent": "not a state"}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = load_transcripts(tmp_path)
    assert set(t.calls["source"]) == {"openhands"}
    assert t.calls["session_id"].nunique() == 2
    assert t.skipped.get("file in no known format") == 1


def test_a_conversation_folders_files_are_one_session_of_a_batched_load():
    """A load reads a batch of sessions at a time: a folder's files must stay together."""
    from evo_magic.analysis.groups import groups
    from evo_magic.analysis.loader import files_under

    found = dict(groups(files_under(REAL)))
    assert len(found) == len(FOLDERS)
    for members in found.values():
        assert len({m.relative_to(REAL).parts[0] for m in members}) == 1


def test_a_torn_state_file_is_named_and_the_calls_keep_no_usage(tmp_path):
    folder = shutil.copytree(RUN, tmp_path / RUN.name)
    state = folder / "base_state.json"
    state.write_bytes(state.read_bytes()[:500])
    with pytest.warns(TranscriptWarning, match=r"base_state\.json: line 1 not a whole JSON"):
        t = load_transcripts(folder)
    assert len(t.calls) == counts(RUN)["calls"]
    assert t.calls["input_tokens"].isna().all()


def test_a_lake_of_conversation_folders_holds_what_a_load_gives(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = load_transcripts(REAL)
        lake = load_transcripts(REAL, lake=tmp_path / "lake")
    assert sorted(lake.calls["session_id"].astype(str)) == sorted(
        direct.calls["session_id"].astype(str)
    )
    assert int(lake.calls["input_tokens"].sum()) == int(direct.calls["input_tokens"].sum())


def test_fields_of_the_wrong_type_are_read_as_missing(tmp_path):
    """Anything read from disk is untrusted: ids that are not text are no ids."""
    folder, condensation = condensed(tmp_path)
    path = next((folder / "events").glob("event-00004-*.json"))
    bad = {**condensation, "forgotten_event_ids": [{"a": 1}, [2]], "llm_response_id": [1]}
    path.write_text(json.dumps(bad))
    action = next((folder / "events").glob("event-00002-*.json"))
    action.write_text(json.dumps({**json.loads(action.read_text()), "llm_response_id": {"x": 1}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = load_transcripts(folder)
    assert len(t.compactions) == 1 and pd.isna(t.compactions["summary_input_tokens"].iloc[0])
    assert len(t.calls) == counts(RUN)["calls"]
    assert pd.isna(t.calls["input_tokens"].iloc[0])


def test_an_event_file_that_is_a_link_out_of_its_folder_is_not_read(tmp_path):
    folder = shutil.copytree(RUN, tmp_path / "runs" / RUN.name)
    last = sorted((folder / "events").glob("event-00007-*.json"))[0]
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(last.read_bytes())
    last.unlink()
    last.symlink_to(outside)
    with pytest.warns(TranscriptWarning, match="a link, or not inside its conversation folder"):
        t = load_transcripts(tmp_path / "runs")
    assert len(t.calls) == counts(RUN)["calls"] - 1
    assert t.skipped.get("file outside its conversation folder") == 1
