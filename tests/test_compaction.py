"""The three compaction layers end to end: real SDK, loopback fake, offline-model script."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import offline_responder
from fake_api import FakeAnthropic, Reply, reply, server_error, text, tool_use

from evo_magic.compact.measure import message_chars
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.summary import FILES_HEADER, FOCUS_PREFIX, REQUEST_HEADER
from evo_magic.events import CompactionFinished, CompactionStarted, MessageAppended, Notice
from evo_magic.models import AnthropicModel
from evo_magic.session import Session

LIMIT = 6_000


def is_summary(body: dict) -> bool:
    return not body.get("tools")


def summary_prompt(body: dict) -> str:
    return body["messages"][0]["content"][0]["text"]


def first_text(body: dict) -> str:
    return body["messages"][0]["content"][0]["text"]


def scripted(summaries: Callable[[dict], object] | None = None) -> Callable[[dict], object]:
    """The offline script for agent calls; `summaries(body)` answers summarisation calls."""
    agent = offline_responder()

    def respond(body: dict) -> object:
        if is_summary(body) and summaries is not None:
            return summaries(body)
        return agent(body)

    return respond


def session_on(server: FakeAnthropic, workspace: Path, **kwargs) -> Session:
    model = AnthropicModel(client=server.client(max_retries=0))
    kwargs.setdefault("policy", CompactPolicy(context_limit=LIMIT))
    return Session(workspace, model=model, **kwargs)


def compactions(session: Session) -> list[CompactionFinished]:
    found: list[CompactionFinished] = []
    session.subscribe(lambda e: found.append(e) if isinstance(e, CompactionFinished) else None)
    return found


def test_a_long_session_stays_under_the_limit(workspace: Path):
    with FakeAnthropic(scripted()) as server:
        session = session_on(server, workspace)
        done = compactions(session)
        for task in ("Survey the project.", "Check the notes.", "Look at the CSV once more."):
            assert session.ask(task).stop_reason == "end_turn"
        server.assert_no_rejections()
    auto = [e for e in done if e.trigger == "auto"]
    assert len(auto) >= 3 and all(e.success for e in auto)
    for event in auto:
        assert event.before.chars > LIMIT > event.after.chars
        assert event.after.messages == 1
    agent_calls = [body for body in server.accepted if not is_summary(body)]
    assert all(message_chars(body["messages"]) <= LIMIT for body in agent_calls)
    assert session.state.compact_count == len(auto)
    assert session.state.recent_files[-1] == "notes/offline-notes.md"


def test_compacted_message_carries_files_focus_and_the_pending_request(workspace: Path):
    task = "Survey the project, then compact the context yourself."
    with FakeAnthropic(scripted()) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=100_000))
        done = compactions(session)
        session.ask(task)
        server.assert_no_rejections()
    (model_compaction,) = [e for e in done if e.trigger == "model"]
    focus = model_compaction.focus
    assert focus and focus.startswith("the request:")
    summary_bodies = [b for b in server.accepted if is_summary(b)]
    assert focus in summary_prompt(summary_bodies[0])
    after = server.accepted.index(summary_bodies[0]) + 1
    history = first_text(server.accepted[after])
    assert f"{FOCUS_PREFIX}{focus}" in history
    assert f"{FILES_HEADER}\n- README.md\n- inventory.py\n- samples.csv" in history
    assert f"{REQUEST_HEADER}\n{task}" in history


def test_user_compaction_focus_reaches_summariser_and_history(workspace: Path):
    focus = "the {TODO} lines and $HOME"
    with FakeAnthropic(scripted()) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=100_000))
        session.ask("Survey the project.")
        event = session.compact(focus)
        session.ask("Go on.")
        server.assert_no_rejections()
    assert event.success and event.trigger == "user" and event.focus == focus
    summary = next(b for b in server.accepted if is_summary(b))
    assert focus in summary_prompt(summary)
    history = first_text(server.accepted[-1])
    assert f"{FOCUS_PREFIX}{focus}" in history
    assert REQUEST_HEADER not in history  # the request was answered before %compact


def test_snapshot_is_on_disk_before_the_history_is_replaced(workspace: Path):
    with FakeAnthropic(scripted()) as server:
        session = session_on(server, workspace)
        captured: dict[str, str] = {}
        checked: list[bool] = []

        def observe(event) -> None:
            if isinstance(event, CompactionStarted):
                captured["history"] = json.dumps(session.messages)
            # The first message of the replaced history (epoch 1): the snapshot must be there.
            first_replaced = isinstance(event, MessageAppended) and event.epoch > 0
            if first_replaced and captured.get("history") and not checked:
                snapshots = sorted((session.directory / "snapshots").glob("*.jsonl"))
                lines = snapshots[-1].read_text().splitlines()
                checked.append([json.loads(x) for x in lines] == json.loads(captured["history"]))

        session.subscribe(observe)
        session.ask("Survey the project.")
    assert checked == [True]


def test_failing_summariser_keeps_the_history_and_backs_off(workspace: Path):
    with FakeAnthropic(scripted(lambda body: server_error())) as server:
        # max_failures high: what limits the attempts here is the back-off alone.
        policy = CompactPolicy(context_limit=LIMIT, max_failures=100)
        session = session_on(server, workspace, max_turns=12, policy=policy)
        done = compactions(session)
        notices: list[Notice] = []
        session.subscribe(lambda e: notices.append(e) if isinstance(e, Notice) else None)
        histories: dict[int, str] = {}
        session.subscribe(
            lambda e: (
                histories.setdefault(id(e), json.dumps(session.messages))
                if isinstance(e, CompactionStarted)
                else None
            )
        )
        session.ask("Survey the project.")
        session.ask("Again, please.")
        session.ask("And once more.")
        server.assert_no_rejections()
    failed = [e for e in done if not e.success]
    assert failed and all("500" in (e.error or "") for e in failed)
    assert session.state.compact_count == 0
    # No retry storm: the context stayed over the limit for many calls, but a new attempt only
    # came once it had grown meaningfully.
    agent_calls = [b for b in server.accepted if not is_summary(b)]
    over = [b for b in agent_calls if message_chars(b["messages"]) > LIMIT]
    summaries = [b for b in server.accepted if is_summary(b)]
    assert len(summaries) == len(failed)
    assert 2 * len(summaries) <= len(over)
    assert not [n for n in notices if n.code == "auto_compaction_paused"]


def test_failed_summary_leaves_history_byte_identical(workspace: Path):
    with FakeAnthropic(scripted(lambda body: server_error())) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=100_000))
        session.ask("Survey the project.")
        before = json.dumps(session.messages)
        event = session.compact("anything")
        assert json.dumps(session.messages) == before
        assert not event.success and "500" in event.error
        server.assert_no_rejections()


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (reply(text(" ")), "no text"),
        (reply(tool_use("bash", {"command": "ls"})), "no text"),
        (reply(text("x" * 200_000)), "not be smaller"),
    ],
)
def test_unusable_summaries_are_failures(workspace: Path, answer: Reply, reason: str):
    with FakeAnthropic(scripted(lambda body: answer)) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=100_000))
        session.ask("Survey the project.")
        before = json.dumps(session.messages)
        event = session.compact()
        assert not event.success and reason in event.error
        assert json.dumps(session.messages) == before


def test_pause_lifts_when_the_user_compacts(workspace: Path):
    failing = {"on": True}

    def summaries(body: dict) -> object:
        return server_error() if failing["on"] else offline_responder()(body)

    with FakeAnthropic(scripted(summaries)) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=3_000))
        done = compactions(session)
        notices: list[Notice] = []
        session.subscribe(lambda e: notices.append(e) if isinstance(e, Notice) else None)
        for _ in range(4):
            session.ask("Survey the project.")
        assert session.state.consecutive_failures == 3
        assert len([b for b in server.accepted if is_summary(b)]) == 3
        (paused,) = [n for n in notices if n.code == "auto_compaction_paused"]
        assert "paused" in paused.message
        failing["on"] = False
        assert session.compact("recover").success
        assert session.state.consecutive_failures == 0
        session.ask("Survey the project again.")
        assert any(e.trigger == "auto" and e.success for e in done)
        server.assert_no_rejections()


def test_summariser_sees_the_head_and_the_newest_turns(workspace: Path):
    (workspace / "big.txt").write_text("filler line\n" * 2_000)
    with FakeAnthropic(scripted()) as server:
        session = session_on(
            server,
            workspace,
            policy=CompactPolicy(context_limit=200_000, summary_input_limit=5_000),
        )
        session.ask("THE ORIGINAL GOAL: survey the project.")
        server.queue(
            reply(tool_use("read_file", {"path": "big.txt"})),
            reply(tool_use("bash", {"command": "echo NEWEST-RESULT-MARKER"})),
            reply(text("ok")),
        )
        session.ask("Read big.txt, then echo a marker.")
        session.compact()
        server.assert_no_rejections()
    prompt = summary_prompt(next(b for b in server.accepted if is_summary(b)))
    assert "THE ORIGINAL GOAL" in prompt
    assert "NEWEST-RESULT-MARKER" in prompt
    assert "characters from the middle of the conversation omitted" in prompt
    assert len(prompt) < 5_000 + 2_000  # the limit plus the instructions


def test_token_limit_triggers_compaction(workspace: Path):
    with FakeAnthropic(scripted()) as server:
        policy = CompactPolicy(context_limit=1_000_000, token_limit=2_500)
        session = session_on(server, workspace, policy=policy)
        done = compactions(session)
        session.ask("Survey the project.")
        server.assert_no_rejections()
    assert any(e.trigger == "auto" and e.before.tokens > 2_500 for e in done)


def test_policy_swap_between_asks_and_state_across_asks(workspace: Path):
    with FakeAnthropic(scripted()) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=1_000_000))
        done = compactions(session)
        session.ask("Survey the project.")
        assert not done and session.state.compact_count == 0
        files = list(session.state.recent_files)
        assert files == ["README.md", "inventory.py", "samples.csv", "notes/offline-notes.md"]
        session.policy = CompactPolicy(context_limit=LIMIT, keep_recent=1)
        session.ask("Survey it again.")
        assert done and session.state.compact_count >= 1 and session.state.has_compacted
        # Re-reading moves a file to the end; at most max_recent_files are kept.
        assert session.state.recent_files[-1] == "notes/offline-notes.md"
        assert len(session.state.recent_files) <= 5
        server.assert_no_rejections()
