"""Never a broken session, never a lost output: interrupts at awkward moments, observers and a
transcript that fail, crashes mid-batch, servers that are not quite the API, back-off of the
model's compact tool, malformed streams, truncated summaries and clear error messages.

Real signals, real processes, the real SDK against the loopback fake.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.fake_api import (
    FakeAnthropic,
    RawStream,
    Reply,
    reply,
    sse_events,
    text,
    tool_use,
    validate_messages,
)
from support.responders import offline_responder

from evo_magic import load_transcripts
from evo_magic.compact.policy import CompactPolicy
from evo_magic.events import MessageAppended, Notice, ToolFinished
from evo_magic.history import History
from evo_magic.models import AnthropicModel, FunctionModel, ModelError, ModelRequest
from evo_magic.session import ObserverError, Session
from evo_magic.tools import Tool, default_tools, sandbox_status

TESTS = Path(__file__).parent


def model_on(server: FakeAnthropic) -> AnthropicModel:
    return AnthropicModel(client=server.client(max_retries=0))


def records(session: Session) -> list[dict[str, Any]]:
    return [json.loads(line) for line in session.transcript_path.read_text().splitlines()]


def holds_tool_use(event: object) -> bool:
    return isinstance(event, MessageAppended) and any(
        b.get("type") == "tool_use" for b in event.message["content"]
    )


# -- 1, 2: the history stays valid whatever stops a turn ---------------------------------------


def test_sigint_when_the_tool_call_joins_the_history(workspace: Path):
    """The window the meter widened: SIGINT arrives while observers see the assistant's turn."""
    with FakeAnthropic(offline_responder()) as server:
        session = Session(workspace, model=model_on(server))
        fired = []

        def interrupt(event: object) -> None:
            if holds_tool_use(event) and not fired:
                fired.append(True)
                os.kill(os.getpid(), signal.SIGINT)

        session.subscribe(interrupt)
        with pytest.raises(KeyboardInterrupt):
            session.ask("Survey the project.")
        assert validate_messages(session.messages) is None
        last = session.messages[-1]["content"]
        assert all(b["type"] == "tool_result" and b["is_error"] for b in last)
        assert "Not run" in last[0]["content"]
        assert session.compact("after the interrupt").success
        session.ask("Go on.")
        server.assert_no_rejections()


def test_an_observer_that_raises_mid_batch(workspace: Path):
    with FakeAnthropic(offline_responder()) as server:
        session = Session(workspace, model=model_on(server))
        calls = []

        def flaky(event: object) -> None:
            if isinstance(event, ToolFinished) and not calls:
                calls.append(event)
                raise RuntimeError("the meter broke")

        session.subscribe(flaky)
        with pytest.raises(ObserverError, match="the meter broke.*history is kept"):
            session.ask("Survey the project.")
        assert validate_messages(session.messages) is None
        # The tool that finished kept its real output; the one after it was not run.
        first, second = session.messages[-1]["content"]
        assert not first.get("is_error") and "inventory.py" in first["content"]
        assert second["is_error"] and "Not run" in second["content"]
        session.ask("Go on.")
        server.assert_no_rejections()


FULL_DISK_SCRIPT = """
import json, os, resource, signal, sys
sys.path.insert(0, {tests!r})
from support.responders import offline_responder
from support.fake_api import FakeAnthropic, validate_messages
from evo_magic.demo import make_demo_workspace
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.transcript import TranscriptWriteError

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
report = {{}}
with FakeAnthropic(offline_responder()) as server:
    workspace = make_demo_workspace({workspace!r})
    session = Session(workspace, model=AnthropicModel(client=server.client(max_retries=0)))
    session.ask("Survey the project.")
    size = session.transcript_path.stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 3_000, resource.RLIM_INFINITY))
    try:
        session.ask("Survey it again.")
    except TranscriptWriteError as exc:
        report["error"] = str(exc)
    report["valid_after_failure"] = validate_messages(session.messages) is None
    report["waiting"] = session._transcript.pending  # records waiting in memory
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    report["text"] = session.ask("And once more.").text
    report["valid"] = validate_messages(session.messages) is None
    report["rejected"] = len(server.rejections)
    session.close()
    report["path"] = str(session.transcript_path)
print(json.dumps(report))
"""


