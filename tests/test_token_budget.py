"""TokenBudget: the model is told the share of its window used at each mark, once, and once
before an automatic compaction; the note is part of the request the API accepts, and replay
counts it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.fake_api import FakeAnthropic, validate_messages
from support.responders import offline_responder

from evo_magic import load_transcripts, render, replay
from evo_magic.compact.base import Context
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import REMINDER_PREFIX
from evo_magic.events import CompactionFinished, MicroCompacted
from evo_magic.models import AnthropicModel
from evo_magic.models.catalog import context_window
from evo_magic.session import Session
from evo_magic.strategies import MicroCompact, Summarise, TokenBudget
from evo_magic.strategies.registry import make_strategy

WINDOW = 4_000  # tokens: 16,000 characters of message JSON at 4 characters a token


def grown(steps: int, size: int = 400) -> list[dict[str, Any]]:
    """A request and `steps` tool calls whose results are `size` characters each."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Read everything."}]}
    ]
    for n in range(steps):
        use = {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"command": "cat"}}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * size}
        messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    return messages


def notes(message: dict[str, Any]) -> list[str]:
    return [
        b["text"]
        for b in message["content"]
        if b.get("type") == "text" and b["text"].startswith(REMINDER_PREFIX)
    ]


def run_growth(strategy: TokenBudget, steps: int, size: int = 400, **options: Any) -> list[tuple]:
    """The strategy before each call of a growing conversation (its notes kept, as in a
    session): (the size before the call, notes added)."""
    memo: dict[str, Any] = {}
    history = grown(0)
    told = []
    for n in range(steps):
        history = [*history, *grown(n + 1, size)[-2:]]
        ctx = Context.for_messages(history, trigger="every_call", **options)
        ctx.memo = memo
        result = strategy.compact(history, ctx)
        if result is not None:
            new = list(result)
            assert validate_messages(new) is None
            # Only the newest message changes, and only by a block at its end.
            assert new[:-1] == history[:-1]
            assert new[-1]["content"][:-1] == history[-1]["content"]
            told.append((ctx.size, notes(new[-1])))
            history = new
    return told


def test_each_mark_is_told_exactly_once_when_the_prompt_crosses_it():
    told = run_growth(TokenBudget(window_tokens=WINDOW, before_compaction=False), steps=40)
    assert len(told) == 3
    for (size, said), mark in zip(told, (0.25, 0.5, 0.75), strict=True):
        tokens = size.tokens
        assert tokens >= mark * WINDOW and tokens - 110 < mark * WINDOW  # the first call past it
        assert said == [
            f"{REMINDER_PREFIX}{tokens:,} of the {WINDOW:,}-token context window are used "
            f"({tokens / WINDOW:.0%}); {WINDOW - tokens:,} tokens are left."
        ]


def test_a_jump_over_several_marks_is_one_note():
    told = run_growth(
        TokenBudget(window_tokens=WINDOW, before_compaction=False), steps=3, size=7_000
    )
    # About 1,760 tokens a step: past 25% at the first call, past 50% and 75% at once at the
    # second, nothing more to tell at the third.
    assert [len(said) for _, said in told] == [1, 1]
    first, second = (size.tokens for size, _ in told)
    assert 0.25 * WINDOW <= first < 0.5 * WINDOW <= 0.75 * WINDOW <= second


def test_the_warning_before_an_automatic_compaction_comes_once():
    strategy = TokenBudget(window_tokens=10**6)  # no mark is reached
    told = run_growth(strategy, steps=40, context_limit=12_000)
    assert len(told) == 1
    size, (said,) = told[0]
    # The first call at 90% of the limit or more (a step is about 440 characters).
    assert 0.9 * 12_000 <= size.chars < 0.9 * 12_000 + 440
    assert f"The context is at {size.chars / 12_000:.0%} of the size" in said
    assert "replaced by a summary" in said
    # Not when no automatic compaction can follow, nor when it follows this very call.
    history = grown(30)
    ctx = Context.for_messages(history, trigger="every_call", context_limit=12_000)
    assert ctx.size.chars > 12_000 * 0.9
    assert strategy.compact(history, replace(ctx, memo={}, auto_compaction=False)) is None
    assert strategy.compact(history, replace(ctx, memo={}, compaction_due=True)) is None
    assert strategy.compact(history, replace(ctx, memo={})) is not None


