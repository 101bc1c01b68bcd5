"""OpenHands event lists: real public files checked against counts made here with `json`,
condensations as compactions, replay, and a bad file refused by name."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from evo_magic import load_transcripts, replay
from evo_magic.analysis.errors import TranscriptWarning

REAL = Path(__file__).parent / "fixtures" / "real" / "openhands-events"
FILES = sorted(REAL.glob("*.json"))


def counts(path: Path) -> dict[str, int]:
    events = json.loads(path.read_text())
    responses, unmetered, tool_uses, results = set(), 0, 0, 0
    prompt, cached, written, output = 0, 0, 0, 0
    for e in events:
        meta = e.get("tool_call_metadata")
        if "action" in e and meta:
            tool_uses += 1
            response = meta["model_response"]
            if response["id"] not in responses:
                responses.add(response["id"])
                usage = response["usage"]
                prompt += usage["prompt_tokens"]
                cached += usage.get("cache_read_input_tokens") or usage[
                    "prompt_tokens_details"
                ].get("cached_tokens", 0)
                written += usage.get("cache_creation_input_tokens") or 0
                output += usage["completion_tokens"]
        elif e.get("action") == "message" and e["source"] == "agent":
            unmetered += 1
        elif "observation" in e and meta:
            results += 1
    return {
        "calls": len(responses) + unmetered,
        "metered": len(responses),
        "tool_use": tool_uses,
        "tool_result": results,
        "input": prompt - cached - written,
        "cached": cached,
        "output": output,
        "events": len(events),
    }


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_an_event_list_gives_a_call_per_model_response(path):
    expected = counts(path)
    t = load_transcripts(path)
    assert set(t.calls["source"]) == {"openhands"}
    assert len(t.calls) == expected["calls"]
    assert int(t.calls["input_tokens"].notna().sum()) == expected["metered"]
    assert int(t.calls["input_tokens"].sum()) == expected["input"]
    assert int(t.calls["cache_read_input_tokens"].sum()) == expected["cached"]
    assert int(t.calls["output_tokens"].sum()) == expected["output"]
    assert (t.blocks["block_type"] == "tool_use").sum() == expected["tool_use"]
    assert (t.blocks["block_type"] == "tool_result").sum() == expected["tool_result"]
    assert len(t.events) == expected["events"]


def condensed(tmp_path: Path) -> tuple[Path, list[dict]]:
    """A real event list with a condensation added in OpenHands' V0 schema: events 7-10 (a
    command and an edit, with their results) forgotten, a summary at offset 1."""
    events = json.loads((REAL / "basic_gui_mode.json").read_text())
    condensation = {
        "id": 99,
        "timestamp": "2025-01-20T20:29:58.000000",
        "source": "agent",
        "action": "condensation",
        "args": {
            "forgotten_events_start_id": 7,
            "forgotten_events_end_id": 10,
            "summary": "Made /workspace/todo-app and its index.html.",
            "summary_offset": 1,
        },
    }
    at = next(i for i, e in enumerate(events) if e["id"] == 11)
    events.insert(at, condensation)
    path = tmp_path / "condensed.json"
    path.write_text(json.dumps(events))
    return path, events


def test_a_condensation_is_a_compaction_and_the_next_epoch_keeps_what_it_kept(tmp_path):
    path, events = condensed(tmp_path)
    t = load_transcripts(path)
    (row,) = t.compactions.itertuples()
    assert row.strategy == "condensation"
    assert row.summary == "Made /workspace/todo-app and its index.html."
    after = t.blocks[t.blocks["epoch"] == 1]
    # the prompt kept, then the summary (one user message), then what came after
    assert after["message_kind"].tolist()[:2] == ["compact_history", "compact_summary"]
    assert after["message_index"].tolist()[:2] == [0, 0]
    forgotten = {
        e["tool_call_metadata"]["tool_call_id"] for e in events[7:11] if "tool_call_metadata" in e
    }
    assert not set(after["tool_use_id"].dropna()) & forgotten
    assert set(t.blocks[t.blocks["epoch"] == 0]["tool_use_id"].dropna()) >= forgotten
    later = t.calls[t.calls["epoch"] == 1]
    at = next(i for i, e in enumerate(events) if e.get("action") == "condensation")
    answered = [
        e
        for e in events[at:]
        if e["source"] == "agent" and e.get("action") in ("run", "edit", "message")
    ]
    assert len(later) == len(answered) == 3 and later["message_index"].notna().all()


def test_event_lists_replay_with_their_usage(tmp_path):
    for path in FILES:
        shutil.copy(path, tmp_path)
    condensed(tmp_path)
    t = load_transcripts(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # models without a price
        r = replay(t, {"recorded": "recorded", "none": []})
    assert set(r.calls["source"]) == {"openhands"}
    none = r.calls[r.calls["strategy"] == "none"]
    assert len(none) == len(t.calls)
    assert int(none["recorded_tokens"].notna().sum()) == int(t.calls["input_tokens"].notna().sum())
    recorded = r.calls[r.calls["strategy"] == "recorded"]
    condensed_session = recorded["session_id"].astype(str).str.endswith("condensed")
    assert recorded[condensed_session]["compactions_so_far"].max() == 1


def test_a_bad_event_list_is_named(tmp_path):
    data = (REAL / "basic.json").read_bytes()
    (tmp_path / "torn.json").write_bytes(data[:-40])
    shutil.copy(REAL / "wrong_initial_state.json", tmp_path)
    with pytest.warns(TranscriptWarning, match=r"torn\.json: line \d+"):
        t = load_transcripts(tmp_path)
    assert len(t.calls) == 4
