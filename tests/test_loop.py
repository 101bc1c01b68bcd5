"""The agent loop through the real anthropic SDK and the loopback fake."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from support.fake_api import (
    FakeAnthropic,
    StreamCut,
    overloaded,
    reply,
    server_error,
    text,
    tool_use,
    unmarked,
    validate_messages,
)

from evo_magic.events import ErrorOccurred, Notice, TextDelta, ToolFinished
from evo_magic.models import ModelError
from evo_magic.session import Session

TOOL_ORDER = ["bash", "read_file", "write_file", "edit_file", "compact"]


def tool_names(body: dict) -> list[str]:
    return [tool["name"] for tool in body["tools"]]


def test_multi_turn_task_with_parallel_tool_calls(fake: FakeAnthropic, claude, workspace: Path):
    fake.queue(
        reply(
            text("Looking first."),
            tool_use("bash", {"command": "ls"}, id="toolu_a"),
            tool_use("read_file", {"path": "README.md"}, id="toolu_b"),
        ),
        reply(tool_use("write_file", {"path": "out/notes.md", "content": "hi\n"}, id="toolu_c")),
        reply(text("All done.")),
    )
    session = Session(workspace, model=claude)
    result = session.ask("Survey the project.")

    assert result.text == "All done."
    assert result.turns == 3
    assert result.stop_reason == "end_turn"
    roles = [m["role"] for m in session.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    batch = session.messages[2]["content"]
    assert [b["tool_use_id"] for b in batch] == ["toolu_a", "toolu_b"]
    assert "inventory.py" in batch[0]["content"]
    assert batch[1]["content"].startswith("# lab-inventory")
    assert (workspace / "out/notes.md").read_text() == "hi\n"
    assert all(tool_names(body) == TOOL_ORDER for body in fake.accepted)
    # Every request repeats the history so far: the second one holds the first batch.
    assert fake.accepted[1]["messages"][2]["content"][0]["tool_use_id"] == "toolu_a"
    assert session.state.recent_files == ["README.md", "out/notes.md"]
    assert validate_messages(session.messages) is None


def test_history_persists_across_asks(fake: FakeAnthropic, claude, workspace: Path):
    fake.queue(reply(text("First answer.")), reply(text("Second answer.")))
    session = Session(workspace, model=claude)
    session.ask("one")
    session.ask("two")
    sent = fake.accepted[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"][0]["text"] == "one"


def test_streaming_text_arrives_as_deltas(fake: FakeAnthropic, claude, workspace: Path):
    fake.queue(reply(text("The answer is forty two, as computed by the tools.")))
    session = Session(workspace, model=claude)
    result = session.ask("What is the answer?")
    deltas = [e.text for e in result.events if isinstance(e, TextDelta)]
    assert len(deltas) > 3
    assert "".join(deltas) == result.text
    assert all(body.get("stream") is True for body in fake.accepted)


def test_usage_is_captured(fake: FakeAnthropic, claude, workspace: Path):
    usage = {
        "input_tokens": 11,
        "output_tokens": 7,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 3,
    }
    fake.queue(reply(text("ok"), usage=usage))
    session = Session(workspace, model=claude)
    result = session.ask("hi")
    assert result.usage.as_dict() == usage
    assert session.context().tokens_exact is False  # the answer was appended since the call


def test_overloaded_then_success_is_retried(fake: FakeAnthropic, claude, workspace: Path):
    fake.queue(overloaded(), reply(text("Recovered.")))
    session = Session(workspace, model=claude)
    assert session.ask("hello").text == "Recovered."
    assert len(fake.requests) == 2


def test_retries_exhausted_leaves_a_valid_history(fake: FakeAnthropic, claude, workspace: Path):
    fake.queue(
        reply(tool_use("bash", {"command": "echo hi"}, id="toolu_1")),
        server_error(),
        server_error(),
        server_error(),
    )
    session = Session(workspace, model=claude)
    errors: list[ErrorOccurred] = []
    session.subscribe(lambda e: errors.append(e) if isinstance(e, ErrorOccurred) else None)
    with pytest.raises(ModelError, match="500"):
        session.ask("Run something.")
    assert len(errors) == 1
    assert validate_messages(session.messages) is None
    assert session.messages[-1]["content"][0]["type"] == "tool_result"

    fake.queue(reply(text("Back again.")))
    assert session.ask("Try again.").text == "Back again."
    # The new request is its own message after the tool results: servers that convert to
    # other formats keep the order (results first), and the real API merges the two turns.
    *_, results, request = fake.accepted[-1]["messages"]
    assert [b["type"] for b in results["content"]] == ["tool_result"]
    assert unmarked(request["content"]) == [{"type": "text", "text": "Try again."}]


def test_stream_cut_is_an_error_and_the_next_ask_works(fake, claude, workspace: Path):
    fake.queue(StreamCut(reply(text("This reply will be cut off mid way")), after_events=4))
    session = Session(workspace, model=claude)
    with pytest.raises(ModelError):
        session.ask("hello")
    assert validate_messages(session.messages) is None
    fake.queue(reply(text("Fine now.")))
    assert session.ask("again").text == "Fine now."


def test_max_tokens_is_handled(fake: FakeAnthropic, claude, workspace: Path):
    fake.queue(
        reply(
            text("Let me write"),
            tool_use("write_file", {"path": "x.txt"}, id="toolu_cut"),
            stop_reason="max_tokens",
        ),
        reply(text("Finished in smaller steps.")),
    )
    session = Session(workspace, model=claude)
    result = session.ask("Write a long file.")
    assert result.text == "Finished in smaller steps."
    assert any(isinstance(e, Notice) and e.code == "max_tokens" for e in result.events)
    assert not (workspace / "x.txt").exists()
    cut = session.messages[1]["content"]
    assert [b["type"] for b in cut] == ["text"]
    assert "max_tokens" in session.messages[2]["content"][0]["text"]


def test_max_turns_stops_the_loop_and_says_so(fake: FakeAnthropic, claude, workspace: Path):
    fake.queue(*[reply(tool_use("bash", {"command": f"echo {n}"})) for n in range(3)])
    session = Session(workspace, model=claude, max_turns=2)
    result = session.ask("Loop forever.")
    assert result.stop_reason == "max_turns"
    assert result.turns == 2
    notices = [e for e in result.events if isinstance(e, Notice)]
    assert notices and "max_turns=2" in notices[0].message
    assert validate_messages(session.messages) is None


def test_tool_errors_go_back_to_the_model(fake: FakeAnthropic, claude, workspace: Path):
    fake.queue(
        reply(tool_use("read_file", {"path": "../../etc/passwd"}, id="toolu_x")),
        reply(text("Could not read it.")),
    )
    session = Session(workspace, model=claude)
    result = session.ask("Read the password file.")
    finished = [e for e in result.events if isinstance(e, ToolFinished)]
    assert finished[0].is_error
    block = session.messages[2]["content"][0]
    assert block["is_error"] is True and "outside" in block["content"]


def test_large_output_is_saved_and_previewed(fake: FakeAnthropic, claude, workspace: Path):
    (workspace / "big.txt").write_text("x" * 45_000 + "\n")
    fake.queue(reply(tool_use("read_file", {"path": "big.txt"}, id="toolu_big")), reply(text("ok")))
    session = Session(workspace, model=claude)
    session.ask("Read big.txt")
    content = session.messages[2]["content"][0]["content"]
    assert "saved to" in content and len(content) < 3_000
    saved = session.directory / "tool-results" / "toolu_big.txt"
    assert saved.read_text().startswith("x" * 45_000)


def _interrupt_after(seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_interrupt_during_a_tool_keeps_a_valid_history(fake, claude, workspace: Path):
    fake.queue(
        reply(
            tool_use("bash", {"command": "echo first"}, id="toolu_1"),
            tool_use("bash", {"command": "sleep 30"}, id="toolu_2"),
            tool_use("bash", {"command": "echo never"}, id="toolu_3"),
        )
    )
    session = Session(workspace, model=claude)
    timer = _interrupt_after(1.0)
    with pytest.raises(KeyboardInterrupt):
        session.ask("Run three commands.")
    timer.join()
    batch = session.messages[-1]["content"]
    assert [b["tool_use_id"] for b in batch] == ["toolu_1", "toolu_2", "toolu_3"]
    assert "first" in batch[0]["content"] and not batch[0].get("is_error")
    assert batch[1]["is_error"] and batch[2]["is_error"]
    assert validate_messages(session.messages) is None

    fake.queue(reply(text("Continuing.")))
    assert session.ask("Go on.").text == "Continuing."


def test_interrupt_during_a_stream_keeps_the_partial_text(workspace: Path):
    from evo_magic.models import AnthropicModel

    with FakeAnthropic() as slow:
        slow.queue(reply(text(" ".join(["word"] * 60))))
        slow.event_delay = 0.05
        model = AnthropicModel(client=slow.client())
        session = Session(workspace, model=model)
        seen: list[str] = []
        session.subscribe(lambda e: seen.append(e.text) if isinstance(e, TextDelta) else None)
        timer = _interrupt_after(0.6)
        with pytest.raises(KeyboardInterrupt):
            session.ask("Talk slowly.")
        timer.join()
        assert seen, "some text should have streamed before the interrupt"
        assert session.messages[-1]["role"] == "assistant"
        assert "interrupted" in session.messages[-1]["content"][0]["text"]
        assert validate_messages(session.messages) is None
        slow.event_delay = 0.0
        slow.queue(reply(text("Quick now.")))
        assert session.ask("Go on.").text == "Quick now."
        slow.assert_no_rejections()