@pytest.mark.slow
def test_a_full_disk_mid_batch_loses_nothing_once_space_returns(tmp_path: Path):
    script = FULL_DISK_SCRIPT.format(tests=str(TESTS), workspace=str(tmp_path / "work"))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert "could not write the transcript" in report["error"]
    assert report["valid_after_failure"] and report["waiting"] > 0
    assert report["valid"] and report["rejected"] == 0 and "offline model" in report["text"]
    lines = Path(report["path"]).read_text().splitlines()
    parsed = [json.loads(line) for line in lines]  # no torn line anywhere
    assert [r["seq"] for r in parsed] == list(range(1, len(parsed) + 1))
    # Every call has its result in the transcript once space returned.
    results = {r["block"]["tool_use_id"] for r in parsed if r["kind"] == "tool_result"}
    calls = {
        b["id"]
        for r in parsed
        if r["kind"] == "message"
        for b in r["message"]["content"]
        if b["type"] == "tool_use"
    }
    assert results == calls and len(calls) > 6


# -- 3: servers that are not quite the API ------------------------------------------------------


def message_of(*content: dict, stop_reason: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_raw",
        "type": "message",
        "role": "assistant",
        "model": "local-model",
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 10},
    }


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the SDK's, on a string input
def test_repeated_ids_and_odd_inputs_are_normalised(workspace: Path):
    odd = message_of(
        tool_use("bash", {"command": "echo again"}, id="toolu_same"),
        tool_use("bash", {"command": "echo list"}, id="toolu_list"),
        tool_use("read_file", {"path": "x"}, id="toolu_string"),
        tool_use("bash", {}, id="toolu_none"),
    )
    odd["content"][1]["input"] = ["echo", "list"]
    events = list(sse_events(odd))
    # Some servers put a call's input whole in its start event, as a JSON string; llama.cpp
    # sends no input at all for an argument-less call. Neither streams input deltas.
    starts = {e["index"]: e["content_block"] for e in events if e["type"] == "content_block_start"}
    starts[2]["input"] = '{"path": "README.md"}'
    del starts[3]["input"]
    deltas = ("content_block_delta",)
    events = [e for e in events if not (e["type"] in deltas and e["index"] in (2, 3))]
    with FakeAnthropic() as server:
        server.queue(
            reply(tool_use("bash", {"command": "echo first"}, id="toolu_same")),
            RawStream(events),
            reply(text("Done.")),
            reply(text("Still fine.")),
        )
        session = Session(workspace, model=model_on(server))
        result = session.ask("Run things.")
        assert result.text == "Done."
        notes = [e.message for e in result.events if isinstance(e, Notice)]
        assert any("'toolu_same' was repeated" in note for note in notes)
        batch = {b["tool_use_id"]: b for b in session.messages[4]["content"]}
        renamed = session.messages[3]["content"][0]["id"]
        assert renamed != "toolu_same" and "again" in batch[renamed]["content"]
        assert "not a JSON object" in batch["toolu_list"]["content"]
        assert batch["toolu_string"]["content"].startswith("# lab-inventory")  # parsed
        # None became {}: the tool ran and said what was missing.
        assert "missing required field(s): command" in batch["toolu_none"]["content"]
        assert validate_messages(session.messages) is None
        session.ask("Again.")
        server.assert_no_rejections()


def test_normalising_never_reuses_an_id_of_the_session():
    history = History(lambda event: None)
    history.append({"role": "user", "content": "go"})
    history.append({"role": "assistant", "content": [tool_use("bash", {}, id="toolu_evo_000001")]})
    assert history.fresh_tool_use_id({"toolu_evo_000002"}) == "toolu_evo_000003"


# -- 4, 5: outputs that finished are never lost ------------------------------------------------

CRASH_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from support.fake_api import FakeAnthropic, reply, text, tool_use
from evo_magic.demo import make_demo_workspace
from evo_magic.models import AnthropicModel
from evo_magic.session import Session

