"""Pins (a text in every request, verbatim, whatever a strategy does), thrash detection,
reactive compaction on a too-long prompt, and token limits as a share of the model's window.
The real SDK against the loopback fake throughout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_api import FakeAnthropic, Reply, reply, text, tool_use

from evo_magic import load_transcripts, replay
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compact.validate import history_problem
from evo_magic.compacted import FILE_PIN_PREFIX, PIN_PREFIX
from evo_magic.events import CompactionFinished, Event, MicroCompacted, Notice
from evo_magic.models import AnthropicModel, ModelError
from evo_magic.session import Session
from evo_magic.strategies import (
    ClearToolUses,
    LargeOutputs,
    MicroCompact,
    ObservationMasking,
    SlidingWindow,
    Summarise,
    SummariseOlder,
    TokenBudget,
)
from evo_magic.tools import ToolError

PIN = "Never use tabs; the public API must not change."
BLOCK = PIN_PREFIX + PIN
BIG = "x = 1  # a line of the big file\n" * 160  # about 5,000 characters


def agent_requests(fake: FakeAnthropic) -> list[dict]:
    """The agent's requests (summaries are asked without tools)."""
    return [body for body in fake.accepted if body.get("tools")]


def user_texts(messages: list[dict]) -> list[str]:
    return [
        block["text"]
        for message in messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "text"
    ]


def reader(path: str = "inventory.py", calls: int = 1) -> Any:
    """A responder: summaries get a summary; the agent reads `path` `calls` times per request,
    then answers."""

    def respond(body: dict) -> Reply:
        if not body.get("tools"):
            return reply(text("SUMMARY of the work so far."))
        last = body["messages"][-1]
        results = [b for b in last["content"] if b.get("type") == "tool_result"]
        since_prompt = 0
        for message in reversed(body["messages"]):
            if message["role"] == "user" and not any(
                b.get("type") == "tool_result" for b in message["content"]
            ):
                break
            since_prompt += message["role"] == "assistant"
        if results and since_prompt >= calls:
            return reply(text("Done."))
        return reply(tool_use("read_file", {"path": path}))

    return respond


def session_on(fake: FakeAnthropic, workspace: Path, **options: Any) -> Session:
    model = AnthropicModel("claude-sonnet-4-5", client=fake.client(max_retries=0))
    return Session(workspace, model=model, **options)


def collect(session: Session) -> list[Event]:
    events: list[Event] = []
    session.subscribe(events.append)
    return events


STRATEGIES = [
    LargeOutputs(limit=200, preview_chars=50),
    MicroCompact(keep_recent=0, min_chars=10, cache_aware=False),
    Summarise(),
    Summarise(keep_user_tokens=2_000, reread_files=2),
    ClearToolUses(keep=0, trigger_tokens=10),
    ObservationMasking(0),
    SlidingWindow(keep=2),
    SummariseOlder(keep=2),
    TokenBudget(window_tokens=2_000),
]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_a_pin_is_in_every_request_under_every_builtin_strategy(workspace: Path, strategy: Any):
    with FakeAnthropic(reader()) as fake:
        policy = CompactPolicy(context_limit=3_000)
        session = session_on(fake, workspace, policy=policy, strategies=[strategy])
        pin_id = session.pin(PIN)
        for n in range(4):
            session.ask(f"Read inventory.py, round {n}.")
        session.compact("the inventory")
        session.ask("Sum it up.")
        fake.assert_no_rejections()
        requests = agent_requests(fake)
        assert len(requests) >= 9
        for body in requests:
            assert BLOCK in user_texts(body["messages"])  # verbatim, its own block
        assert session.pins == [(pin_id, PIN)]
        if strategy.when == "over_limit":
            assert session.state.compact_count >= 2  # automatic and by hand: it was tested


