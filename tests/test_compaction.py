"""The three compaction layers end to end: real SDK, loopback fake, offline-model script."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.fake_api import (
    FakeAnthropic,
    Reply,
    reply,
    server_error,
    text,
    tool_use,
    unmarked,
    validate_messages,
)
from support.responders import offline_responder

from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import FILES_HEADER, FOCUS_PREFIX, REQUEST_HEADER
from evo_magic.events import (
    CompactionFinished,
    CompactionStarted,
    MessageAppended,
    MicroCompacted,
    ModelResponded,
    Notice,
    ToolFinished,
)
from evo_magic.measure import message_chars
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import LargeOutputs, MicroCompact, Summarise

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
        (Reply(content=[]), "no text"),
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
        session.configure(
            context_limit=LIMIT,
            strategies=[LargeOutputs(), MicroCompact(keep_recent=1), Summarise()],
        )
        session.ask("Survey it again.")
        assert done and session.state.compact_count >= 1 and session.state.has_compacted
        # Re-reading moves a file to the end; at most max_recent_files are kept.
        assert session.state.recent_files[-1] == "notes/offline-notes.md"
        assert len(session.state.recent_files) <= 5
        server.assert_no_rejections()


def agent_script(*replies: Reply) -> Callable[[dict], object]:
    """Agent calls get `replies` in turn (then a final text); summaries come from the offline
    model. Unlike `FakeAnthropic.queue`, a summarisation call never takes an agent's reply."""
    pending = list(replies)
    summaries = offline_responder()

    def respond(body: dict) -> object:
        if is_summary(body):
            return summaries(body)
        return pending.pop(0) if pending else reply(text("Done."))

    return respond


def test_model_compaction_returns_at_once_and_runs_once_per_batch(workspace: Path):
    script = agent_script(
        reply(tool_use("read_file", {"path": "inventory.py"})),
        reply(
            tool_use("compact", {"focus": "FOCUS-ONE"}),
            tool_use("compact", {"focus": "FOCUS-TWO"}),
        ),
    )
    with FakeAnthropic(script) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=100_000))
        result = session.ask("Read inventory.py, then compact.")
        server.assert_no_rejections()
    tools = [e for e in result.events if isinstance(e, ToolFinished) and e.name == "compact"]
    assert [e.output.splitlines()[0] for e in tools] == [
        "Compaction scheduled: it runs after this tool batch."
    ] * 2
    (event,) = result.compactions
    assert event.trigger == "model" and event.focus == "FOCUS-ONE" and event.success
    (summary,) = [b for b in server.accepted if is_summary(b)]
    assert "FOCUS-ONE" in summary_prompt(summary)
    assert summary["max_tokens"] == CompactPolicy().summary_max_tokens
    history = first_text(server.accepted[-1])
    assert f"{FOCUS_PREFIX}FOCUS-ONE" in history
    assert f"{FILES_HEADER}\n- inventory.py" in history
    assert history.endswith(f"{REQUEST_HEADER}\nRead inventory.py, then compact.")
    assert len(server.accepted[-1]["messages"]) == 1


def test_recent_files_are_fifo_with_move_to_end_across_asks(workspace: Path):
    for name in "abcef":
        (workspace / f"{name}.txt").write_text(f"file {name}\n")
    script = agent_script(
        reply(*(tool_use("read_file", {"path": f"{n}.txt"}) for n in "abc")),
        reply(tool_use("write_file", {"path": "d.txt", "content": "one\n"})),
        reply(text("First done.")),
        reply(tool_use("read_file", {"path": "a.txt"})),
        reply(tool_use("edit_file", {"path": "d.txt", "old_str": "one", "new_str": "two"})),
        reply(tool_use("read_file", {"path": "e.txt"}), tool_use("read_file", {"path": "f.txt"})),
        reply(text("Second done.")),
    )
    with FakeAnthropic(script) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=100_000))
        session.ask("Read a, b and c; write d.")
        assert session.state.recent_files == ["a.txt", "b.txt", "c.txt", "d.txt"]
        session.ask("Read a again, edit d, read e and f.")
        # a and d moved to the end when touched again; b fell off the front (at most 5).
        expected = ["c.txt", "a.txt", "d.txt", "e.txt", "f.txt"]
        assert session.state.recent_files == expected
        first = session.compact()
        assert first.success
        listing = "\n".join([FILES_HEADER, *(f"- {path}" for path in expected)])
        assert listing in session.messages[0]["content"][0]["text"]
        session.ask("Anything else?")
        assert session.compact().success
        server.assert_no_rejections()
    # The state lasts the session: two compactions, the same files, the last summary kept.
    assert session.state.compact_count == 2 and session.state.has_compacted
    assert session.state.recent_files == expected
    assert session.state.last_summary in session.messages[0]["content"][0]["text"]


