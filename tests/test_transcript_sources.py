"""Claude Code, Codex and schema-v2 transcripts, the lake, and rebuilding a conversation.

Fixtures are small files of the real formats' shapes, written here (Codex: tests/fixtures)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import evo_magic
from evo_magic.analysis import (
    BLOCK_COLUMNS,
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    PART_COLUMNS,
    Call,
    Compaction,
    Message,
    conversation,
    load_transcripts,
)
from evo_magic.analysis.lake import connect

CODEX = Path(__file__).parent / "fixtures" / "codex"
SID = "5e55a000-0000-4000-8000-000000000001"


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [r if isinstance(r, str) else json.dumps(r, separators=(",", ":")) for r in records]
    path.write_text("".join(line + "\n" for line in lines))
    return path


class Claude:
    """Records of one Claude Code session, chained by parentUuid unless told otherwise."""

    def __init__(self, sid: str = SID, **common: Any):
        self.sid, self.common, self.records, self.n = sid, common, [], 0
        self.last: str | None = None

    def add(self, kind: str, parent: Any = "last", **fields: Any) -> str:
        self.n += 1
        uuid = f"{self.sid[:4]}-u{self.n}"
        record = {
            "parentUuid": self.last if parent == "last" else parent,
            "isSidechain": False,
            "sessionId": self.sid,
            "type": kind,
            "uuid": uuid,
            "timestamp": fields.pop("ts", f"2026-01-01T00:{self.n // 60:02d}:{self.n % 60:02d}Z"),
            **self.common,
            **fields,
        }
        self.records.append(record)
        self.last = uuid
        return uuid

    def user(self, content: Any, parent: Any = "last", **fields: Any) -> str:
        return self.add("user", parent, message={"role": "user", "content": content}, **fields)

    def assistant(self, mid: str, *blocks: dict[str, Any], parent: Any = "last", **extra: Any):
        usage = extra.pop("usage", {"input_tokens": 3, "output_tokens": 5})
        message = {"id": mid, "role": "assistant", "model": extra.pop("model", "claude-x")}
        message |= {"content": list(blocks), "stop_reason": extra.pop("stop", None)}
        return self.add("assistant", parent, message=message | {"usage": usage}, **extra)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(tool_id: str, name: str = "Bash", **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def result(tool_id: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


# -- Claude Code fidelity ----------------------------------------------------------------------


def test_title_only_and_snapshot_only_files_do_not_stop_a_folder(tmp_path: Path):
    project = tmp_path / "project"
    write_jsonl(project / "title.jsonl", [{"type": "summary", "summary": "T", "leafUuid": "x"}])
    snapshot = {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}
    write_jsonl(project / "snap.jsonl", [snapshot, snapshot])
    session = Claude()
    session.user("Hello")
    session.assistant("msg_1", text("Hi."), stop="end_turn")
    write_jsonl(project / f"{SID}.jsonl", session.records)
    t = load_transcripts(project)
    assert t.skipped["claude_code: file without messages"] == 2
    assert t.blocks["text"].tolist() == ["Hello", "Hi."]
    assert t.events["kind"].value_counts()["file-history-snapshot"] == 2


def test_api_error_placeholders_are_not_calls_and_the_errors_are_events(tmp_path: Path):
    session = Claude()
    session.user("whoami")
    for attempt in (1, 2):
        session.add(
            "system",
            subtype="api_error",
            level="error",
            cause={"code": "ConnectionRefused"},
            retryInMs=500.0 * attempt,
            retryAttempt=attempt,
            maxRetries=10,
        )
    session.assistant(
        "e1",
        text("Request timed out"),
        model="<synthetic>",
        usage={"input_tokens": 0, "output_tokens": 0},
        isApiErrorMessage=True,
    )
    session.add("system", subtype="turn_duration", durationMs=308149)
    session.user("whoami again")
    session.assistant("msg_2", text("root"), stop="end_turn")
    t = load_transcripts(write_jsonl(tmp_path / f"{SID}.jsonl", session.records))
    assert t.calls["model"].tolist() == ["claude-x"]
    assert "Request timed out" not in t.blocks["text"].tolist()
    events = t.events
    errors = events[events["subtype"] == "api_error"]
    assert errors["retryAttempt"].tolist() == [1, 2]
    assert errors["cause_code"].tolist() == ["ConnectionRefused"] * 2
    assert errors["retryInMs"].tolist() == [500.0, 1000.0]
    assert events.loc[events["subtype"] == "turn_duration", "durationMs"].tolist() == [308149]
    assert len(events) == len(session.records)


def test_turns_count_what_a_person_typed(tmp_path: Path):
    session = Claude()
    caveat = "<local-command-caveat>Caveat: generated by local commands.</local-command-caveat>"
    session.user(caveat, isMeta=True)
    session.user("<command-name>/doctor</command-name>\n<command-message>doctor</command-message>")
    session.user("<local-command-stdout>All good</local-command-stdout>")
    session.user("Fix the bug")  # 1
    session.assistant("m1", use("t1", command="make"), stop="tool_use")
    session.user([result("t1")])
    session.user([text("[Request interrupted by user for tool use]")])
    session.user("<task-notification><task-id>a1</task-id></task-notification>")
    session.user("<command-message>review</command-message>\n<command-name>/review</command-name>")
    session.user([text("Review the diff carefully.")], isMeta=True)  # the expanded command
    session.assistant("m2", text("Reviewed."), stop="end_turn")
    t = load_transcripts(write_jsonl(tmp_path / f"{SID}.jsonl", session.records))
    users = t.blocks[t.blocks["role"] == "user"]
    assert users["message_kind"].tolist() == [
        "meta",
        "local_command",
        "command_output",
        "prompt",
        "tool_result",
        "interrupt",
        "task_notification",
        "command",
        "meta",
    ]
    assert t.blocks["turn"].max() == 2  # "Fix the bug" and /review: what was sent on purpose


def test_a_rewind_is_an_abandoned_branch_not_part_of_the_conversation(tmp_path: Path):
    session = Claude()
    session.user("Write a poem")
    answer = session.assistant("m1", text("Roses..."), stop="end_turn")
    session.user("Make it longer")  # abandoned: the user rewound to here and typed again
    session.assistant("m2", text("Roses, longer..."), stop="end_turn")
    session.user("Make it rhyme", parent=answer)
    session.assistant("m3", use("a", command="ls"), use("b", command="pwd"), stop="tool_use")
    first = session.records[-1]["uuid"]
    # Parallel results: each record hangs below its own tool_use record, off the chain.
    session.records[-1]["message"]["content"] = [use("a", command="ls")]
    second = session.assistant("m3", use("b", command="pwd"), stop="tool_use")
    session.user([result("a")], parent=first)
    session.user([result("b")], parent=second)
    session.assistant("m4", text("Roses rhyme."), stop="end_turn")
    t = load_transcripts(write_jsonl(tmp_path / f"{SID}.jsonl", session.records))
    b = t.blocks
    active = b[~b["abandoned"]]
    assert active["text"].tolist()[:3] == ["Write a poem", "Roses...", "Make it rhyme"]
    assert active["message_index"].tolist() == [0, 1, 2, 3, 3, 4, 4, 5]
    assert active.loc[active["block_type"] == "tool_result", "tool_use_id"].tolist() == ["a", "b"]
    gone = b[b["abandoned"]]
    assert gone["text"].tolist() == ["Make it longer", "Roses, longer..."]
    assert gone["message_index"].tolist() == [2, 3]  # continuing the fork after message 1
    assert b.index[b["abandoned"]].min() > b.index[~b["abandoned"]].max()  # after, not among
    assert t.calls.loc[t.calls["abandoned"], "call"].size == 1


def test_subagents_load_as_sidechains_linked_to_their_task_call(tmp_path: Path):
    project = tmp_path / "project"
    main = Claude()
    main.user("Spawn a helper")
    main.assistant("m1", use("toolu_task", "Task", prompt="Look around"), stop="tool_use")
    main.user(
        [result("toolu_task", [text("Agent launched. agentId: a77")])],
        toolUseResult={"agentId": "a77", "status": "async_launched"},
    )
    main.assistant("m2", text("Waiting."), stop="end_turn")
    write_jsonl(project / f"{SID}.jsonl", main.records)
    helper = Claude(agentId="a77")
    helper.user("Look around")
    helper.assistant("h1", use("h_t", command="ls"), usage={"input_tokens": 7, "output_tokens": 9})
    helper.user([result("h_t", "a.py")])
    helper.assistant("h2", text("Found a.py"), stop="end_turn")
    for record in helper.records:
        record["isSidechain"] = True
    write_jsonl(project / SID / "subagents" / "agent-a77.jsonl", helper.records)
    t = load_transcripts(project)
    side = t.blocks[t.blocks["sidechain"]]
    assert set(side["agent_id"]) == {"a77"} and set(side["session_id"]) == {SID}
    assert set(side["parent_tool_use_id"]) == {"toolu_task"}
    assert side["text"].tolist() == ["Look around", '{"command":"ls"}', "a.py", "Found a.py"]
    calls = t.calls.groupby(t.calls["agent_id"].astype(object).fillna("main")).size()
    assert calls.to_dict() == {"a77": 2, "main": 2}
    assert t.calls.loc[t.calls["agent_id"] == "a77", "output_tokens"].sum() == 9 + 5
    assert t.blocks.loc[~t.blocks["sidechain"], "agent_id"].isna().all()


def test_a_manual_compact_keeps_its_command_in_the_epoch_it_ran_in(tmp_path: Path):
    session = Claude()
    session.user("Build it", ts="2026-01-01T00:00:01Z")
    last = session.assistant("m1", text("Built."), stop="end_turn", ts="2026-01-01T00:00:02Z")
    boundary = session.add(
        "system",
        parent=None,
        subtype="compact_boundary",
        logicalParentUuid=last,
        compactMetadata={
            "trigger": "manual",
            "preTokens": 9000,
            "postTokens": 1200,
            "durationMs": 4500,
        },
        ts="2026-01-01T00:00:10Z",
    )
    summary = "This session is being continued from a previous conversation. Summary: built."
    session.user([text(summary)], parent=boundary, isCompactSummary=True, ts="2026-01-01T00:00:10Z")
    session.user(
        "<local-command-caveat>Caveat</local-command-caveat>",
        isMeta=True,
        ts="2026-01-01T00:00:03Z",
    )
    session.user("<command-name>/compact</command-name>", ts="2026-01-01T00:00:03Z")
    session.user(
        "<local-command-stdout>Compacted</local-command-stdout>", ts="2026-01-01T00:00:09Z"
    )
    session.user("Now test it", ts="2026-01-01T00:00:20Z")
    session.assistant("m2", text("Tested."), stop="end_turn", ts="2026-01-01T00:00:21Z")
    t = load_transcripts(write_jsonl(tmp_path / f"{SID}.jsonl", session.records))
    b = t.blocks
    first = b[(b["epoch"] == 1) & (b["message_index"] == 0)]
    assert first["text"].tolist() == [summary, "Now test it"]
    assert first["message_kind"].tolist() == ["compact_summary", "prompt"]
    moved = b[(b["epoch"] == 0) & (b["message_index"] == 2)]
    assert moved["message_kind"].tolist() == ["meta", "local_command", "command_output"]
    assert b["turn"].max() == 2
    (row,) = t.compactions.itertuples()
    assert (row.trigger, row.before_tokens, row.after_tokens, row.duration) == (
        "manual",
        9000,
        1200,
        4.5,
    )
    assert row.summary == summary and row.summary_chars == len(summary)
    assert row.layer == "on_request" and row.strategy == "summarise"


def test_stop_reason_context_and_cache_from_streamed_records(tmp_path: Path):
    session = Claude()
    session.user("Go")
    usage = {
        "input_tokens": 4,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 2000,
        "output_tokens": 7,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 0},
    }
    session.assistant("m1", text("Running."), usage=usage)  # streamed: stop_reason null
    session.assistant("m1", use("t1", command="ls"), usage=usage)
    session.user([result("t1")])
    session.assistant("m2", text("Done."), usage=usage, stop="end_turn")
    t = load_transcripts(write_jsonl(tmp_path / f"{SID}.jsonl", session.records))
    c = t.calls
    assert c["stop_reason"].tolist() == ["tool_use", "end_turn"]
    assert c["stop_reason_inferred"].tolist() == [True, False]
    assert c["context_sent_tokens"].tolist() == [2104, 2104]
    assert c["cache_creation_5m_input_tokens"].tolist() == [100, 100]
    assert c["message_index"].tolist() == [1, 3]


def test_tool_result_parts_are_kept_separately(tmp_path: Path):
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 10},
    }
    reference = {"type": "tool_reference", "tool_name": "Grep"}
    session = Claude()
    session.user([text("Look"), image])
    session.assistant("m1", use("t1", "Read", file_path="a.png"), stop="tool_use")
    session.user([result("t1", [text("first"), text("second"), image, reference])])
    t = load_transcripts(write_jsonl(tmp_path / f"{SID}.jsonl", session.records))
    b = t.blocks
    row = b[b["block_type"] == "tool_result"].iloc[0]
    assert row["text"] == "first\nsecond" and row["parts"] == 4
    pasted = b[b["block_type"] == "image"].iloc[0]
    assert (pasted["media_type"], pasted["chars"]) == ("image/png", 110)
    assert t.parts["part_type"].tolist() == ["text", "text", "image", "tool_reference"]
    assert t.parts["media_type"].tolist()[2] == "image/png"
    assert t.parts["chars"].tolist()[:3] == [5, 6, 110]
    assert (t.parts["tool_use_id"] == "t1").all()


def test_tool_inputs_are_the_files_own_bytes(tmp_path: Path):
    raw = '{"b":1.50,"a":"caf\\u00e9 \\/","n":123456789012345678901234567890,"e":1e5}'
    line = (
        '{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"assistant","uuid":"u1",'
        '"timestamp":"2026-01-01T00:00:00Z","message":{"id":"m","role":"assistant","model":"x",'
        '"content":[{"type":"tool_use","id":"t","name":"Edit","input":' + raw + "}],"
        '"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}}'
    )
    t = load_transcripts(write_jsonl(tmp_path / "s.jsonl", [line]))
    assert t.blocks["text"].tolist() == [raw]
    assert t.blocks["chars"].tolist() == [len(raw)]


# -- Codex ------------------------------------------------------------------------------------


def test_a_codex_rollout_loads_into_the_same_frames():
    t = load_transcripts(CODEX)
    b = t.blocks
    assert set(b["source"]) == {"codex"}
    assert set(b["session_id"]) == {"0199aaaa-0000-7000-8000-000000000001"}
    uses = b[b["block_type"] == "tool_use"]
    assert uses["text"].tolist() == ['{"cmd": "wc -l notes.txt", "timeout": 1.50}']
    results = b[b["block_type"] == "tool_result"]
    assert results["tool_name"].tolist() == ["exec_command"]
    assert results["text"].tolist() == ["42 notes.txt\n"]
    prompts = b[b["message_kind"] == "prompt"]
    assert prompts["text"].tolist() == ["Count the lines of notes.txt", "Now show the first line"]
    assert b["turn"].max() == 2
    c = t.calls  # the repeated token_count is not a second call
    assert c["call"].tolist() == [1, 2, 3]
    assert c["input_tokens"].tolist() == [200, 200, 600]
    assert c["cache_read_input_tokens"].tolist() == [1000, 1100, 0]
    assert c["context_sent_tokens"].tolist() == [1200, 1300, 600]
    assert set(c["model"]) == {"gpt-5.5"}
    (row,) = t.compactions.itertuples()
    assert row.epoch == 0 and row.summary.startswith("The user asked")
    after = b[b["epoch"] == 1]
    assert after["message_kind"].tolist()[:2] == ["compact_history", "compact_history"]
    for frame, spec in ((b, BLOCK_COLUMNS), (c, CALL_COLUMNS), (t.compactions, COMPACTION_COLUMNS)):
        assert list(frame.columns) == list(spec)


def test_a_codex_server_compaction_opens_the_next_epoch(tmp_path: Path):
    prompt = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Keep going"}],
    }
    sealed = {"type": "compaction", "encrypted_content": "gAAAA" + "x" * 95}
    records = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "c1"}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": prompt},
        {
            "timestamp": "2026-01-01T00:00:02Z",
            "type": "compacted",
            "payload": {"message": "", "replacement_history": [sealed, prompt]},
        },
    ]
    t = load_transcripts(write_jsonl(tmp_path / "rollout-c1.jsonl", records))
    after = t.blocks[t.blocks["epoch"] == 1]
    assert after["block_type"].tolist() == ["compaction", "text"]
    assert after["chars"].tolist() == [100, len("Keep going")]
    assert after["message_kind"].tolist() == ["compact_summary", "compact_history"]
    assert t.blocks["turn"].max() == 1  # the carried-over prompt is not a new turn


def test_a_codex_subagent_rollout_joins_its_parent_session(tmp_path: Path):
    parent = "0199aaaa-0000-7000-8000-000000000001"
    meta = {
        "id": "0199bbbb-0000-7000-8000-000000000002",
        "cwd": "/tmp/demo",
        "source": {"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1}}},
    }
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Check"}]}
    records = [
        {"timestamp": "2026-01-01T00:00:03Z", "type": "session_meta", "payload": meta},
        {"timestamp": "2026-01-01T00:00:04Z", "type": "response_item", "payload": item},
    ]
    shutil.copytree(CODEX, tmp_path / "sessions")
    write_jsonl(tmp_path / "sessions" / "rollout-child.jsonl", records)
    t = load_transcripts(tmp_path / "sessions")
    child = t.blocks[t.blocks["sidechain"]]
    assert child["text"].tolist() == ["Check"]
    assert set(child["session_id"]) == {parent}
    assert set(child["agent_id"]) == {"0199bbbb-0000-7000-8000-000000000002"}


# -- schema v2 --------------------------------------------------------------------------------


def v2(seq: int, kind: str, **fields: Any) -> dict[str, Any]:
    head = {"v": 2, "session_id": "v2s", "seq": seq, "ts": f"2026-02-01T00:00:{seq:02d}+00:00"}
    return {**head, "kind": kind, **fields}


def v2_session() -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """A v2 transcript and the histories it describes (epoch 0, epoch 1)."""
    size = {"messages": 1, "chars": 100, "tokens": 25, "tokens_exact": True}
    usage = {
        "input_tokens": 25,
        "output_tokens": 9,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 4},
    }
    ask = {"role": "user", "content": [text("List files")]}
    calls = {
        "role": "assistant",
        "content": [use("t1", "bash", command="ls"), use("t2", "bash", command="sleep 99")],
    }
    ok = {"type": "tool_result", "tool_use_id": "t1", "content": "a.py\nb.py"}
    cut = {"type": "tool_result", "tool_use_id": "t2", "content": "interrupted", "is_error": True}
    follow = {"role": "user", "content": [text("And now?")]}
    summary = {"role": "user", "content": [text("Summary: listed files.")]}
    records = [
        v2(1, "session_start", model="m", strategies=[{"name": "micro", "params": {}}]),
        v2(2, "ask_started", text="List files"),
        v2(3, "message", index=0, message=ask, turn=1, epoch=0),
        v2(
            4,
            "model_response",
            call=1,
            turn=1,
            model="m",
            stop_reason="tool_use",
            usage=usage,
            duration=1.0,
            cost_usd=0.002,
            context_before_micro=size,
            context_sent=size,
        ),
        v2(5, "message", index=1, message=calls, turn=1, epoch=0),
        v2(6, "tool_result", index=2, block_index=0, block=ok, turn=1, epoch=0, status="ok"),
        v2(7, "tool_finished", tool_use_id="t1", name="bash", input={"command": "ls"}),
        v2(
            8,
            "tool_result",
            index=2,
            block_index=1,
            block=cut,
            turn=1,
            epoch=0,
            status="interrupted",
        ),
        v2(9, "message", index=3, message=follow, turn=2, epoch=0),
        v2(
            10,
            "micro_compaction",
            strategy="clear-tool-uses",
            cleared_ids=["t1"],
            edits=[
                {
                    "index": 2,
                    "block_index": 0,
                    "block": {"type": "tool_result", "tool_use_id": "t1", "content": "[cleared]"},
                }
            ],
            cleared_tokens=5,
            chars_freed=9,
            before=size,
            after=size,
        ),
        v2(11, "message", index=0, message=summary, turn=2, epoch=1),
        v2(
            12,
            "compaction",
            strategy="summarise",
            layer="over_limit",
            trigger="auto",
            focus=None,
            before=size,
            after=size,
            success=True,
            duration=2.0,
            summary="Summary: listed files.",
            error=None,
            snapshot_path=None,
            summary_usage=usage,
            summary_cost_usd=0.01,
        ),
        v2(13, "strategies", strategies=[{"name": "window", "params": {"keep": 4}}]),
        v2(14, "brand_new_kind", anything={"nested": 1}),
    ]
    epoch0 = [ask, calls, {"role": "user", "content": [ok, cut]}, follow]
    return records, [epoch0, [summary]]


def test_schema_v2_records_assemble_the_same_history(tmp_path: Path):
    records, (epoch0, epoch1) = v2_session()
    t = load_transcripts(write_jsonl(tmp_path / "v2s" / "session.jsonl", records))
    b = t.blocks
    results = b[b["block_type"] == "tool_result"]
    assert results["message_index"].tolist() == [2, 2] and results["role"].tolist() == ["user"] * 2
    assert results["status"].tolist() == ["ok", "interrupted"]
    assert results["text"].tolist() == ["a.py\nb.py", "interrupted"]  # the original, not cleared
    assert results["compacted"].tolist() == [True, False]
    assert b.loc[b["epoch"] == 1, "message_kind"].tolist() == ["compact_summary"]
    c = t.calls.iloc[0]
    assert (
        c["cost_usd"],
        c["cache_creation_5m_input_tokens"],
        c["cache_creation_1h_input_tokens"],
    ) == (0.002, 3, 4)
    k = t.compactions.iloc[0]
    assert (k["strategy"], k["layer"], k["summary_cost_usd"]) == ("summarise", "over_limit", 0.01)
    kinds = t.events["kind"].tolist()
    assert "brand_new_kind" in kinds and "strategies" in kinds and len(kinds) == len(records)
    assert "anything_nested" in t.events.columns
    messages = [i for i in conversation(t, "v2s") if isinstance(i, Message)]
    assert [m.as_api() for m in messages if m.epoch == 0] == epoch0
    assert [m.as_api() for m in messages if m.epoch == 1] == epoch1


def test_conversation_puts_calls_and_compactions_in_place(tmp_path: Path):
    records, _ = v2_session()
    t = load_transcripts(write_jsonl(tmp_path / "v2s" / "session.jsonl", records))
    items = list(conversation(t, "v2s"))
    kinds = [type(i).__name__ + (f"{i.index}" if isinstance(i, Message) else "") for i in items]
    assert kinds == [
        "Message0",
        "Call",
        "Message1",
        "Message2",
        "Message3",
        "Compaction",
        "Message0",
    ]
    call = items[1]
    assert isinstance(call, Call) and call.usage["input_tokens"] == 25
    assert call.message_index == 1  # sent with one message; message 1 is its response
    compaction = items[5]
    assert isinstance(compaction, Compaction) and compaction.summary == "Summary: listed files."


# -- many sources, the lake, the repr ----------------------------------------------------------


def mixed_folder(root: Path) -> Path:
    records, _ = v2_session()
    write_jsonl(root / "evo" / "v2s" / "session.jsonl", records)
    session = Claude()
    session.user("Hello")
    session.assistant(
        "m1", text("Hi."), stop="end_turn", usage={"input_tokens": 2, "output_tokens": 11}
    )
    write_jsonl(root / "claude" / f"{SID}.jsonl", session.records)
    write_jsonl(root / "claude" / "title.jsonl", [{"type": "summary", "summary": "t"}])
    shutil.copytree(CODEX, root / "codex")
    return root


def test_a_folder_mixing_every_source_loads(tmp_path: Path):
    t = load_transcripts(mixed_folder(tmp_path / "all"))
    assert set(t.blocks["source"]) == {"evo_magic", "claude_code", "codex"}
    assert set(t.calls["source"]) == {"evo_magic", "claude_code", "codex"}
    assert t.skipped["claude_code: file without messages"] == 1
    for frame, spec in (
        (t.blocks, BLOCK_COLUMNS),
        (t.parts, PART_COLUMNS),
        (t.calls, CALL_COLUMNS),
        (t.compactions, COMPACTION_COLUMNS),
    ):
        assert list(frame.columns) == list(spec)
        assert not any(frame[name].dtype == object for name in frame.columns)


def test_the_lake_answers_sql_across_sessions(tmp_path: Path):
    t = load_transcripts(mixed_folder(tmp_path / "all"))
    lake = t.to_parquet(tmp_path / "lake")
    assert (lake / "blocks" / "source=codex").is_dir()
    expected = t.calls.groupby("source", observed=True)["output_tokens"].sum().to_dict()
    query = "select source, sum(output_tokens) as out from calls group by source order by source"
    for answer in (
        connect(lake).sql(query).df(),
        evo_magic.sql(query, lake),
        evo_magic.sql(query, tmp_path / "all"),
        t.sql(query),
    ):
        assert dict(zip(answer["source"], answer["out"], strict=True)) == expected
    sessions = connect(lake).sql("select count(distinct session_id) as n from blocks").fetchall()
    assert sessions == [(3,)]


def test_transcripts_say_what_they_hold(tmp_path: Path):
    t = load_transcripts(mixed_folder(tmp_path / "all"))
    text_repr = repr(t)
    for name in ("blocks", "parts", "calls", "compactions", "events", "skipped", "sql"):
        assert f".{name}" in text_repr
    assert f"{len(t.blocks):,} rows" in text_repr
    page = t._repr_html_()
    assert "<table>" in page and "message_kind" in page and "file without messages" in page


def test_loading_imports_nothing_heavy_until_used():
    code = (
        "import sys, evo_magic; heavy = {'pandas', 'duckdb', 'pyarrow'} & set(sys.modules); "
        "assert not heavy, heavy; evo_magic.load_transcripts; assert 'duckdb' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_frames_of_no_rows_keep_their_types(tmp_path: Path):
    session = Claude()
    session.user("Hello")
    t = load_transcripts(write_jsonl(tmp_path / "x.jsonl", session.records))
    assert len(t.calls) == 0 and len(t.parts) == 0
    assert str(t.calls["timestamp"].dtype) == "datetime64[us, UTC]"
    assert isinstance(t.compactions, pd.DataFrame) and list(t.compactions.columns) == list(
        COMPACTION_COLUMNS
    )


@pytest.mark.parametrize("layout", ["old", "new"])
def test_a_subagent_file_alone_is_not_empty(tmp_path: Path, layout: str):
    helper = Claude(agentId="b1")
    helper.user("Task prompt")
    helper.assistant("h1", text("Done"), stop="end_turn")
    for record in helper.records:
        record["isSidechain"] = True
    name = "agent-b1.jsonl" if layout == "old" else f"{SID}/subagents/agent-b1.jsonl"
    t = load_transcripts(write_jsonl(tmp_path / name, helper.records))
    assert t.blocks["text"].tolist() == ["Task prompt", "Done"]
    assert set(t.blocks["agent_id"]) == {"b1"} and t.blocks["sidechain"].all()


# -- Claude Code compactions ---------------------------------------------------------------------


def test_a_compaction_gets_its_size_after_and_its_own_call(tmp_path: Path):
    from support.claude_code_session import SID, write_session

    project = write_session(tmp_path, calls=30, seed=3)
    main = [json.loads(line) for line in (project / f"{SID}.jsonl").read_text().splitlines()]
    boundary = next(r for r in main if r.get("subtype") == "compact_boundary")
    assert "postTokens" not in boundary["compactMetadata"]
    # The next call after the boundary, counted from the file: its prompt's tokens.
    later = main[main.index(boundary) :]
    first = next(r for r in later if r["type"] == "assistant" and r["message"].get("usage"))
    usage = first["message"]["usage"]
    expected_after = sum(
        usage[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    # Claude Code writes the summarising call beside the session as agent-acompact-<id>.jsonl.
    agent = "acompact-5f2e9c1d"
    own = {"sessionId": SID, "isSidechain": True, "agentId": agent, "version": "2.1.16"}
    summary_usage = {
        "input_tokens": 9,
        "cache_read_input_tokens": 41_000,
        "cache_creation_input_tokens": 0,
        "output_tokens": 1_700,
    }
    stamp = boundary["timestamp"].replace("Z", "").rsplit(":", 1)[0]  # a minute before, or so
    records = [
        own
        | {
            "type": "user",
            "uuid": "c-1",
            "parentUuid": None,
            "timestamp": f"{stamp}:00.000Z",
            "message": {"role": "user", "content": "Your task is to create a detailed summary"},
        },
        own
        | {
            "type": "assistant",
            "uuid": "c-2",
            "parentUuid": "c-1",
            "timestamp": f"{stamp}:00.500Z",
            "message": {
                "id": "msg_compact",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "text", "text": "<summary>...</summary>"}],
                "stop_reason": "end_turn",
                "usage": summary_usage,
            },
        },
    ]
    assert records[-1]["timestamp"] <= boundary["timestamp"]
    write_jsonl(project / SID / "subagents" / f"agent-{agent}.jsonl", records)

    t = load_transcripts(project)
    row = t.compactions.iloc[0]
    assert row["after_tokens"] == expected_after and not row["after_tokens_exact"]
    assert row["before_tokens"] == boundary["compactMetadata"]["preTokens"]
    assert row["summary_output_tokens"] == 1_700
    assert row["summary_cache_read_input_tokens"] == 41_000
    # Not an ordinary subagent: no rows or calls of its own; its records are still events.
    assert agent not in set(t.blocks["agent_id"].dropna()) | set(t.calls["agent_id"].dropna())
    assert (t.events["agent_id"].astype(object) == agent).sum() == 2
    assert t.skipped["claude_code: compaction's own call (linked to its compaction)"] == 1
