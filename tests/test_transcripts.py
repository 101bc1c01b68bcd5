"""Transcripts: the writer on disk, and `load_transcripts` back into typed DataFrames."""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.fake_api import FakeAnthropic, reply, text, tool_use
from support.responders import offline_responder

import evo_magic.analysis as analysis
import evo_magic.transcript as transcript_module
from evo_magic.analysis import (
    BLOCK_COLUMNS,
    CALL_COLUMNS,
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    TranscriptError,
    TranscriptWarning,
    load_transcripts,
)
from evo_magic.analysis.formats.evo import READS_VERSION
from evo_magic.compact.policy import CompactPolicy
from evo_magic.events import (
    CompactionFinished,
    Event,
    MessageAppended,
    MicroCompacted,
    ModelResponded,
    ToolResultAppended,
)
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import LargeOutputs, MicroCompact, Summarise
from evo_magic.strategies.micro import PLACEHOLDER
from evo_magic.transcript import LOG_NAME, SCHEMA_VERSION, Transcript, new_session_id

DOCS = Path(__file__).resolve().parent.parent / "docs" / "transcripts.md"
SECRET = "sk-ant-test-SECRET123456"


def model_on(server: FakeAnthropic) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-5-5", client=server.client(max_retries=0))


def dtype_name(dtype: Any) -> str:
    text = str(dtype)
    return "datetime" if text.startswith("datetime64") else text


def assert_typed(frame: pd.DataFrame, spec: dict[str, str]) -> None:
    assert list(frame.columns[: len(spec)]) == list(spec)
    assert {name: dtype_name(frame[name].dtype) for name in spec} == spec
    assert not any(frame[name].dtype == object for name in frame.columns)


