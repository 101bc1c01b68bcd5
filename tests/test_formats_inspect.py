"""Inspect AI logs (`.eval` zips and `.json`): real public logs of several Inspect versions,
every frame checked against counts made here with `json` and `zipfile`, replayed; compaction
events; bad files refused by name."""

from __future__ import annotations

import io
import json
import shutil
import warnings
import zipfile
from pathlib import Path

import pytest

from evo_magic import load_transcripts, replay
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning

REAL = Path(__file__).parent / "fixtures" / "real"
LOGS = sorted((REAL / "inspect-eval").glob("*.eval")) + sorted(
    (REAL / "inspect-json").glob("*.json")
)


def samples(path: Path) -> list[dict]:
    if path.suffix == ".eval":
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.startswith("samples/")]
            return [json.loads(archive.read(n)) for n in names]
    return json.loads(path.read_text()).get("samples") or []


def events(sample: dict) -> list[dict]:
    return sample.get("events") or (sample.get("transcript") or {}).get("events") or []


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name[:40])
def test_each_sample_epoch_is_a_session_and_each_model_event_a_call(path):
    found = samples(path)
    stem = path.name.removesuffix(path.suffix)
    expected = {f"{stem}/{s['id']}/epoch-{s['epoch']}" for s in found}
    model_events = [e for s in found for e in events(s) if e["event"] == "model"]
    usages = [e["output"].get("usage") or {} for e in model_events]
    messages = [m for s in found for m in s["messages"]]
    t = load_transcripts(path)
    assert set(t.blocks["session_id"]) == expected
    assert len(t.calls) == len(model_events)
    assert set(t.calls["source"]) <= {"inspect"}
    if model_events:
        assert int(t.calls["input_tokens"].sum()) == sum(u.get("input_tokens", 0) for u in usages)
        assert int(t.calls["output_tokens"].sum()) == sum(u.get("output_tokens", 0) for u in usages)
        assert t.calls["model"].tolist() == [e["model"] for e in model_events]
    blocks = t.blocks
    tool_calls = sum(len(m.get("tool_calls") or []) for m in messages)
    assert (blocks["block_type"] == "tool_use").sum() == tool_calls
    assert (blocks["block_type"] == "tool_result").sum() == sum(
        m["role"] == "tool" for m in messages
    )
    assert len(t.events) == sum(len(events(s)) for s in found)


def test_a_call_is_placed_before_the_reply_it_produced():
    path = REAL / "inspect-eval" / "log_message_deduplication.eval"
    (sample,) = samples(path)
    t = load_transcripts(path)
    replies = t.blocks[t.blocks["role"] == "assistant"].drop_duplicates("message_index")
    assert t.calls["message_index"].tolist() == replies["message_index"].tolist()
    # the events keep their input as ranges into a pool of messages: 1, 3, 5, ... were sent
    refs = [e["input_refs"] for e in events(sample) if e["event"] == "model"]
    assert [sum(b - a for a, b in r) for r in refs] == [1, 3, 5, 7, 9, 11]


def test_a_compaction_event_is_a_compaction_with_its_tokens(tmp_path):
    # No public log with a CompactionEvent was found: this is a real log with one added, in
    # the shape Inspect writes it (type, source, tokens_before, tokens_after).
    log = json.loads((REAL / "inspect-json" / "2025-05-12T20-27-36-04-00_browser.json").read_text())
    sample_events = log["samples"][0]["events"]
    at = next(i for i, e in enumerate(sample_events) if e["event"] == "model") + 1
    event = {"event": "compaction", "timestamp": sample_events[at - 1]["timestamp"]}
    event |= {"type": "summary", "source": "inspect", "tokens_before": 9000, "tokens_after": 800}
    sample_events.insert(at, event)
    path = tmp_path / "compacted.json"
    path.write_text(json.dumps(log))
    t = load_transcripts(path)
    row = t.compactions.iloc[0]
    assert len(t.compactions) == 1
    assert (row["strategy"], row["trigger"]) == ("summary", "inspect")
    assert (row["before_tokens"], row["after_tokens"]) == (9000, 800)
    assert row["session_id"] == "compacted/1/epoch-1"


def test_inspect_logs_replay_with_their_recorded_usage(tmp_path):
    for path in LOGS:
        shutil.copy(path, tmp_path)
    t = load_transcripts(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # models without a price
        r = replay(t, {"none": []})
    assert len(r.calls) == len(t.calls)  # a scorer's call (no reply in the messages) too
    # every call that reported tokens sent keeps them (a test model reports none)
    reported = (
        t.calls["input_tokens"].fillna(0) + t.calls["cache_read_input_tokens"].fillna(0)
    ) > 0
    assert int(r.calls["recorded_tokens"].notna().sum()) == int(reported.sum()) > 20
    assert set(r.calls["source"]) == {"inspect"}


def test_a_truncated_eval_zip_is_named_and_the_others_still_load(tmp_path):
    data = (REAL / "inspect-eval" / "log_streaming.eval").read_bytes()
    (tmp_path / "torn.eval").write_bytes(data[: len(data) // 2])
    shutil.copy(REAL / "inspect-eval" / "log_read_sample.eval", tmp_path)
    with pytest.warns(TranscriptWarning, match=r"torn\.eval"):
        t = load_transcripts(tmp_path)
    assert t.skipped == {"unreadable file": 1}
    assert len(t.calls) == 1


def test_a_member_torn_inside_the_zip_is_named_by_member(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("_journal/start.json", "{}")
        archive.writestr("samples/1_epoch_1.json", '{"id": 1, "epoch": 1, "messages": [')
    (tmp_path / "run.eval").write_bytes(buffer.getvalue())
    named = r"run\.eval member samples/1_epoch_1\.json: line 1"
    with pytest.warns(TranscriptWarning, match=named), pytest.raises(TranscriptError):
        load_transcripts(tmp_path / "run.eval")


def test_member_names_are_never_paths_on_disk(tmp_path):
    inside = tmp_path / "logs"
    inside.mkdir()
    sample = json.loads(
        zipfile.ZipFile(REAL / "inspect-eval" / "log_read_sample.eval").read(
            "samples/1_epoch_1.json"
        )
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("_journal/start.json", "{}")
        archive.writestr("samples/../../escaped.json", json.dumps(sample))
    (inside / "run.eval").write_bytes(buffer.getvalue())
    t = load_transcripts(inside / "run.eval")
    assert len(t.calls) == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["logs", "run.eval"]
