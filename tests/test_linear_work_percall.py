"""Linear-time properties of the per-call path guarded by counting work, not seconds: what one
model call touches of the history (the every-call strategies, the server strategies' part of
the request, the request itself) is the same at 200 messages and at 2,000."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from support.counted_history import SLACK, TOUCHED, Counted, ask, batch, compactor_for, grown, step
from support.fake_api import FakeAnthropic

from evo_magic.compact.base import Context
from evo_magic.history import History
from evo_magic.measure import ContextSize
from evo_magic.models.anthropic import AnthropicModel, request_params
from evo_magic.models.base import ModelRequest, system_note
from evo_magic.prompt_cache import CacheSettings, place_breakpoints
from evo_magic.strategies import MicroCompact
from evo_magic.strategies.registry import BUILTIN, make_strategy


def touched_per_call(name: str, size: int, replaced: bool = False) -> int:
    """Messages of the history one call touches once the history has `size` messages (after
    a server compaction block was seen and a client compaction replaced it, when asked)."""
    history = History(lambda event: None)
    compactor = compactor_for(name, history)
    n = grown(history, compactor, size)
    if replaced:
        compactor.server.summarised()  # a server block came and went: its beta is remembered
    TOUCHED.clear()
    step(history, compactor, n + 1)
    compactor.server.params("claude-opus-4-6")
    history.snapshot()
    return len(TOUCHED)


EVERY_CALL = [name for name in BUILTIN if make_strategy(name).when == "every_call"]


@pytest.mark.parametrize("name", EVERY_CALL)
def test_every_call_strategy_touches_the_same_at_any_length(name: str) -> None:
    small, large = touched_per_call(name, 200), touched_per_call(name, 2_000)
    assert large <= small + SLACK, (name, small, large)


@pytest.mark.parametrize("name", ["server-compact", "server-clear-tool-uses"])
def test_server_strategies_after_a_replacement_do_not_scan_the_history(name: str) -> None:
    small = touched_per_call(name, 200, replaced=True)
    large = touched_per_call(name, 2_000, replaced=True)
    assert large <= small + SLACK, (name, small, large)


def test_a_request_is_built_without_copying_the_history() -> None:
    """Building a request allocates the same at 200 and at 20,000 messages."""

    def allocated(size: int) -> int:
        history = History(lambda event: None)
        for n in range(size):
            history.append({"role": "user" if n % 2 else "assistant", "content": "x"})
        tracemalloc.start()
        try:
            history.snapshot()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert allocated(20_000) <= allocated(200) + 1_024


def _snapshot_of(size: int) -> Any:
    history = History(lambda event: None)
    history.append(ask(0))
    n = 0
    while len(history) < size:
        n += 1
        turn, results = batch(n)
        history.append(turn)
        history.add_tool_result(results[0])
    return history, history.snapshot()


NOTED = "mid-conversation-system-clear-at-2026-08-21"
PATH = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": PATH}]


def test_the_adapter_marks_a_request_without_copying_the_history() -> None:
    """The Anthropic adapter's request (breakpoints placed, a turn note after them) allocates
    the same at 200 and at 20,000 messages: the marked messages are swapped in, not copied in."""

    def allocated(size: int) -> int:
        _, sent = _snapshot_of(size)
        request = ModelRequest(
            messages=sent, max_tokens=64, system="Be brief.", cache=CacheSettings(),
            edited_from=size // 2, turn_note="Half the window is used.", betas=(NOTED,),
        )  # fmt: skip
        tracemalloc.start()
        try:
            request_params(request, "claude-opus-4-6")
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert allocated(20_000) <= allocated(200) + 1_024


@pytest.mark.parametrize("cache", [CacheSettings(), CacheSettings(enabled=False)])
def test_the_adapter_sends_what_a_copied_list_sends(cache: CacheSettings) -> None:
    """The request on the wire is the one a plain list with the breakpoints placed sends, byte
    for byte: after a message of the snapshot was overwritten in the history, with a turn
    note after the newest message."""
    history, sent = _snapshot_of(40)
    history.rewrite({5: {"role": "assistant", "content": [{"type": "text", "text": "later"}]}})
    history.append({"role": "assistant", "content": [{"type": "text", "text": "not sent"}]})
    note = "A third of the window is used."
    request = ModelRequest(
        messages=sent, max_tokens=64, system="Be brief.", tools=TOOLS, cache=cache,
        edited_from=9, turn_note=note, betas=(NOTED,),
    )  # fmt: skip
    plain = [json.loads(json.dumps(message)) for message in sent]  # the messages as sent
    assert plain[5]["content"] != [{"type": "text", "text": "later"}] and len(plain) == 41
    expected = place_breakpoints(
        plain,
        system="Be brief.",
        tools=TOOLS,
        settings=cache,
        model="claude-opus-4-6",
        edited_from=9,
    ).params
    with FakeAnthropic() as fake:
        AnthropicModel("claude-opus-4-6", client=fake.client()).respond(request)
        with fake.client().beta.messages.stream(
            model="claude-opus-4-6", max_tokens=64, betas=[NOTED],
            **{**expected, "messages": [*expected["messages"], system_note(note)]},
        ) as stream:  # fmt: skip
            stream.get_final_message()
        fake.assert_no_rejections()
        ours, copied = fake.requests
    assert json.dumps(ours) == json.dumps(copied)
    assert ours["messages"][-1] == system_note(note) and len(ours["messages"]) == 42
    assert [dict(m) for m in sent] == plain  # nothing sent was marked in place


def test_a_request_reads_as_it_was_sent_after_the_history_changed() -> None:
    history = History(lambda event: None)
    history.append(ask(0))
    turn, results = batch(1)
    history.append(turn)
    sent = history.snapshot()
    before = [dict(m) for m in sent]
    history.add_tool_result(results[0])  # the new results message: not part of what was sent
    history.rewrite({0: {"role": "user", "content": [{"type": "text", "text": "edited"}]}})
    history.rewrite({0: {"role": "user", "content": [{"type": "text", "text": "again"}]}})
    assert len(sent) == 2 and [dict(m) for m in sent] == before
    assert list(sent[-1:]) == [before[-1]] and dict(list(reversed(sent))[1]) == before[0]
    history.replace([{"role": "user", "content": "summary"}])
    assert [dict(m) for m in sent] == before
    assert list(history.snapshot()) == [{"role": "user", "content": "summary"}]


def test_context_for_messages_measures_nothing_it_is_not_asked_for() -> None:
    messages = [ask(0)]
    for n in range(1, 1_000):
        turn, results = batch(n)
        messages += [turn, Counted(role="user", content=results)]
    TOUCHED.clear()
    ctx = Context.for_messages(messages)
    assert len(TOUCHED) == 0  # neither measured nor scanned for tool names up front
    assert ctx.tool_name({"tool_use_id": "toolu_000007"}) == "read_file"
    assert ctx.size.messages == len(messages)  # measured once, when read
    assert ctx.size.chars == len(json.dumps(messages, separators=(",", ":")))
    TOUCHED.clear()
    assert ctx.size.messages == len(messages) and len(TOUCHED) == 0  # kept, not measured again
    with pytest.raises(AttributeError, match="no attribute 'sizes'"):
        ctx.sizes  # noqa: B018  (any other missing attribute is still an error)
    given = Context.for_messages(messages)
    given.size = ContextSize(1, 2, 3)
    assert given.size == ContextSize(1, 2, 3)


def outside_a_session(size: int, memo: dict[str, Any] | None) -> tuple[list[Any], int]:
    """A list grown to `size` messages with MicroCompact run before every call through
    `Context.for_messages` (its memo kept between calls, when given), as a script or another
    framework runs a strategy; the final list, and the messages the last call touched."""
    strategy = MicroCompact(cache_aware=False)
    messages: list[Any] = [ask(0)]
    n = 0
    while len(messages) < size:
        n += 1
        turn, results = batch(n)
        messages += [turn, Counted(role="user", content=results)]
        TOUCHED.clear()
        ctx = Context.for_messages(messages, memo=memo if memo is not None else {})
        result = strategy.compact(messages, ctx)
        if result is not None:
            messages = [m if isinstance(m, Counted) else Counted(m) for m in result]
    return messages, len(TOUCHED)


def test_a_strategy_outside_a_session_touches_the_same_at_any_length() -> None:
    """MicroCompact run per call through `Context.for_messages` with its memo kept indexes only
    the new messages (each fresh context scanned every tool result and tool name per call)."""
    small = outside_a_session(200, {})[1]
    kept, large = outside_a_session(2_000, {})
    assert large <= small + SLACK, (small, large)
    # A new memo per call scans the whole history at every call: quadratic, so compared at
    # 600 messages (27 turns, hundreds of results cleared), where it takes a second, not 15.
    shorter = outside_a_session(600, {})[0]
    fresh, scanned = outside_a_session(600, None)
    assert scanned > 500
    assert json.dumps(shorter) == json.dumps(fresh)  # the same history either way
    placeholders = [m for m in kept if "compacted" in json.dumps(m)]
    assert len(placeholders) > 900


def test_a_kept_index_follows_a_list_replaced_by_another() -> None:
    memo: dict[str, Any] = {}
    messages = [ask(0)]
    for n in range(1, 40):
        turn, results = batch(n)
        messages += [turn, Counted(role="user", content=results)]
    before = Context.for_messages(messages, memo=memo).tool_results()
    assert [ref.tool_use_id for ref in before] == [f"toolu_{n:06d}" for n in range(1, 40)]
    window = [ask(99), *messages[-6:]]  # the history replaced by a shorter one
    after = Context.for_messages(window, memo=memo)
    assert [(r.index, r.tool_use_id) for r in after.tool_results()] == [
        (2, "toolu_000037"), (4, "toolu_000038"), (6, "toolu_000039"),
    ]  # fmt: skip
    assert after.tool_name({"tool_use_id": "toolu_000038"}) == "read_file"