with FakeAnthropic() as server:
    server.queue(reply(
        tool_use("bash", {{"command": "echo FIRST-OUTPUT"}}, id="toolu_one"),
        tool_use("bash", {{"command": "sleep 60"}}, id="toolu_two"),
    ))
    session = Session(make_demo_workspace({workspace!r}),
                      model=AnthropicModel(client=server.client(max_retries=0)),
                      transcripts_root={root!r}, session_id="crash")
    print("started", flush=True)
    session.ask("Run two commands.")
"""


@pytest.mark.slow
def test_a_crash_mid_batch_keeps_every_finished_output(tmp_path: Path):
    root = tmp_path / "transcripts"
    script = CRASH_SCRIPT.format(tests=str(TESTS), workspace=str(tmp_path / "work"), root=str(root))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    log = root / "crash" / "session.jsonl"
    try:
        assert child.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and '"kind":"tool_result"' not in _read(log):
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)  # the second command is still sleeping
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    (result,) = [r for r in records if r["kind"] == "tool_result"]
    assert result["block"]["tool_use_id"] == "toolu_one" and result["status"] == "ok"
    assert "FIRST-OUTPUT" in result["block"]["content"]
    # The loader recovers it: the finished output is a row of the blocks frame.
    blocks = load_transcripts(root / "crash").blocks
    mine = blocks[(blocks["tool_use_id"] == "toolu_one") & (blocks["block_type"] == "tool_result")]
    (row,) = mine.itertuples()
    assert "FIRST-OUTPUT" in row.text


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_an_interrupt_just_after_a_tool_returned_keeps_its_output(workspace: Path):
    from evo_magic.history import History as HistoryClass

    def fn(request: ModelRequest):
        if len(request.messages) == 1:
            return [
                tool_use("bash", {"command": "echo REAL-OUTPUT"}, id="toolu_done"),
                tool_use("bash", {"command": "echo never"}, id="toolu_later"),
            ]
        return [text("ok")]

    session = Session(workspace, model=FunctionModel(fn))
    target = HistoryClass.add_tool_result.__code__

    def tracer(frame, event, arg):  # the interrupt lands as the result is about to join
        if event == "call" and frame.f_code is target:
            sys.settrace(None)
            raise KeyboardInterrupt
        return None

    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt):
            session.ask("Run two commands.")
    finally:
        sys.settrace(None)
    done, later = session.messages[-1]["content"]
    assert "REAL-OUTPUT" in done["content"] and not done.get("is_error")
    assert later["is_error"] and "Not run" in later["content"]
    assert validate_messages(session.messages) is None


# -- 11: the model's compact tool backs off and hears the outcome ------------------------------


def test_the_compact_tool_backs_off_and_tells_the_model(workspace: Path):
    summaries = []
    requests: list[ModelRequest] = []

    def fn(request: ModelRequest):
        if not request.tools:
            summaries.append(request)
            return {"content": [text("summary")], "stop_reason": "max_tokens"}  # unusable
        requests.append(request)
        if len(requests) > 30:
            return [text("giving up")]
        return [
            tool_use("bash", {"command": "echo step"}, id=f"toolu_b{len(requests)}"),
            tool_use("compact", {"focus": "keep going"}, id=f"toolu_c{len(requests)}"),
        ]

    policy = CompactPolicy(context_limit=100_000, max_failures=3)
    session = Session(workspace, model=FunctionModel(fn), policy=policy, max_turns=40)
    session.ask("Keep compacting.")
    assert len(summaries) <= policy.max_failures  # no retry storm: 30 requests, 3 attempts
    told = [r.messages[-1]["content"][0]["text"] for r in requests[1:]]
    assert all("did not happen" in t for t in told)
    assert "cut off at max_tokens" in told[0]
    assert "paused" in told[-1]
    assert validate_messages(session.messages) is None


# -- 12, 13, 14: errors a user can read --------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
@pytest.mark.parametrize(
    "events",
    [
        [b"event: message_start\ndata: {garbage\n\n"],
        [{"type": "message_start", "message": "not a message"}],
    ],
)
def test_a_malformed_stream_is_a_model_error(workspace: Path, events):
    with FakeAnthropic() as server:
        server.queue(RawStream(events), reply(text("Fine again.")))
        session = Session(workspace, model=model_on(server))
        with pytest.raises(ModelError, match="Malformed response from http://127.0.0.1"):
            session.ask("hello")
        assert validate_messages(session.messages) is None
        assert session.ask("again").text == "Fine again."


def test_a_summary_cut_off_at_max_tokens_is_a_failure(workspace: Path):
    with FakeAnthropic(offline_responder()) as server:
        session = Session(workspace, model=model_on(server))
        session.ask("Survey the project.")
        before = json.dumps(session.messages)
        server.queue(Reply([text("A short but truncated summ")], stop_reason="max_tokens"))
        event = session.compact()
        assert not event.success and "cut off at max_tokens (2,000 tokens)" in event.error
        assert json.dumps(session.messages) == before


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_connection_names_the_endpoint(workspace: Path):
    import anthropic

    url = f"http://127.0.0.1:{closed_port()}"
    client = anthropic.Anthropic(base_url=url, api_key="sk-test-refused", max_retries=0)
    session = Session(workspace, model=AnthropicModel(client=client))
    with pytest.raises(ModelError) as caught:
        session.ask("hello")
    message = str(caught.value)
    assert message == f"Could not reach {url}: Connection refused"
    assert validate_messages(session.messages) is None


# -- 17: the token figure counts the same thing before and after a compaction ------------------


def test_tokens_count_the_whole_prompt_across_a_compaction(workspace: Path):
    with FakeAnthropic(offline_responder()) as server:
        session = Session(workspace, model=model_on(server), tools=default_tools())
        session.ask("Survey the project.")
        event = session.compact("the notes")
        estimate = event.after.tokens
        server.queue(reply(text("ok")))
        result = session.ask("Anything else?")
        server.assert_no_rejections()
    sent = result.events[[e.kind for e in result.events].index("model_response")].usage
    # The estimate after the compaction is of the whole next prompt (system and tools included),
    # like the count before it: within a few percent of what the server counted.
    assert abs(estimate - sent.context_tokens) / sent.context_tokens < 0.15
    assert event.before.tokens > event.after.tokens > 0


def test_a_tool_that_raises_keyboardinterrupt_inside_is_interrupted(workspace: Path):
    def stuck(tool_input, ctx):
        raise KeyboardInterrupt

    tool = Tool("stuck", "Never returns.", {"type": "object", "properties": {}}, stuck)

    def fn(request: ModelRequest):
        if len(request.messages) == 1:
            return [tool_use("stuck", {}, id="toolu_stuck"), tool_use("stuck", {}, id="toolu_2")]
        return [text("ok")]

    session = Session(workspace, model=FunctionModel(fn), tools=[tool])
    with pytest.raises(KeyboardInterrupt):
        session.ask("Go.")
    first, second = session.messages[-1]["content"]
    assert "Interrupted by the user while this tool was running" in first["content"]
    assert "Not run" in second["content"]
    records_ = records(session)
    statuses = [r["status"] for r in records_ if r["kind"] == "tool_result"]
    assert statuses == ["interrupted", "not_run"]


def test_the_agent_cannot_change_its_own_transcripts(workspace: Path):
    log = ".evo_magic"

    def fn(request: ModelRequest):
        if len(request.messages) > 1:
            return [text("done")]
        return [
            tool_use("bash", {"command": f"echo forged >> {log}/*/session.jsonl"}, id="t1"),
            tool_use("write_file", {"path": f"{log}/forged.txt", "content": "x"}, id="t2"),
            tool_use("read_file", {"path": f"{log}/" + "x"}, id="t3"),
        ]

    sandboxed = sandbox_status().available
    session = Session(workspace, model=FunctionModel(fn), sandbox="warn" if sandboxed else "off")
    session.ask("Cover your tracks.")
    bash, write, _ = session.messages[2]["content"]
    assert "may read but not change" in write["content"] and write["is_error"]
    assert not (workspace / log / "forged.txt").exists()
    if not sandboxed:
        return  # without the sandbox bash writes wherever this user can: said in the README
    assert "Read-only file system" in bash["content"]
    lines = session.transcript_path.read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # nothing was appended to it by the agent