def block_texts(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(role, block_type, text) of each block, as the blocks frame should show them."""
    rows = []
    for block in message["content"]:
        kind = block["type"]
        if kind == "text":
            value = block["text"]
        elif kind == "tool_use":
            value = json.dumps(block["input"], ensure_ascii=False, separators=(",", ":"))
        else:
            value = block["content"]
        rows.append((message["role"], kind, value))
    return rows


# -- a whole session through the real SDK and the fake ----------------------------------------


@pytest.fixture
def recorded(workspace: Path) -> dict[str, Any]:
    """Two asks of the offline script with a small limit (micro and full compactions happen),
    with what the session emitted and what its history was at each step."""
    history: dict[tuple[int, int], dict[str, Any]] = {}
    cleared_in_memory: dict[str, str] = {}
    events: list[Event] = []
    with FakeAnthropic(offline_responder()) as server:
        # Eager micro-compaction: clearings to record (cache-aware waits for one that pays).
        policy = CompactPolicy(context_limit=6_000)
        eager = [LargeOutputs(), MicroCompact(keep_recent=1, cache_aware=False), Summarise()]
        session = Session(workspace, model=model_on(server), policy=policy, strategies=eager)

        def observe(event: Event) -> None:
            events.append(event)
            if isinstance(event, MessageAppended):  # a copy: micro-compaction edits in place
                history[(event.epoch, event.index)] = copy.deepcopy(event.message)
            if isinstance(event, ToolResultAppended):  # results join their message one by one
                key = (event.epoch, event.index)
                history.setdefault(key, {"role": "user", "content": []})["content"].append(
                    copy.deepcopy(event.block)
                )
            if isinstance(event, MicroCompacted):
                for message in session.messages:
                    for block in message["content"]:
                        if block.get("tool_use_id") in event.cleared_ids:
                            cleared_in_memory[block["tool_use_id"]] = block["content"]

        session.subscribe(observe)
        session.ask("Survey the project and compact when useful.")
        session.ask("Look again, please.")
        session.close()
        server.assert_no_rejections()
    return {
        "session": session,
        "history": history,
        "cleared_in_memory": cleared_in_memory,
        "events": events,
    }


def test_blocks_equal_the_history_of_every_epoch(recorded: dict[str, Any]):
    session, history = recorded["session"], recorded["history"]
    t = load_transcripts(session.directory)
    blocks = t.blocks
    assert set(blocks["epoch"]) == {e for e, _ in history} and len(set(blocks["epoch"])) >= 2
    for (epoch, index), message in history.items():
        rows = blocks[(blocks["epoch"] == epoch) & (blocks["message_index"] == index)]
        got = list(zip(rows["role"], rows["block_type"], rows["text"], strict=True))
        assert got == block_texts(message), (epoch, index)
        assert list(rows["block_index"]) == list(range(len(rows)))
    assert len(blocks) == sum(len(m["content"]) for m in history.values())
    # The last epoch is the session's current history.
    last = blocks[blocks["epoch"] == blocks["epoch"].max()]
    assert last["message_index"].max() + 1 == len(session.messages)
    assert set(blocks["source"]) == {"evo_magic"}
    assert set(blocks["session_id"]) == {session.session_id}


def test_compacted_rows_keep_the_original_tool_output(recorded: dict[str, Any]):
    blocks = load_transcripts(recorded["session"].directory).blocks
    cleared = recorded["cleared_in_memory"]
    assert cleared, "the small limit should have made micro-compaction run"
    compacted = blocks[blocks["compacted"]]
    assert set(compacted["tool_use_id"]) == set(cleared)
    for row in compacted.itertuples():
        assert cleared[row.tool_use_id] == PLACEHOLDER  # in memory it was replaced...
        assert row.text != PLACEHOLDER and row.chars > len(PLACEHOLDER)  # ...on disk it is not
        assert row.block_type == "tool_result" and not pd.isna(row.tool_name)
    results = blocks[blocks["block_type"] == "tool_result"]
    assert not (results["text"] == PLACEHOLDER).any()


def test_calls_and_compactions_match_the_events(recorded: dict[str, Any]):
    t = load_transcripts(recorded["session"].directory)
    events = recorded["events"]
    responses = [e for e in events if isinstance(e, ModelResponded)]
    assert list(t.calls["call"]) == [e.call for e in responses]
    assert list(t.calls["input_tokens"]) == [e.usage.input_tokens for e in responses]
    assert list(t.calls["context_sent_chars"]) == [e.context_sent.chars for e in responses]
    assert list(t.calls["context_before_micro_chars"]) == [
        e.context_before_micro.chars for e in responses
    ]
    assert list(t.calls["model"]) == [e.model for e in responses]

    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert len(finished) >= 2 and {e.trigger for e in finished} >= {"auto", "model"}
    c = t.compactions
    assert list(c["trigger"]) == [e.trigger for e in finished]
    assert list(c["focus"].fillna("")) == [e.focus or "" for e in finished]
    assert list(c["success"]) == [e.success for e in finished]
    assert list(c["before_chars"]) == [e.before.chars for e in finished]
    assert list(c["after_chars"]) == [e.after.chars for e in finished]
    assert list(c["after_messages"]) == [e.after.messages for e in finished]
    assert list(c["summary_chars"]) == [e.summary_chars for e in finished]
    assert list(c["epoch"]) == list(range(len(finished)))  # all succeeded, in turn
    for event in finished:  # the snapshot holds the history as it was before
        lines = Path(event.snapshot_path or "").read_text().splitlines()
        assert len(lines) == event.before.messages


def test_frames_have_the_documented_dtypes(recorded: dict[str, Any]):
    t = load_transcripts(recorded["session"].directory)
    assert_typed(t.blocks, BLOCK_COLUMNS)
    assert_typed(t.calls, CALL_COLUMNS)
    assert_typed(t.compactions, COMPACTION_COLUMNS)
    assert_typed(t.events, EVENT_COLUMNS)
    assert str(t.blocks["timestamp"].dt.tz) == "UTC"
    assert t.blocks["timestamp"].is_monotonic_increasing
    kinds = t.events["kind"].value_counts()
    assert kinds["message"] == sum(isinstance(e, MessageAppended) for e in recorded["events"])
    assert kinds["session_start"] == 1 and kinds["tool_finished"] > 0
    assert t.events["seq"].tolist() == list(range(1, len(t.events) + 1))


def test_docs_match_the_records_and_the_frames(recorded: dict[str, Any]):
    docs = DOCS.read_text()
    sections = re.split(r"^#### `(\w+)`$", docs, flags=re.M)
    fields = {
        kind: set(re.findall(r"^\| `(\w+)` \|", body.split("\n## ")[0], flags=re.M))
        for kind, body in zip(sections[1::2], sections[2::2], strict=True)
    }
    common = {"v", "session_id", "seq", "ts", "kind"}
    log = recorded["session"].directory / LOG_NAME
    for line in log.read_text().splitlines():
        record = json.loads(line)
        assert set(record) - common <= fields[record["kind"]], record["kind"]
    for event in recorded["events"]:
        record = event.as_record()
        if record["kind"] in fields:
            assert set(record) - {"kind"} == fields[record["kind"]], record["kind"]
    for name, spec in (
        ("blocks", BLOCK_COLUMNS),
        ("calls", CALL_COLUMNS),
        ("compactions", COMPACTION_COLUMNS),
        ("events", EVENT_COLUMNS),
    ):
        body = docs.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        rows = dict(re.findall(r"^\| `(\w+)` \| ([\w\[\], ]+) \|", body, flags=re.M))
        identity = dict(
            re.findall(r"^\| `(\w+)` \| ([\w\[\], ]+) \|", docs.split("Identity")[1], re.M)
        )
        documented = {**identity, **rows}
        for column, dtype in spec.items():
            expected = "datetime64[us, UTC]" if dtype == "datetime" else dtype
            assert documented.get(column) == expected, (name, column)


# -- merged messages, resets, several sessions -----------------------------------------------


def test_a_request_after_tool_results_is_its_own_message(workspace: Path, fake, claude):
    fake.queue(reply(tool_use("bash", {"command": "echo first"}, id="toolu_m1")))
    session = Session(workspace, model=claude, max_turns=1)
    session.ask("Run one command.")  # stops after the tool batch: a trailing results message
    fake.queue(reply(text("Done.")))
    session.ask("Go on.")  # its own message after the results, recorded once each
    session.close()
    blocks = load_transcripts(session.directory).blocks
    results = blocks[blocks["message_index"] == 2]
    request = blocks[blocks["message_index"] == 3]
    assert list(results["block_type"]) == ["tool_result"] and list(request["block_type"]) == [
        "text"
    ]
    assert "first" in results["text"].iloc[0] and request["text"].iloc[0] == "Go on."
    assert results["tool_name"].iloc[0] == "bash"
    assert (results["turn"].iloc[0], request["turn"].iloc[0]) == (1, 2)
    assert not blocks.duplicated(["epoch", "message_index", "block_index"]).any()


def test_a_reset_starts_a_new_segment(workspace: Path, fake, claude):
    fake.queue(reply(text("One.")), reply(text("Two.")))
    session = Session(workspace, model=claude)
    session.ask("First.")
    session.reset()
    session.ask("Second.")
    session.close()
    blocks = load_transcripts(session.directory).blocks
    assert list(zip(blocks["segment"], blocks["message_index"], blocks["text"], strict=True)) == [
        (0, 0, "First."),
        (0, 1, "One."),
        (1, 0, "Second."),
        (1, 1, "Two."),
    ]


def test_a_root_and_a_glob_load_every_session(tmp_path: Path):
    root = tmp_path / "root"
    for prompt in ("alpha", "beta"):
        log = Transcript(root)
        message = {"role": "user", "content": [{"type": "text", "text": prompt}]}
        log.write("message", {"index": 0, "message": message, "turn": 1, "epoch": 0})
        log.close()
    for path in (root, str(root / "*" / LOG_NAME), str(root / "*")):
        t = load_transcripts(path)
        assert sorted(t.blocks["text"]) == ["alpha", "beta"], path
        assert t.blocks["session_id"].nunique() == 2 and len(t.files) == 2


# -- bad files ---------------------------------------------------------------------------------


def write_log(directory: Path, lines: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOG_NAME
    path.write_text("".join(line + "\n" for line in lines))
    return path


def record(seq: int, kind: str = "message", **fields: Any) -> str:
    if kind == "message" and not fields:
        message = {"role": "user", "content": [{"type": "text", "text": f"prompt {seq}"}]}
        fields = {"index": seq - 1, "message": message, "turn": 1, "epoch": 0}
    head = {"v": SCHEMA_VERSION, "session_id": "s", "seq": seq, "ts": "2026-01-02T03:04:05+00:00"}
    return json.dumps({**head, "kind": kind, **fields}, separators=(",", ":"))


def test_torn_and_corrupt_lines_are_skipped_with_one_warning(tmp_path: Path):
    lines = [record(1), "this is not JSON", record(2), record(3, "notice", code="x")]
    lines += [record(4), record(5)[:40]]  # a torn last line, as a crash leaves it
    path = write_log(tmp_path / "s", lines)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = load_transcripts(path)
    # Only ours: a warning of another test's garbage, collected meanwhile, is not this one's.
    ours = [w for w in caught if issubclass(w.category, TranscriptWarning)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert str(path) in message and "2 unreadable" in message and "2, 6" in message
    assert list(t.blocks["text"]) == ["prompt 1", "prompt 2", "prompt 4"]
    assert t.skipped == {"unreadable line": 2}


def test_a_corrupt_record_of_any_kind_is_reported_at_load_once(tmp_path: Path):
    corrupt = record(2, "notice", code="x")[:-1] + ',"oops"}'  # looks whole, is not JSON
    path = write_log(tmp_path / "s", [record(1), corrupt, record(3)])
    with pytest.warns(TranscriptWarning, match=r"1 unreadable .*line: 2$"):
        t = load_transcripts(path)
    assert list(t.blocks["text"]) == ["prompt 1", "prompt 3"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # already reported: events does not warn again
        assert t.events["seq"].tolist() == [1, 3]
    assert t.skipped == {"unreadable line": 1}


def test_a_newer_schema_is_refused(tmp_path: Path):
    newer = json.loads(record(2))
    newer["v"] = READS_VERSION + 1
    path = write_log(tmp_path / "s", [record(1), json.dumps(newer)])
    with pytest.raises(TranscriptError, match=rf"line 2: .*version {READS_VERSION + 1}.*newer"):
        load_transcripts(path)
    assert issubclass(TranscriptError, ValueError)


@pytest.mark.parametrize("case", ["missing", "empty dir", "glob", "blank"])
def test_nothing_to_load_is_an_error_naming_the_path(tmp_path: Path, case: str):
    if case == "missing":
        path, named = tmp_path / "nowhere", str(tmp_path / "nowhere")
    elif case == "empty dir":
        (tmp_path / "d").mkdir()
        path = named = str(tmp_path / "d")
    elif case == "glob":
        path = named = str(tmp_path / "*" / "nothing*.jsonl")
    else:
        path, named = "  ", "empty"
    with pytest.raises(TranscriptError, match=re.escape(str(named))):
        load_transcripts(path)


def test_a_file_of_another_format_is_an_error(tmp_path: Path):
    path = tmp_path / "other.jsonl"
    path.write_text('{"name": "not a transcript"}\n')
    with pytest.raises(TranscriptError, match="neither an evo_magic transcript"):
        load_transcripts(path)


def test_every_warning_of_a_load_points_at_the_code_that_loaded(tmp_path: Path):
    # A torn line and a file in no known format: both warnings name this file and the line of
    # the call, not a frame inside evo_magic or above the caller.
    write_log(tmp_path / "s", [record(1), "this is not JSON"])
    (tmp_path / "other.jsonl").write_text('{"name": "not a transcript"}\n')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_transcripts(tmp_path)
    ours = [w for w in caught if issubclass(w.category, TranscriptWarning)]
    assert len(ours) == 2
    assert {w.filename for w in ours} == {__file__}
    assert len({w.lineno for w in ours}) == 1


# -- the writer --------------------------------------------------------------------------------

CRASH_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from evo_magic.transcript import Transcript

    log = Transcript(Path(sys.argv[1]), "crash")
    print("ready", flush=True)
    blob = "x" * 20_000
    index = 0
    while True:
        message = {"role": "user", "content": [{"type": "text", "text": f"{index} {blob}"}]}
        log.write("message", {"index": index, "message": message, "turn": 1, "epoch": 0})
        index += 1
    """
)