def test_a_full_compaction_puts_the_pins_right_after_its_header(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        session = session_on(fake, workspace)
        session.pin(PIN)
        second = session.pin("Answer in English.")
        session.ask("Read inventory.py.")
        assert session.compact().success
        first = session.messages[0]["content"]
        assert [b["text"] for b in first[1:3]] == [BLOCK, PIN_PREFIX + "Answer in English."]
        assert first[0]["text"].startswith("This conversation was compacted")
        assert sum(t == BLOCK for t in user_texts(session.messages)) == 1  # not repeated
        session.unpin(second)
        assert session.compact().success
        assert PIN_PREFIX + "Answer in English." not in user_texts(session.messages)
        assert BLOCK in user_texts(session.messages)
        with pytest.raises(KeyError, match="no pin 99"):
            session.unpin(99)
        with pytest.raises(ValueError, match="non-empty"):
            session.pin("   ")


class DropEverything:
    """A hostile replacement: one message of its own, nothing kept."""

    name = "drop-everything"
    when = "over_limit"

    def compact(self, messages: Any, ctx: Any) -> list[dict]:
        return [{"role": "user", "content": [{"type": "text", "text": "Nothing to see."}]}]


class Scrub:
    """A hostile every-call strategy: rewrites every pinned block in place."""

    name = "scrub"
    when = "every_call"

    def compact(self, messages: Any, ctx: Any) -> Any:
        changes = {}
        for index, message in enumerate(messages):
            content = message["content"]
            if message["role"] == "user" and any(
                b.get("text", "").startswith(PIN_PREFIX) for b in content
            ):
                scrubbed = [
                    {"type": "text", "text": "scrubbed"}
                    if b.get("text", "").startswith(PIN_PREFIX)
                    else b
                    for b in content
                ]
                changes[index] = {**message, "content": scrubbed}
        return ctx.edit(messages, changes) if changes else None


def test_a_hostile_replacement_gets_the_pins_back_and_it_is_said(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        session = session_on(fake, workspace)
        session.pin(PIN)
        events = collect(session)
        session.ask("Read inventory.py.")
        event = session.compact(strategy=DropEverything())
        assert event.success
        assert session.messages[0]["content"] == [
            {"type": "text", "text": "Nothing to see."},
            {"type": "text", "text": BLOCK},
        ]
        said = [e for e in events if isinstance(e, Notice) and e.code == "pins_restored"]
        assert len(said) == 1 and "drop-everything" in said[0].message
        session.ask("Go on.")
        assert BLOCK in user_texts(agent_requests(fake)[-1]["messages"])
        fake.assert_no_rejections()


def test_a_hostile_edit_in_place_gets_the_pins_back(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        session = session_on(fake, workspace, strategies=[Scrub(), Summarise()])
        session.pin(PIN)
        events = collect(session)
        session.ask("Read inventory.py.")
        fake.assert_no_rejections()
        for body in agent_requests(fake):
            assert BLOCK in user_texts(body["messages"])
        assert any(isinstance(e, MicroCompacted) for e in events)
        assert any(isinstance(e, Notice) and e.code == "pins_restored" for e in events)


def test_a_pinned_file_is_read_again_after_each_full_compaction(workspace: Path):
    agents = workspace / "AGENTS.md"
    agents.write_text("Use spaces.\n")
    with FakeAnthropic(reader()) as fake:
        session = session_on(fake, workspace)
        pin_id = session.pin(path="AGENTS.md")
        assert session.pins == [(pin_id, "Use spaces.\n")]
        session.ask("Read inventory.py.")
        agents.write_text("Use four spaces.\n")
        assert session.compact().success
        block = FILE_PIN_PREFIX.format(path="AGENTS.md") + "Use four spaces.\n"
        assert session.messages[0]["content"][1]["text"] == block
        assert session.pins == [(pin_id, "Use four spaces.\n")]
        session.ask("Go on.")
        assert block in user_texts(agent_requests(fake)[-1]["messages"])
        with pytest.raises(ToolError):
            session.pin(path="../outside.md")  # confined as the file tools are
        assert [p for p, _ in session.pins] == [pin_id]
        fake.assert_no_rejections()
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    pins = [r for r in records if r["kind"] == "pin"]
    assert [r["text"] for r in pins] == ["Use spaces.\n", "Use four spaces.\n"]
    assert all(r["path"] == "AGENTS.md" and r["id"] == pin_id for r in pins)


def test_pins_are_recorded_and_replayed_at_their_place(workspace: Path):
    policy = CompactPolicy(context_limit=4_000)
    with FakeAnthropic(reader(calls=2)) as fake:
        with session_on(fake, workspace, policy=policy) as session:
            first = session.pin(PIN)
            session.ask("Read inventory.py twice.")
            session.ask("Again.")
            session.pin("Answer in English.")
            session.unpin(first)
            session.ask("Once more.")
            session.ask("And again.")
            assert session.compact().success
            session.ask("Finish.")
        fake.assert_no_rejections()
        assert session.state.compact_count >= 3
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    kinds = [(r["kind"], r["id"]) for r in records if r["kind"] in ("pin", "unpin")]
    assert kinds == [("pin", 1), ("pin", 2), ("unpin", 1)]
    # Replayed under its own strategies, every request is the size it was: the pins were set
    # and removed where the session did it, and carried by the replayed compactions.
    t = load_transcripts(session.directory.parent)
    r = replay(t, {"own": None}, policy=policy)
    recorded = t.calls.sort_values("call")["context_sent_chars"].tolist()
    assert r.calls["context_chars"].tolist() == recorded


def test_a_thrashing_session_pauses_after_max_refills(workspace: Path):
    (workspace / "big.py").write_text(BIG)
    with FakeAnthropic(reader("big.py", calls=8)) as fake:
        policy = CompactPolicy(context_limit=4_000, max_refills=3)
        session = session_on(fake, workspace, policy=policy, strategies=[Summarise()])
        events = collect(session)
        session.ask("Read big.py, many times.")
        paused = session.paused and session.state.thrashing(session.policy)
        assert session.compact().success  # by hand it still works, and lifts the pause
        fake.assert_no_rejections()
    automatic = [e for e in events if isinstance(e, CompactionFinished) and e.trigger == "auto"]
    assert len(automatic) == 3  # the 4th refill found automatic compaction paused
    said = [e for e in events if isinstance(e, Notice) and e.code == "auto_compaction_thrashing"]
    assert len(said) == 1
    assert "max_refills" in said[0].message and "%compact" in said[0].message
    assert paused and not session.paused


def test_a_context_that_holds_after_compaction_is_no_thrash(workspace: Path):
    with FakeAnthropic(reader(calls=1)) as fake:
        policy = CompactPolicy(context_limit=2_500, max_refills=1)
        session = session_on(fake, workspace, policy=policy, strategies=[Summarise()])
        for n in range(5):
            session.ask(f"Read inventory.py, round {n}.")
    assert session.state.compact_count >= 2 and not session.paused


def test_a_too_long_prompt_compacts_and_retries_once(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        session = session_on(fake, workspace)
        events = collect(session)
        session.ask("Read inventory.py.")
        from support.fake_api import estimate_input_tokens

        fake.context_window = estimate_input_tokens(agent_requests(fake)[-1]) + 150
        result = session.ask("Read it again, please.")
        assert result.text == "Done."
        assert len(fake.too_long) == 1  # refused once, then sent compacted
        said = [e for e in events if isinstance(e, Notice) and e.code == "reactive_compaction"]
        assert len(said) == 1 and "too long" in said[0].message
        assert "compacted with summarise" in said[0].message
        compactions = [e for e in events if isinstance(e, CompactionFinished)]
        assert [(c.trigger, c.success) for c in compactions] == [("auto", True)]
        assert history_problem(session.messages) is None
        fake.assert_no_rejections()


def test_a_second_refusal_is_a_clear_error_with_a_valid_history(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        # A window that drops the middle: it compacts without a model call, but not enough.
        session = session_on(fake, workspace, strategies=[SlidingWindow(keep=2)])
        session.pin(PIN)
        session.ask("Read inventory.py.")
        fake.context_window = 100  # nothing fits
        with pytest.raises(ModelError, match="still too long after a compaction"):
            session.ask("Read it again, please.")
        assert len(fake.too_long) == 2  # the call, and the call once more (compacted)
        assert session.state.compact_count == 1
        assert history_problem(session.messages) is None
        assert BLOCK in user_texts(session.messages)
        assert "Read it again, please." in json.dumps(session.messages)
        fake.context_window = None
        assert session.ask("Go on.").text == "Done."  # the conversation continues
        fake.assert_no_rejections()


def test_a_refusal_that_cannot_be_compacted_is_a_clear_error_at_once(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        session = session_on(fake, workspace)
        session.ask("Read inventory.py.")
        before = json.dumps(session.messages)
        fake.context_window = 100  # the summary's request does not fit either
        with pytest.raises(ModelError, match="too long .* and the compaction failed"):
            session.ask("Read it again, please.")
        # The call and the summary the compaction asked for; no retry that could not pass.
        assert [bool(body.get("tools")) for body in fake.too_long] == [True, False]
        assert history_problem(session.messages) is None
        assert json.dumps(session.messages).startswith(before[:-1])  # kept, request added
        fake.assert_no_rejections()


def test_a_full_context_window_stop_compacts_and_continues(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        session = session_on(fake, workspace)
        events = collect(session)
        session.ask("Read inventory.py.")
        fake.queue(
            Reply(content=[text("I was saying")], stop_reason="model_context_window_exceeded")
        )
        result = session.ask("Read it again.")
        assert result.text == "Done."
        assert any(isinstance(e, Notice) and e.code == "reactive_compaction" for e in events)
        assert session.state.compact_count == 1
        fake.assert_no_rejections()


@pytest.mark.parametrize(
    ("model", "share", "window", "tokens"),
    [
        ("claude-sonnet-4-5", 0.8, None, 160_000),
        ("claude-opus-4-6", 0.8, None, 800_000),
        ("claude-sonnet-4-5", 0.5, 10_000, 5_000),
        ("claude-sonnet-4-5", 5_000, None, 5_000),
    ],
)
def test_a_fractional_token_limit_follows_the_models_window(
    workspace: Path, model: str, share: float, window: int | None, tokens: int
):
    with FakeAnthropic(reader()) as fake:
        policy = CompactPolicy(token_limit=share, window_tokens=window)
        session = Session(
            workspace, model=AnthropicModel(model, client=fake.client()), policy=policy
        )
        assert session.token_limit == tokens


def test_a_share_of_a_small_window_compacts_when_the_prompt_passes_it(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        policy = CompactPolicy(token_limit=0.5, window_tokens=3_000)
        session = session_on(fake, workspace, policy=policy, strategies=[Summarise()])
        session.ask("Read inventory.py.")
        session.ask("Read it again.")
        fake.assert_no_rejections()
    assert session.token_limit == 1_500
    assert session.state.compact_count >= 1
    assert session.context().tokens < 1_500


@pytest.mark.parametrize("bad", [0, 0.0, 1.5, -0.2, True, "0.8"])
def test_a_token_limit_is_a_share_below_one_or_a_whole_number(bad: Any):
    with pytest.raises(ValueError, match="token_limit"):
        CompactPolicy(token_limit=bad)


def test_a_share_without_a_known_window_is_said_once(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        model = AnthropicModel("my-local-model", client=fake.client(max_retries=0))
        session = Session(workspace, model=model, policy=CompactPolicy(token_limit=0.8))
        events = collect(session)
        session.ask("Read inventory.py.")
        session.ask("Again.")
    said = [e for e in events if isinstance(e, Notice) and e.code == "unknown_window"]
    assert session.token_limit is None
    assert len(said) == 1 and "window_tokens" in said[0].message


def test_pins_open_the_history_after_a_reset_and_cannot_join_mid_ask(workspace: Path):
    with FakeAnthropic(reader()) as fake:
        session = session_on(fake, workspace)
        session.pin(PIN)
        session.ask("Read inventory.py.")
        session.reset()
        assert user_texts(session.messages) == [BLOCK]
        failures: list[Exception] = []

        def pin_now(event: Event) -> None:
            if isinstance(event, CompactionFinished | Notice) or failures:
                return
            try:
                session.pin("from an observer")
            except RuntimeError as exc:
                failures.append(exc)

        session.subscribe(pin_now)
        session.ask("Read it again.")
        assert failures and "between asks" in str(failures[0])
        assert BLOCK in user_texts(agent_requests(fake)[-1]["messages"])
        assert session.pins == [(1, PIN)]
        fake.assert_no_rejections()