def test_an_unfinished_request_is_carried_by_a_later_compact(workspace: Path):
    task = "Run the checks {exactly} as listed; keep $PATH untouched."
    script = agent_script(
        reply(tool_use("read_file", {"path": "inventory.py"})),
        reply(tool_use("bash", {"command": "echo 1"})),
        reply(tool_use("read_file", {"path": "samples.csv"})),  # the next ask, answered
    )
    with FakeAnthropic(script) as server:
        session = session_on(server, workspace, max_turns=2)
        assert session.ask(task).stop_reason == "max_turns"
        assert session.compact().success
        assert session.messages[0]["content"][0]["text"].endswith(f"{REQUEST_HEADER}\n{task}")
        session.configure(max_turns=5)
        assert session.ask("Now finish.").stop_reason == "end_turn"
        event = session.compact()
        assert event.success, event.error
        # Answered: nothing pending any more.
        assert REQUEST_HEADER not in session.messages[0]["content"][0]["text"]
        server.assert_no_rejections()


def test_still_over_the_limit_after_compacting_does_not_loop(workspace: Path):
    (workspace / "big.txt").write_text("filler line\n" * 400)
    request = "Keep this request verbatim: " + "every word matters here. " * 200  # ~5,000
    script = agent_script(
        reply(tool_use("read_file", {"path": "big.txt"})),
        reply(tool_use("bash", {"command": "echo more"})),
        *(reply(tool_use("bash", {"command": f"echo {n}"})) for n in range(8)),
    )
    limit = 3_000
    with FakeAnthropic(script) as server:
        session = session_on(
            server, workspace, max_turns=2, policy=CompactPolicy(context_limit=100_000)
        )
        session.ask(request)  # stops at max_turns: the request stays pending
        session.configure(policy=CompactPolicy(context_limit=limit))
        first = session.compact()
        # A success, but the verbatim request alone is over the new limit.
        assert first.success and first.after.chars > limit
        session.configure(max_turns=10)
        result = session.ask("Go on with small steps.")
        server.assert_no_rejections()
    assert result.stop_reason == "end_turn"
    # Over the limit, yet a compaction only runs again once the context grew by a tenth of the
    # limit past what the last one left: not at the next call, and never at every call.
    calls = [b for b in server.accepted if not is_summary(b)][-result.turns :]
    assert message_chars(calls[0]["messages"]) > limit  # no compaction at the next call
    assert result.compactions and result.compactions[0].before.chars > message_chars(
        calls[0]["messages"]
    )
    left = first.after.chars
    for event in result.compactions:
        assert event.trigger == "auto"
        assert event.before.chars >= left + limit // 10
        left = event.after.chars if event.success else event.before.chars
    assert len(result.compactions) <= result.turns // 2
    assert validate_messages(session.messages) is None


def test_sizes_are_reported_before_and_after_each_layer(workspace: Path):
    with FakeAnthropic(scripted()) as server:
        # Eager micro-compaction: a clearing before most calls (cache-aware waits for one
        # that pays), each reporting its sizes.
        eager = [LargeOutputs(), MicroCompact(cache_aware=False), Summarise()]
        session = session_on(server, workspace, strategies=eager)
        events: list[object] = []
        session.subscribe(events.append)
        session.ask("Survey the project.")
        session.ask("And again.")
        server.assert_no_rejections()
    micro = [e for e in events if isinstance(e, MicroCompacted)]
    assert micro
    for event in micro:
        assert event.before.chars - event.after.chars == event.chars_freed > 0
        assert event.before.messages == event.after.messages
    responses = [e for e in events if isinstance(e, ModelResponded)]
    agent_calls = [b for b in server.accepted if not is_summary(b)]
    assert len(responses) == len(agent_calls)
    for event, body in zip(responses, agent_calls, strict=True):
        # What was sent, measured as the seed does, with the API's exact token count.
        assert event.context_sent.chars == message_chars(unmarked(body["messages"]))
        assert event.context_sent.messages == len(body["messages"])
        assert event.context_sent.tokens_exact
        assert event.context_sent.tokens == event.usage.context_tokens
        assert event.context_before_micro.chars >= event.context_sent.chars or any(
            isinstance(e, CompactionFinished) for e in events
        )
    finished = [e for e in events if isinstance(e, CompactionFinished)]
    assert finished
    for event in finished:
        assert event.success and event.duration > 0 and event.summary_chars > 0
        assert event.before.messages > 1 == event.after.messages
        assert event.before.tokens > event.after.tokens > 0
        assert event.summary_usage.output_tokens > 0


def test_the_every_call_strategies_read_the_historys_own_index_not_a_scan(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    """Before every call the pipeline looks at the newest tool results through the history's
    own index: a scan of every message per call made the per-call cost grow with the history
    (85x from 200 to 20,000 messages in the compaction benchmark) when the strategy's context
    and its view of the history were two objects."""
    from evo_magic.compact import base

    def no_scan(messages):  # the fallback for a list other than the history
        raise AssertionError("the history's tool results were scanned")

    monkeypatch.setattr(base, "scan_tool_results", no_scan)
    with FakeAnthropic(scripted()) as server:
        session = session_on(server, workspace, policy=CompactPolicy(context_limit=1_000_000))
        session.ask("Survey the project.")
        server.assert_no_rejections()
    assert session.calls >= 4 and session.history.view() is session.history.view()
