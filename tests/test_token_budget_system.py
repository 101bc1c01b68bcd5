"""TokenBudget(as_system=True): the note goes with one call as a mid-conversation system
message (beta `mid-conversation-system-clear-at-2026-08-21`), after the newest message and past
the cache breakpoints; the history is never rewritten, the cached prefix survives, the call's
record names the note, and replay counts its tokens on the call that carried it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from support.fake_api import FakeAnthropic
from support.responders import offline_responder

from evo_magic import load_transcripts, replay
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import REMINDER_PREFIX
from evo_magic.events import MicroCompacted, ModelResponded
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import MicroCompact, Summarise, TokenBudget
from evo_magic.strategies.registry import make_strategy

BETA = "mid-conversation-system-clear-at-2026-08-21"


def _texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if isinstance(b, dict)]


def _has_marker(block: Any) -> bool:
    return isinstance(block, dict) and "cache_control" in block


def test_the_setting_is_registered_and_off_by_default():
    assert TokenBudget().as_system is False
    assert make_strategy("token-budget(as_system=True)").as_system is True


def test_the_note_is_a_system_message_for_one_call_and_the_history_is_untouched(
    workspace: Path,
):
    budget = TokenBudget(window_tokens=7_000, before_compaction=False, as_system=True)
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
        bodies = [b for b in server.accepted if b.get("tools")]
        headers = [h for h in server.headers]
    assert not [e for e in events if isinstance(e, MicroCompacted) and e.strategy == "token-budget"]
    carried = [i for i, b in enumerate(bodies) if b["messages"][-1]["role"] == "system"]
    assert carried, "no call carried a note"
    for i in carried:
        body = bodies[i]
        note = body["messages"][-1]
        assert note["clear_at"] == "next_user_message"
        assert note["content"].startswith(REMINDER_PREFIX)
        assert body["messages"][-2]["role"] == "user"
        assert [m["role"] for m in body["messages"]].count("system") == 1
        # Past the breakpoints: the cached prefix ends at the history's newest message.
        assert "cache_control" not in note
        assert any(_has_marker(b) for b in body["messages"][-2]["content"])
        # The next call sends the same history up to where the note was, unchanged.
        if i + 1 < len(bodies) and len(bodies[i + 1]["messages"]) > len(body["messages"]) - 1:
            sent_before = [_unmarked(m) for m in body["messages"][:-1]]
            sent_after = [_unmarked(m) for m in bodies[i + 1]["messages"][: len(sent_before)]]
            assert sent_before == sent_after
    # No history message ever held a note (no rewrite).
    for body in bodies:
        for message in body["messages"]:
            if message["role"] != "system":
                assert not any(t.startswith(REMINDER_PREFIX) for t in _texts(message))
    # The beta is asked for exactly on the calls that carried a note.
    with_beta = [BETA in h.get("anthropic-beta", "") for h in headers]
    assert sum(with_beta) == len(carried)
    # The call's record names the note it carried.
    recorded = [e.turn_note for e in events if isinstance(e, ModelResponded) and e.turn_note]
    assert recorded == [bodies[i]["messages"][-1]["content"] for i in carried]
    # Each following call reads the prefix the note's call cached.
    responded = [e for e in events if isinstance(e, ModelResponded)]
    noted = [n for n, e in enumerate(responded) if e.turn_note]
    following = [responded[n + 1] for n in noted if n + 1 < len(responded)]
    assert following and all(e.usage.cache_read_input_tokens > 0 for e in following)
    session.close()
    t = load_transcripts(session.directory)
    replayed = replay(
        t,
        {"none": [MicroCompact(), Summarise()], "budget": strategies},
        policy=CompactPolicy(context_limit=16_000),
    )
    calls = replayed.calls
    chars = calls.pivot_table(index="call", columns="strategy", values="context_chars")
    tokens = calls.pivot_table(index="call", columns="strategy", values="context_tokens")
    # The history is the same under both; the prompt is bigger exactly on the noted calls.
    assert (chars["budget"] == chars["none"]).all()
    bigger = sorted(tokens.index[tokens["budget"] > tokens["none"]].tolist())
    noted_calls = sorted(e.call for e in responded if e.turn_note)
    assert bigger == noted_calls
    assert (tokens["budget"] >= tokens["none"]).all()


def _unmarked(message: dict[str, Any]) -> str:
    """A message as JSON without its cache markers (a breakpoint moves; the text does not)."""
    text = json.dumps(message, sort_keys=True)
    content = json.loads(text)["content"]
    if isinstance(content, list):
        for block in content:
            block.pop("cache_control", None)
    return json.dumps({**message, "content": content}, sort_keys=True)


def test_the_fake_takes_the_shape_only_with_the_beta():
    note = {
        "role": "system",
        "content": "[context budget] half used",
        "clear_at": "next_user_message",
    }
    user = {"role": "user", "content": "hi"}
    with FakeAnthropic(offline_responder()) as server:
        client = server.client(max_retries=0)
        params: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 64}
        with pytest.raises(anthropic.BadRequestError, match="role"):
            client.beta.messages.create(**params, messages=[user, note])
        with pytest.raises(anthropic.BadRequestError, match="clear_at"):
            client.beta.messages.create(
                **params, messages=[user, {**note, "clear_at": "later"}], betas=[BETA]
            )
        with pytest.raises(anthropic.BadRequestError, match="follow a user"):
            client.beta.messages.create(**params, messages=[note, user], betas=[BETA])
        reply = client.beta.messages.create(**params, messages=[user, note], betas=[BETA])
        assert reply.content