def test_the_window_comes_from_the_model_table_or_the_setting():
    ctx = Context.for_messages(grown(1), model="claude-sonnet-4-5-20250929")
    assert TokenBudget().window(ctx) == 200_000
    assert TokenBudget(window_tokens=50_000).window(ctx) == 50_000
    assert TokenBudget().window(replace(ctx, model="claude-opus-4-6")) == 1_000_000
    assert TokenBudget().window(replace(ctx, model="some-other-model")) is None
    assert context_window("gpt-5") == 400_000
    assert context_window("claude-sonnet-5-5[1m]") == 1_000_000
    # Unknown window: no mark is told (only the compaction warning could be).
    assert run_growth(TokenBudget(before_compaction=False), steps=30, model="unknown") == []


def test_a_model_of_unknown_window_still_gets_the_warning_before_compaction(workspace: Path):
    # The offline stand-in's window is unknown: no share of it is told, but the warning before
    # an automatic compaction is (it used to fail with KeyError 'warned' on the first call).
    told = run_growth(TokenBudget(), steps=40, model="offline", context_limit=12_000)
    assert len(told) == 1 and "of the size at which it is compacted" in told[0][1][0]
    session = Session(workspace, model="offline", strategies=[TokenBudget()])
    events: list[Any] = []
    session.subscribe(events.append)
    session.compact(strategy=TokenBudget())  # asked for by name, as `%compact --strategy`
    session.ask("Look around.")
    assert [e for e in events if isinstance(e, CompactionFinished) and not e.success] == []


def test_registered_by_name_and_checked():
    made = make_strategy("token-budget(window_tokens=8000, marks=[0.75, 0.5])")
    assert isinstance(made, TokenBudget) and made.marks == (0.5, 0.75) and made.when == "every_call"
    with pytest.raises(ValueError, match="marks"):
        TokenBudget(marks=(0.5, 1.5))
    with pytest.raises(ValueError, match="window_tokens"):
        TokenBudget(window_tokens=0)


def test_notes_reach_the_api_once_per_mark_and_replay_counts_them(workspace: Path):
    """Through the loop, the real SDK and the fake: the notes are in the requests the fake
    accepts, each mark once; after a full compaction the marks start again; replayed with the
    same strategy, the notes' tokens are in the replayed context."""
    budget = TokenBudget(window_tokens=7_000, before_compaction=False)
    strategies = [MicroCompact(), budget, Summarise()]
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        session = Session(
            workspace,
            model=model,
            policy=CompactPolicy(context_limit=16_000),
            strategies=strategies,
        )
        events: list[Any] = []
        session.subscribe(events.append)
        session.ask("Survey the project.")
        session.ask("Survey it again.")
        server.assert_no_rejections()
        sent = [body for body in server.accepted if body.get("tools")]
    told = [e for e in events if isinstance(e, MicroCompacted) and e.strategy == "token-budget"]
    assert told and all(e.cleared_ids == () and e.cleared_tokens == 0 for e in told)
    texts = [edit.block["text"] for e in told for edit in e.edits]
    assert all(t.startswith(REMINDER_PREFIX) for t in texts)
    assert render.event_line(told[0]).startswith("token-budget: told the model '[context budget]")
    in_requests = {
        b["text"]
        for body in sent
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "text" and b["text"] in texts
    }
    assert in_requests == set(texts)
    # Within one fill (between full compactions) the shares told rise, each past a new mark;
    # after a compaction the marks start again.
    fills: list[list[float]] = [[]]
    for event in events:
        if isinstance(event, CompactionFinished) and event.success:
            fills.append([])
        elif event in told:
            fills[-1] += [int(e.block["text"].split("(")[1].split("%")[0]) for e in event.edits]
    marks = [[sum(share >= m for m in (25, 50, 75)) for share in fill] for fill in fills]
    assert all(fill == sorted(set(fill)) for fill in marks)
    assert len([fill for fill in marks if fill]) >= 2
    session.close()
    t = load_transcripts(session.directory)
    replayed = replay(
        t,
        {"recorded": "recorded", "none": [MicroCompact(), Summarise()], "budget": strategies},
        policy=CompactPolicy(context_limit=16_000),
    )
    by = replayed.calls.pivot_table(index="call", columns="strategy", values="context_chars")
    assert (by["budget"] >= by["none"]).all() and (by["budget"] > by["none"]).any()
    # Replayed as it ran, or under the same strategies, every request is the one sent.
    sent_chars = t.calls.sort_values("call")["context_sent_chars"].tolist()
    assert by["recorded"].tolist() == by["budget"].tolist() == sent_chars
