"""The API's clearing edits: the documented rules (`support.clearing`, which the loopback fake
applies) on the documents' own cases, then the project's implementation
(`evo_magic.compact.server_edits`, which replay's modelled server runs) against them on
generated conversations."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support import clearing
from support.clearing import CLEARED_PLACEHOLDER

from evo_magic.compact import server_edits

TOOLS = ("bash", "read_file", "recall")


def count(messages: list[dict]) -> int:
    """A prompt's tokens, four characters of JSON a token (the tests' own measure)."""
    return len(json.dumps(messages)) // 4


def user(*blocks: Any) -> dict:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Any) -> dict:
    return {"role": "assistant", "content": list(blocks)}


def text(s: str) -> dict:
    return {"type": "text", "text": s}


def thinking(s: str) -> dict:
    return {"type": "thinking", "thinking": s, "signature": "sig-" + s[:8]}


def use(n: int, name: str = "bash") -> dict:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {"command": "x" * 40}}


def result(n: int, size: int = 400) -> dict:
    return {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "r" * size}


def loop(names: tuple[str, ...] = ("bash",) * 5) -> list[dict]:
    """A request, then a tool use of each of `names` one after the other, each answered."""
    messages = [user(text("Look around."))]
    for i, name in enumerate(names):
        messages += [assistant(use(i, name)), user(result(i))]
    return messages


def cleared_ids(messages: list[dict]) -> list[str]:
    return [
        b["tool_use_id"]
        for m in messages
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result" and b["content"] == CLEARED_PLACEHOLDER
    ]


def edit(**options: Any) -> dict:
    return {"type": "clear_tool_uses_20250919", **options}


def tokens(value: int) -> dict:
    return {"type": "input_tokens", "value": value}


# -- the documented rules on the documents' cases ---------------------------------------------


def test_the_oldest_tool_results_are_cleared_and_the_newest_kept():
    messages = loop()
    after, reported = clearing.clear_tool_uses(messages, edit(trigger=tokens(100)), count)
    assert cleared_ids(after) == ["toolu_0", "toolu_1"]  # keep: 3 tool uses by default
    assert reported == {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": 2,
        "cleared_input_tokens": count(messages) - count(after),
    }
    assert messages == loop(), "the given prompt is not changed"
    assert all(b["input"] for m in after for b in m["content"] if b.get("type") == "tool_use")


def test_clearing_begins_once_the_prompt_exceeds_the_trigger():
    messages = loop()
    at = count(messages)
    assert clearing.clear_tool_uses(messages, edit(trigger=tokens(at)), count) is None
    assert clearing.clear_tool_uses(messages, edit(trigger=tokens(at - 1)), count) is not None
    by_uses = {"type": "tool_uses", "value": 5}
    assert clearing.clear_tool_uses(messages, edit(trigger=by_uses), count) is None
    assert clearing.clear_tool_uses(loop(("bash",) * 6), edit(trigger=by_uses), count)
    assert clearing.clear_tool_uses(messages, edit(), count) is None  # 100,000 by default


def test_excluded_tools_are_never_cleared_and_inputs_only_when_asked():
    messages = loop(("recall", "bash", "read_file", "bash", "bash"))
    options = {"trigger": tokens(100), "keep": {"type": "tool_uses", "value": 2}}
    after, reported = clearing.clear_tool_uses(
        messages, edit(**options, exclude_tools=["recall"]), count
    )
    assert cleared_ids(after) == ["toolu_1", "toolu_2"] and reported["cleared_tool_uses"] == 2
    after, _ = clearing.clear_tool_uses(messages, edit(**options, clear_tool_inputs=True), count)
    inputs = {
        b["id"]: b["input"] for m in after for b in m["content"] if b.get("type") == "tool_use"
    }
    assert [i for i, v in inputs.items() if v == {}] == ["toolu_0", "toolu_1", "toolu_2"]
    after, _ = clearing.clear_tool_uses(
        messages, edit(**options, clear_tool_inputs=["bash"]), count
    )
    inputs = {
        b["id"]: b["input"] for m in after for b in m["content"] if b.get("type") == "tool_use"
    }
    assert [i for i, v in inputs.items() if v == {}] == ["toolu_1"]


def test_nothing_is_cleared_unless_it_frees_at_least_clear_at_least():
    messages = loop()
    freed = clearing.clear_tool_uses(messages, edit(trigger=tokens(100)), count)[1][
        "cleared_input_tokens"
    ]
    enough = edit(trigger=tokens(100), clear_at_least=tokens(freed))
    assert clearing.clear_tool_uses(messages, enough, count) is not None
    too_much = edit(trigger=tokens(100), clear_at_least=tokens(freed + 1))
    assert clearing.clear_tool_uses(messages, too_much, count) is None


def test_thinking_is_kept_for_the_newest_turns_and_a_tool_loop_is_one_turn():
    messages = [
        user(text("First.")),
        assistant(thinking("one " * 50), text("Done one.")),
        user(text("Second.")),
        assistant(thinking("two " * 50), use(1)),
        user(result(1)),
        assistant(use(2)),  # the same turn: its thinking opened the loop
        user(result(2)),
    ]
    thinking_edit = {"type": "clear_thinking_20251015"}
    after, reported = clearing.clear_thinking(messages, thinking_edit, count)
    kinds = [[b["type"] for b in m["content"]] for m in after if m["role"] == "assistant"]
    assert kinds == [["text"], ["thinking", "tool_use"], ["tool_use"]]
    assert reported == {
        "type": "clear_thinking_20251015",
        "cleared_thinking_turns": 1,
        "cleared_input_tokens": count(messages) - count(after),
    }
    for keep in ("all", {"type": "all"}, {"type": "thinking_turns", "value": 2}):
        assert clearing.clear_thinking(messages, {**thinking_edit, "keep": keep}, count) is None


# -- the project's implementation against the documented rules --------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[dict]:
    """Requests as an agent sends them: user turns, each answered by a loop of tool uses (one
    or two at a time, some with thinking or text) and maybe a closing text; the request ends
    on a user message (a new request, or tool results mid-loop). A tool result is longer than
    the placeholder (clearing a shorter one grows the prompt: the documents do not say what the
    API does then)."""
    messages: list[dict] = []
    n = 0
    for _ in range(draw(st.integers(1, 4))):
        if messages and messages[-1]["role"] == "user":
            messages.append(assistant(text("Noted.")))
        messages.append(user(text("Ask " + "q" * draw(st.integers(0, 200)))))
        for step in range(draw(st.integers(0, 4))):
            blocks = [thinking("t" * draw(st.integers(1, 300)))] if draw(st.booleans()) else []
            blocks += [text("Let me look.")] if draw(st.booleans()) else []
            ids = list(range(n, n + draw(st.integers(1, 2))))
            n += len(ids)
            blocks += [use(i, draw(st.sampled_from(TOOLS))) for i in ids]
            messages.append(assistant(*blocks))
            messages.append(user(*[result(i, draw(st.integers(40, 2_000))) for i in ids]))
            if step and draw(st.booleans()):
                break
        if messages[-1]["role"] == "user" and draw(st.booleans()):
            closing = [thinking("c" * 40)] if draw(st.booleans()) else []
            messages.append(assistant(*closing, text("Done.")))
    if messages[-1]["role"] == "assistant":
        messages.append(user(text("Go on.")))
    return messages


tool_edits = st.builds(
    lambda trigger, keep, excluded, inputs, at_least: {
        "type": "clear_tool_uses_20250919",
        "trigger": trigger,
        "keep": {"type": "tool_uses", "value": keep},
        **({"exclude_tools": excluded} if excluded is not None else {}),
        **({"clear_tool_inputs": inputs} if inputs is not None else {}),
        **({"clear_at_least": tokens(at_least)} if at_least is not None else {}),
    },
    st.one_of(
        st.builds(tokens, st.integers(1, 3_000)),
        st.builds(lambda v: {"type": "tool_uses", "value": v}, st.integers(1, 8)),
    ),
    st.integers(0, 5),
    st.none() | st.lists(st.sampled_from(TOOLS), max_size=2, unique=True),
    st.none() | st.booleans() | st.lists(st.sampled_from(TOOLS), max_size=2, unique=True),
    st.none() | st.integers(0, 1_500),
)


@settings(max_examples=300, deadline=None)
@given(conversations(), tool_edits)
def test_the_projects_tool_result_clearing_is_the_documented_rule(messages, tool_edit):
    assert server_edits.clear_tool_uses(messages, tool_edit, count) == clearing.clear_tool_uses(
        messages, tool_edit, count
    )


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(1, 4))
def test_the_projects_thinking_clearing_is_the_documented_rule(messages, keep):
    thinking_edit = {
        "type": "clear_thinking_20251015",
        "keep": {"type": "thinking_turns", "value": keep},
    }
    assert server_edits.clear_thinking(messages, thinking_edit, count) == clearing.clear_thinking(
        messages, thinking_edit, count
    )