def test_a_killed_writer_loses_at_most_the_last_record(tmp_path: Path):
    process = subprocess.Popen(
        [sys.executable, "-c", CRASH_WRITER, str(tmp_path)], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        log = tmp_path / "crash" / LOG_NAME
        deadline = time.monotonic() + 20
        while (not log.exists() or log.stat().st_size < 3_000_000) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = load_transcripts(log)
    assert len(caught) <= 1 and t.skipped.get("unreadable line", 0) <= 1
    n = len(t.blocks)
    assert n >= 100
    assert list(t.blocks["message_index"]) == list(range(n))  # nothing before the last is lost
    assert all(value.startswith(f"{i} x") for i, value in enumerate(t.blocks["text"]))
    assert list(t.events["seq"]) == list(range(1, n + 1))


def test_two_sessions_in_the_same_second_never_collide(tmp_path: Path, monkeypatch):
    now = dt.datetime(2026, 5, 12, 14, 15, 3, tzinfo=dt.UTC)
    first, second = new_session_id(now), new_session_id(now)
    assert first != second and first[:15] == second[:15] == "20260512-141503"
    a, b = Transcript(tmp_path, first), Transcript(tmp_path, second)
    assert a.directory != b.directory and a.directory.is_dir() and b.directory.is_dir()
    with pytest.raises(ValueError, match="already exists"):
        Transcript(tmp_path, first)
    # A drawn id that is taken (another process, same second, same random suffix) is redrawn.
    drawn = iter([first, first, "20260512-141503-0000beef"])
    monkeypatch.setattr(transcript_module, "new_session_id", lambda now=None: next(drawn))
    c = Transcript(tmp_path)
    assert c.session_id == "20260512-141503-0000beef"
    for log in (a, b, c):
        log.close()


def test_the_api_key_never_reaches_a_file(workspace: Path, fake, claude, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    (workspace / "leak.txt").write_text(f"token={SECRET}\n" + "filler line\n" * 200)
    fake.queue(
        reply(tool_use("read_file", {"path": "leak.txt"}, id="toolu_s1")),
        reply(text(f"I saw {SECRET} in the file.")),
        reply(text(f"Summary: the file holds {SECRET}.")),  # the summariser repeats it too
    )
    spills = [LargeOutputs(limit=500, preview_chars=100), MicroCompact(), Summarise()]
    session = Session(workspace, model=claude, strategies=spills)  # the output spills
    session.ask(f"Is the key {SECRET} in leak.txt?")
    assert session.compact().success
    session.close()
    files = [p for p in session.directory.rglob("*") if p.is_file()]
    assert {p.parent.name for p in files} >= {session.session_id, "snapshots", "tool-results"}
    for path in files:
        content = path.read_bytes()
        assert SECRET.encode() not in content, path
    assert b"[redacted]" in (session.directory / LOG_NAME).read_bytes()
    assert SECRET not in "".join(load_transcripts(session.directory).blocks["text"])


def test_appending_is_cheap_and_closing_is_safe(tmp_path: Path):
    log = Transcript(tmp_path)
    content = [{"type": "text", "text": "output line\n" * 150}]
    fields = {"index": 0, "message": {"role": "user", "content": content}, "turn": 1, "epoch": 0}
    started = time.perf_counter()
    for _ in range(500):
        log.write("message", fields)
    per_record = (time.perf_counter() - started) / 500
    assert per_record < 0.001  # typically a few tens of microseconds
    assert log.path.read_text().count("\n") == 500  # flushed: readable before close
    with pytest.raises(TypeError):
        log.write("notice", {"code": object()})
    assert log.write("notice", {"code": "ok", "message": ""}) == 501  # no gap in seq
    log.close()
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.write("notice", {})


def test_import_evo_magic_does_not_import_pandas():
    code = "import sys, evo_magic; assert 'pandas' not in sys.modules, 'pandas imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- Claude Code sessions ----------------------------------------------------------------------


def claude_code_session(path: Path) -> Path:
    """A small Claude Code session file in its documented shape, with one compact boundary."""
    sid = "0b5c3f7e-1111-2222-3333-444455556666"

    def entry(n: int, kind: str, **fields: Any) -> dict[str, Any]:
        return {
            "parentUuid": f"u{n - 1}" if n > 1 else None,
            "isSidechain": False,
            "sessionId": sid,
            "type": kind,
            "uuid": f"u{n}",
            "timestamp": f"2025-06-01T12:00:{n:02d}.000Z",
            **fields,
        }

    def assistant(n: int, message_id: str, *content: dict[str, Any], stop: Any = None) -> Any:
        usage = {"input_tokens": 10 * n, "output_tokens": n, "cache_read_input_tokens": 5}
        message = {"id": message_id, "role": "assistant", "model": "claude-sonnet-4-5"}
        message |= {"content": list(content), "stop_reason": stop, "usage": usage}
        return entry(n, "assistant", message=message)

    summary_text = "This session is being continued from a previous conversation. Summary: a.py"
    records = [
        {"type": "summary", "summary": "Fix the bug", "leafUuid": "u9"},
        entry(1, "user", message={"role": "user", "content": "Fix the bug in a.py"}),
        assistant(2, "msg_1", {"type": "text", "text": "Looking."}),
        assistant(
            3,
            "msg_1",
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
            stop="tool_use",
        ),
        entry(
            4,
            "user",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
            },
        ),
        assistant(5, "msg_2", {"type": "text", "text": "Found it."}, stop="end_turn"),
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        entry(
            6,
            "system",
            subtype="compact_boundary",
            content="Conversation compacted",
            compactMetadata={"trigger": "manual", "preTokens": 12345},
        ),
        entry(
            7,
            "user",
            isCompactSummary=True,
            message={"role": "user", "content": [{"type": "text", "text": summary_text}]},
        ),
        entry(8, "user", message={"role": "user", "content": "Now add tests"}),
        assistant(
            9,
            "msg_3",
            {"type": "thinking", "thinking": "Tests go in tests/."},
            {"type": "text", "text": "Adding tests."},
            stop="end_turn",
        ),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_claude_code_session_loads_into_the_same_frames(tmp_path: Path):
    path = claude_code_session(tmp_path / "0b5c3f7e.jsonl")
    t = load_transcripts(path)
    b = t.blocks
    assert set(b["source"]) == {"claude_code"}
    assert set(b["session_id"]) == {"0b5c3f7e-1111-2222-3333-444455556666"}
    got = list(
        zip(
            b["epoch"],
            b["message_index"],
            b["block_index"],
            b["role"],
            b["block_type"],
            strict=True,
        )
    )
    assert got == [
        (0, 0, 0, "user", "text"),
        (0, 1, 0, "assistant", "text"),  # two records of one streamed response: one message
        (0, 1, 1, "assistant", "tool_use"),
        (0, 2, 0, "user", "tool_result"),
        (0, 3, 0, "assistant", "text"),
        (1, 0, 0, "user", "text"),  # the summary opens epoch 1 ...
        (1, 0, 1, "user", "text"),  # ... and the next prompt joins it
        (1, 1, 0, "assistant", "thinking"),
        (1, 1, 1, "assistant", "text"),
    ]
    assert list(b["turn"]) == [1, 1, 1, 1, 1, 1, 2, 2, 2]
    results = b[b["block_type"] == "tool_result"]
    assert results["tool_name"].tolist() == ["Bash"] and results["text"].tolist() == ["a.py"]
    # the input exactly as the file spells it (this fixture was written with spaces)
    assert b.loc[b["block_type"] == "tool_use", "text"].tolist() == ['{"command": "ls"}']
    assert b["timestamp"].iloc[0] == pd.Timestamp("2025-06-01T12:00:01Z")

    (row,) = t.compactions.itertuples()
    assert (row.trigger, row.before_tokens, row.epoch, row.success) == ("manual", 12345, 0, True)
    assert row.summary_chars == len(b["text"].iloc[5])
    assert t.calls["call"].tolist() == [1, 2, 3]
    assert t.calls["input_tokens"].tolist() == [30, 50, 90]  # the last record of msg_1 wins
    assert t.calls["stop_reason"].tolist() == ["tool_use", "end_turn", "end_turn"]
    assert t.skipped == {}
    assert_typed(b, BLOCK_COLUMNS)
    assert_typed(t.compactions, COMPACTION_COLUMNS)
    # every record is an event, the ones no other frame shows included
    assert set(t.events["kind"]) == {
        "summary",
        "user",
        "assistant",
        "system",
        "file-history-snapshot",
    }


def test_claude_code_and_evo_magic_files_load_together(tmp_path: Path):
    (tmp_path / "cc").mkdir()
    claude_code_session(tmp_path / "cc" / "one.jsonl")
    log = Transcript(tmp_path / "evo")
    message = {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    log.write("message", {"index": 0, "message": message, "turn": 1, "epoch": 0})
    size = {"messages": 1, "chars": 60, "tokens": 15, "tokens_exact": False}
    usage = {"input_tokens": 15, "output_tokens": 3}
    usage |= {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    response = {"call": 1, "turn": 1, "model": "claude-x", "stop_reason": "end_turn"}
    response |= {"usage": usage, "duration": 0.5}
    response |= {"context_before_micro": size, "context_sent": size}
    log.write("model_response", response)
    log.close()
    t = load_transcripts(str(tmp_path / "*" / "*.jsonl"))
    assert set(t.blocks["source"]) == {"claude_code"}  # evo's log sits one level deeper
    t = load_transcripts(str(tmp_path / "**" / "*.jsonl"))
    assert set(t.blocks["source"]) == {"claude_code", "evo_magic"}
    assert t.calls["source"].tolist() == ["claude_code"] * 3 + ["evo_magic"]
    assert t.calls["model"].tolist() == ["claude-sonnet-4-5"] * 3 + ["claude-x"]
    assert t.calls["duration"].iloc[-1] == 0.5 and t.calls["context_sent_chars"].iloc[-1] == 60
    assert_typed(t.blocks, BLOCK_COLUMNS)
    assert_typed(t.calls, CALL_COLUMNS)


def test_history_frame_shows_the_history_as_it_is_now(recorded: dict[str, Any]):
    session = recorded["session"]
    frame = analysis.history_frame(session.messages)
    assert_typed(frame, analysis.HISTORY_COLUMNS)
    assert len(frame) == sum(len(m["content"]) for m in session.messages)
    assert list(frame["message_index"].unique()) == list(range(len(session.messages)))
    blocks = load_transcripts(session.directory).blocks
    last = blocks[blocks["epoch"] == blocks["epoch"].max()].reset_index(drop=True)
    columns = ["message_index", "block_index", "block_type", "tool_name", "tool_use_id"]
    pd.testing.assert_frame_equal(frame[columns], last[columns], check_categorical=False)
    assert len(analysis.history_frame([])) == 0
