"""Cache breakpoint placement and the offline prefix-cache model (evo_magic/prompt_cache.py).

Placement is checked against the loopback fake of the API, which validates and emulates prompt
caching on its own (it does not import the project's cache model), through the real SDK.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import anthropic
import pytest
from anthropic.types import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fake_api import FakeAnthropic, validate_request

from evo_magic.cost import DEFAULT_PRICES, Price
from evo_magic.prompt_cache import (
    LOOKBACK_BLOCKS,
    TTL_SECONDS,
    Breakpoint,
    CacheRequest,
    CacheSettings,
    PrefixCache,
    Spot,
    cache_request,
    clearing_saving,
    min_cacheable_tokens,
    place_breakpoints,
    simulate,
)

MODEL = "claude-sonnet-5-5"
SYSTEM = "You are a careful notebook agent. Keep notes of what you find. " * 60
TOOLS = [
    {"name": name, "description": f"The {name} tool.", "input_schema": {"type": "object"}}
    for name in ("bash", "read_file", "write_file")
]
THINKING = {"type": "thinking", "thinking": "Which file first?", "signature": "sig"}


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def use(tool_id: str, name: str = "bash") -> dict:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"command": "ls"}}


def result(tool_id: str, content: Any = "file_a\nfile_b") -> dict:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def markers(params: dict) -> list[tuple[str, dict]]:
    """Every ``cache_control`` of a request, with where it is, in prompt order."""
    found: list[tuple[str, dict]] = []
    for i, tool in enumerate(params.get("tools") or []):
        if "cache_control" in tool:
            found.append((f"tools.{i}", tool["cache_control"]))
    system = params.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        if "cache_control" in block:
            found.append((f"system.{i}", block["cache_control"]))
    for i, message in enumerate(params["messages"]):
        content = message["content"]
        for j, block in enumerate(content if isinstance(content, list) else []):
            if "cache_control" in block:
                found.append((f"messages.{i}.content.{j}", block["cache_control"]))
    return found


def agent_history(turns: int, tools_per_turn: int = 1) -> list[dict]:
    """A conversation as the agent loop builds it: a request, then tool calls and results."""
    ids = itertools.count()
    messages: list[dict] = [{"role": "user", "content": "Survey the project and list what to fix."}]
    for turn in range(turns):
        uses = [use(f"toolu_{next(ids)}") for _ in range(tools_per_turn)]
        messages.append({"role": "assistant", "content": [THINKING, text(f"Step {turn}."), *uses]})
        outputs = [result(u["id"], f"output of {u['id']}\n" * 30) for u in uses]
        messages.append({"role": "user", "content": outputs})
    return messages


# --------------------------------------------------------------------------- placement


def test_breakpoints_cover_the_fixed_prefix_the_newest_message_and_the_previous_call() -> None:
    messages = agent_history(3)
    placed = place_breakpoints(messages, system=SYSTEM, tools=TOOLS, model=MODEL)
    last, previous = len(messages) - 1, len(messages) - 3
    assert placed.breakpoints == (
        Spot("system", 0, None, "5m"),
        Spot("messages", previous, 0, "5m"),
        Spot("messages", last, 0, "5m"),
    )
    assert [path for path, _ in markers(placed.params)] == [
        "system.0",
        f"messages.{previous}.content.0",
        f"messages.{last}.content.0",
    ]
    assert all(control == {"type": "ephemeral"} for _, control in markers(placed.params))
    assert placed.params["tools"] == TOOLS
    assert validate_request({"model": MODEL, "max_tokens": 8, **placed.params}) is None


def test_the_arguments_are_not_mutated_and_untouched_messages_are_shared() -> None:
    messages = agent_history(40)
    system = [text(SYSTEM)]
    before = copy.deepcopy((messages, system, TOOLS))
    placed = place_breakpoints(messages, system=system, tools=TOOLS, model=MODEL)
    assert (messages, system, TOOLS) == before
    sent = placed.params["messages"]
    touched = {spot.index for spot in placed.breakpoints if spot.section == "messages"}
    assert touched == {len(messages) - 1, len(messages) - 3}
    assert all(sent[i] is messages[i] for i in range(len(messages)) if i not in touched)
    assert all(sent[i] is not messages[i] for i in touched)
    assert placed.params["tools"][0] is TOOLS[0]


def test_thinking_and_empty_text_blocks_are_never_marked() -> None:
    messages = [
        {"role": "user", "content": [text("Look at this."), text(" ")]},
        {"role": "assistant", "content": [text("Looking."), THINKING]},
    ]
    placed = place_breakpoints(messages, system=[text(SYSTEM), text("")])
    assert placed.breakpoints == (
        Spot("system", 0, None, "5m"),
        Spot("messages", 1, 0, "5m"),
    )
    # The only message before the newest had no markable block after its text: block 0 is used
    # for the newest; the user message is not the previous call's end (it is two back, not three).
    only_thinking = [messages[0], {"role": "assistant", "content": [THINKING]}]
    spots = place_breakpoints(only_thinking).breakpoints
    assert spots == (Spot("messages", 0, 0, "5m"),)


def test_strings_become_marked_text_blocks() -> None:
    placed = place_breakpoints([{"role": "user", "content": "Hello"}], system="Be brief.")
    assert placed.params["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert placed.params["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hello", "cache_control": {"type": "ephemeral"}}],
        }
    ]


def test_disabled_caching_sends_the_request_as_given() -> None:
    messages = agent_history(2)
    placed = place_breakpoints(
        messages, system=SYSTEM, tools=TOOLS, settings=CacheSettings(enabled=False)
    )
    assert placed.breakpoints == ()
    assert placed.params == {"messages": messages, "system": SYSTEM, "tools": TOOLS}
    assert placed.params["messages"] is messages
    assert "cache_control" not in json.dumps(placed.params)


def test_ttls_follow_the_settings_and_their_order() -> None:
    messages = agent_history(2)
    hour = place_breakpoints(messages, system=SYSTEM, settings=CacheSettings(ttl="1h"))
    assert {control.get("ttl") for _, control in markers(hour.params)} == {"1h"}
    mixed = place_breakpoints(
        messages, system=SYSTEM, tools=TOOLS, settings=CacheSettings(ttl="5m", static_ttl="1h")
    )
    assert [control.get("ttl", "5m") for _, control in markers(mixed.params)] == [
        "1h",
        "5m",
        "5m",
    ]
    assert validate_request({"model": MODEL, "max_tokens": 8, **mixed.params}) is None
    with pytest.raises(ValueError, match="1-hour"):
        CacheSettings(ttl="1h", static_ttl="5m")
    with pytest.raises(ValueError, match="'5m' or '1h'"):
        CacheSettings(ttl="10m")


def test_tools_get_their_own_breakpoint_only_when_they_can_be_cached_alone() -> None:
    messages = [{"role": "user", "content": "go"}]
    long_tools = [{**tool, "description": "Runs things. " * 300} for tool in TOOLS]
    sections = [
        [s.section for s in place_breakpoints(messages, system=SYSTEM, **case).breakpoints]
        for case in (
            {"tools": TOOLS, "model": MODEL},  # about 100 tokens: below any minimum
            {"tools": long_tools, "model": MODEL},  # about 3,000 tokens: over 512
            {"tools": long_tools, "model": "claude-haiku-4-5-20251001"},  # under its 4,096
        )
    ]
    assert sections == [
        ["system", "messages"],
        ["tools", "system", "messages"],
        ["system", "messages"],
    ]
    no_system = place_breakpoints(messages, tools=TOOLS).breakpoints
    assert [s.section for s in no_system] == ["tools", "messages"]


def test_markers_already_in_the_system_prompt_or_tools_are_replaced() -> None:
    stale = {"cache_control": {"type": "ephemeral", "ttl": "1h"}}
    system = [{**text("Rules."), **stale}, text(SYSTEM)]
    tools = [{**TOOLS[0], **stale}, *TOOLS[1:]]
    placed = place_breakpoints(agent_history(3), system=system, tools=tools)
    assert [path for path, _ in markers(placed.params)][:1] == ["system.1"]
    assert len(markers(placed.params)) == 3
    assert system[0]["cache_control"] == stale["cache_control"]  # the caller's copy is kept


@st.composite
def conversations(draw: st.DrawFn) -> list[dict]:
    words = st.text(alphabet="abc xyz", min_size=1, max_size=12).filter(str.strip)
    ids = itertools.count()
    first = draw(st.one_of(words, st.lists(words.map(text), min_size=1, max_size=3)))
    messages: list[dict] = [{"role": "user", "content": first}]
    for _ in range(draw(st.integers(0, 8))):
        blocks = [THINKING] if draw(st.booleans()) else []
        blocks += [text(draw(words))] if draw(st.booleans()) else []
        uses = [use(f"toolu_{next(ids)}") for _ in range(draw(st.integers(0, 12)))]
        blocks = blocks + uses or [text("ok")]
        messages.append({"role": "assistant", "content": blocks})
        if uses:
            outputs = [result(u["id"], draw(st.one_of(words, st.just([text("x")])))) for u in uses]
            extra = [text(draw(words))] if draw(st.booleans()) else []
            messages.append({"role": "user", "content": outputs + extra})
        elif draw(st.booleans()):
            messages.append({"role": "user", "content": draw(words)})
        else:
            break  # the conversation ends on an assistant prefill
    return messages


SETTINGS = st.sampled_from(
    [
        CacheSettings(),
        CacheSettings(ttl="1h"),
        CacheSettings(static_ttl="1h"),
        CacheSettings(enabled=False),
    ]
)
SYSTEMS = st.one_of(
    st.just(""),
    st.just(SYSTEM),
    st.just([text("Rules."), {**text(SYSTEM), "cache_control": {"type": "ephemeral"}}]),
)
TOOL_SETS = st.sampled_from(
    [
        [],
        TOOLS,
        [{**tool, "description": "x" * 6000} for tool in TOOLS],
        [{**TOOLS[0], "cache_control": {"type": "ephemeral"}}],
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=conversations(),
    system=SYSTEMS,
    tools=TOOL_SETS,
    cache=SETTINGS,
    model=st.sampled_from([MODEL, "claude-opus-4-6", "someone-elses-model"]),
)
@pytest.mark.slow
def test_every_placement_is_a_request_the_api_accepts(
    messages: list[dict], system: Any, tools: list[dict], cache: CacheSettings, model: str
) -> None:
    if not tools and any(b["type"] in ("tool_use", "tool_result") for b in blocks_of(messages)):
        tools = TOOLS  # the API requires the tools of the calls in the conversation
    before = copy.deepcopy((messages, system, tools))
    placed = place_breakpoints(messages, system=system, tools=tools, settings=cache, model=model)
    assert validate_request({"model": model, "max_tokens": 8, **placed.params}) is None
    found = markers(placed.params)
    assert len(found) == len(placed.breakpoints) <= 4
    assert (messages, system, tools) == before
    if cache.enabled:
        assert any(spot.section == "messages" for spot in placed.breakpoints)


# --------------------------------------------------------------------------- against the fake


def call(client: anthropic.Anthropic, params: dict) -> Message:
    return client.messages.create(model=MODEL, max_tokens=64, **params)


def fixed_prefix_tokens(system: str) -> int:
    """The fake's documented count of the tools and a string system prompt: each tool's JSON,
    and the system prompt's text block's, over 4."""
    return sum(len(json.dumps(t)) // 4 for t in TOOLS) + len(json.dumps(text(system))) // 4


def blocks_of(messages: list[dict]) -> list[dict]:
    return [b for m in messages if isinstance(m["content"], list) for b in m["content"]]


def test_a_steady_agent_loop_reads_everything_the_previous_call_wrote() -> None:
    history = agent_history(0)
    ratios = []
    with FakeAnthropic(min_cacheable_tokens=0) as fake, fake.client() as client:
        previous_extent = width = 0
        for turn in range(12):
            placed = place_breakpoints(history, system=SYSTEM, tools=TOOLS, model=MODEL)
            usage = call(client, placed.params).usage
            read, written = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
            assert read == previous_extent
            previous_extent = read + written
            if width == 1:  # a wide turn brings much new output: a large write, rightly
                ratios.append(read / (read + written + usage.input_tokens))
            fake.clock.advance(20)
            # A turn with 15 parallel tool calls adds 30+ blocks: past the 20-block lookback.
            width = 15 if turn == 6 else 1
            history = history + agent_history(1, width)[1:]
            for block in history[-2]["content"]:
                if block["type"] == "tool_use":  # unique ids across turns
                    block["id"] = f"{block['id']}_{turn}"
            for block in history[-1]["content"]:
                block["tool_use_id"] = f"{block['tool_use_id']}_{turn}"
        fake.assert_no_rejections()
    assert len(ratios) == 10
    assert min(ratios[1:]) > 0.8


def test_one_breakpoint_at_the_end_would_miss_after_a_wide_turn() -> None:
    """Why the previous call's end is marked: the API's lookback stops at 20 blocks."""
    before = agent_history(2)
    after = before + agent_history(1, 15)[1:]
    for block in after[-2]["content"]:
        if block["type"] == "tool_use":
            block["id"] = block["id"] + "_w"
    for block in after[-1]["content"]:
        block["tool_use_id"] = block["tool_use_id"] + "_w"

    def end_only(messages: list[dict]) -> dict:
        last = messages[-1]
        marked = {**last["content"][-1], "cache_control": {"type": "ephemeral"}}
        content = [*last["content"][:-1], marked]
        return {
            "system": SYSTEM,
            "tools": TOOLS,
            "messages": [*messages[:-1], {**last, "content": content}],
        }

    with FakeAnthropic(min_cacheable_tokens=0) as fake, fake.client() as client:
        call(client, end_only(before))
        missed = call(client, end_only(after)).usage
        fake.cache.clear()
        call(client, place_breakpoints(before, system=SYSTEM, tools=TOOLS).params)
        placed = call(client, place_breakpoints(after, system=SYSTEM, tools=TOOLS).params).usage
    assert missed.cache_read_input_tokens == 0
    assert placed.cache_read_input_tokens > fixed_prefix_tokens(SYSTEM)


def test_an_edit_to_an_old_message_shows_as_a_cache_write_from_there() -> None:
    history = agent_history(10)
    with FakeAnthropic(min_cacheable_tokens=0) as fake, fake.client() as client:
        first = call(client, place_breakpoints(history, system=SYSTEM, tools=TOOLS).params).usage
        edited = copy.deepcopy(history)
        edited[4]["content"][0]["content"] = "[Earlier tool result compacted.]"
        second = call(client, place_breakpoints(edited, system=SYSTEM, tools=TOOLS).params).usage
    assert second.cache_read_input_tokens == fixed_prefix_tokens(SYSTEM)
    assert second.cache_creation_input_tokens > 0.9 * (
        first.cache_creation_input_tokens - fixed_prefix_tokens(SYSTEM)
    )


def fake_block_tokens(block: dict) -> int:
    """The fake's documented per-block estimate (JSON with the default separators, over 4)."""
    return len(json.dumps(block)) // 4


def test_the_cache_model_agrees_with_the_fake_call_by_call() -> None:
    """Two independent implementations of the documented rules give the same usage."""
    history = agent_history(1)
    steps: list[tuple[float, list[dict], CacheSettings]] = []
    hourly = CacheSettings(static_ttl="1h")
    for turn in range(10):
        history = history + [
            {"role": "assistant", "content": [text(f"Turn {turn}."), use(f"toolu_t{turn}")]},
            {"role": "user", "content": [result(f"toolu_t{turn}", "out\n" * (20 + turn))]},
        ]
        wait = 400.0 if turn == 5 else 30.0  # one idle spell past the 5-minute TTL
        steps.append((wait, list(history), hourly if turn % 2 else CacheSettings()))
    edited = copy.deepcopy(history)
    edited[3]["content"][0]["content"] = "[cleared]"
    steps.append((10.0, edited, CacheSettings()))
    model = PrefixCache(min_tokens=0)
    now = 0.0
    with FakeAnthropic(min_cacheable_tokens=0) as fake, fake.client() as client:
        for wait, messages, cache in steps:
            fake.clock.advance(wait)
            now += wait
            params = place_breakpoints(messages, system=SYSTEM, tools=TOOLS, settings=cache).params
            usage = call(client, params).usage
            total = usage.input_tokens + usage.cache_read_input_tokens
            total += usage.cache_creation_input_tokens
            request = cache_request(
                params, time=now, model=MODEL, tokens_of=fake_block_tokens, prompt_tokens=total
            )
            predicted = model.call(request)
            assert usage.cache_creation is not None
            assert (
                predicted.cache_read_input_tokens,
                predicted.ephemeral_5m_input_tokens,
                predicted.ephemeral_1h_input_tokens,
                predicted.input_tokens,
            ) == (
                usage.cache_read_input_tokens,
                usage.cache_creation.ephemeral_5m_input_tokens,
                usage.cache_creation.ephemeral_1h_input_tokens,
                usage.input_tokens,
            )


# --------------------------------------------------------------------------- the cache model


def request(time: float, prompt: int, *breakpoints: Breakpoint) -> CacheRequest:
    return CacheRequest(time, prompt, breakpoints)


def test_a_prefix_is_written_then_read_until_it_expires() -> None:
    cache = PrefixCache()
    system = Breakpoint(1_000, "system")
    assert cache.call(request(0, 1_200, system)).ephemeral_5m_input_tokens == 1_000
    second = cache.call(request(299, 1_200, system))
    assert (second.cache_read_input_tokens, second.cache_creation_input_tokens) == (1_000, 0)
    assert second.input_tokens == 200
    # Read at 299 s: the entry lives until 599 s.
    assert cache.call(request(598, 1_200, system)).cache_read_input_tokens == 1_000
    assert cache.call(request(598 + 300, 1_200, system)).cache_read_input_tokens == 0


def test_one_hour_entries_and_mixed_ttl_billing() -> None:
    cache = PrefixCache()
    fixed = Breakpoint(1_000, "fixed", "1h")
    talk = Breakpoint(3_000, "talk-1", "5m")
    first = cache.call(request(0, 3_500, fixed, talk))
    assert (first.ephemeral_1h_input_tokens, first.ephemeral_5m_input_tokens) == (1_000, 2_000)
    later = cache.call(request(1_800, 4_000, fixed, Breakpoint(3_600, "talk-2")))
    assert later.cache_read_input_tokens == 1_000  # the 5-minute part has expired
    assert (later.ephemeral_1h_input_tokens, later.ephemeral_5m_input_tokens) == (0, 2_600)
    assert later.input_tokens == 400
    assert later.prompt_tokens == 4_000


def test_prefixes_below_the_minimum_are_neither_written_nor_read() -> None:
    usages = simulate(
        [request(0, 900, Breakpoint(800, "a")), request(1, 900, Breakpoint(800, "a"))],
        min_tokens=1_024,
    )
    assert all(u.cache_read_input_tokens == u.cache_creation_input_tokens == 0 for u in usages)
    assert all(u.input_tokens == 900 for u in usages)


def test_the_lookback_finds_a_write_within_twenty_positions() -> None:
    positions = [(100 * n, f"block-{n}") for n in range(1, 60)]

    def at(n: int) -> Breakpoint:
        tokens, key = positions[n]
        window = tuple(reversed(positions[max(0, n - 40) : n]))  # more than the API looks at
        return Breakpoint(tokens, key, lookback=window)

    # The docs: 20 positions per breakpoint, itself included. From block 24, block 5 is the 20th.
    cache = PrefixCache()
    cache.call(request(0, 6_000, at(5)))
    assert cache.call(request(1, 6_000, at(24))).cache_read_input_tokens == 600
    cold = PrefixCache()
    cold.call(request(0, 6_000, at(5)))
    assert cold.call(request(1, 6_000, at(25))).cache_read_input_tokens == 0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (request(-1, 10), "time order"),
        (request(0, 10, *[Breakpoint(n, n) for n in range(1, 6)]), "at most 4"),
        (request(0, 10, Breakpoint(5, "a"), Breakpoint(3, "b")), "grow"),
        (request(0, 10, Breakpoint(11, "a")), "fit the prompt"),
        (request(0, 10, Breakpoint(5, "a", "1d")), "'5m' or '1h'"),
        (request(0, 10, Breakpoint(5, "a"), Breakpoint(8, "b", "1h")), "1-hour"),
    ],
)
def test_requests_the_api_would_reject_are_refused(bad: CacheRequest, message: str) -> None:
    cache = PrefixCache()
    cache.call(request(0, 10))
    with pytest.raises(ValueError, match=message):
        cache.call(bad)


def test_cached_tokens_and_what_if_copies() -> None:
    cache = PrefixCache()
    cache.call(request(0, 5_000, Breakpoint(1_000, "a"), Breakpoint(4_000, "b")))
    history = [(1_000, "a"), (2_500, "x"), (4_000, "b")]
    assert cache.cached_tokens(history, now=10) == 4_000
    assert cache.cached_tokens(history, now=TTL_SECONDS["5m"]) == 0
    twin = cache.copy()
    twin.call(request(100, 5_000, Breakpoint(4_500, "c")))
    assert cache.cached_tokens([(4_500, "c")], now=100) == 0
    assert twin.cached_tokens([(4_500, "c")], now=100) == 4_500


def test_expired_entries_are_swept_as_the_table_grows() -> None:
    cache = PrefixCache()
    for n in range(5_000):
        cache.call(request(n * 400.0, 10, Breakpoint(5, n)))
    assert cache.size() < 2_100


def test_cache_request_keys_follow_content_not_markers() -> None:
    history = agent_history(3)
    placed = place_breakpoints(history, system=SYSTEM, tools=TOOLS).params
    again = place_breakpoints(history + agent_history(1)[1:], system=SYSTEM, tools=TOOLS).params
    first = cache_request(placed, time=0, model=MODEL)
    second = cache_request(again, time=1, model=MODEL)
    # The system breakpoint and the previous call's end reappear with the same keys.
    assert first.breakpoints[0].key == second.breakpoints[0].key
    assert first.breakpoints[-1].key == second.breakpoints[1].key
    assert first.breakpoints[-1].tokens == second.breakpoints[1].tokens
    assert all(len(bp.lookback) <= LOOKBACK_BLOCKS - 1 for bp in second.breakpoints)
    other_model = cache_request(placed, time=0, model="claude-opus-5")
    assert other_model.breakpoints[0].key != first.breakpoints[0].key
    hourly = place_breakpoints(history, system=SYSTEM, settings=CacheSettings(ttl="1h")).params
    assert {bp.ttl for bp in cache_request(hourly, time=0).breakpoints} == {"1h"}


def test_clearing_pays_off_only_when_enough_calls_follow() -> None:
    price = DEFAULT_PRICES.lookup(MODEL)
    assert price is not None
    freed, invalidated = 8_000, 30_000
    # Break-even: the reads saved per call against the one-off rewrite of the rest.
    per_call = freed * price.cache_read
    rewrite = (invalidated - freed) * (price.cache_write_5m - price.cache_read)
    even = rewrite / per_call
    args = {"freed_tokens": freed, "invalidated_tokens": invalidated, "price": price}
    assert clearing_saving(calls_ahead=int(even) + 1, **args) > 0
    assert clearing_saving(calls_ahead=int(even) - 1, **args) < 0
    # A 1-hour cache costs more to write again, so the same clearing saves less.
    small = {"calls_ahead": 100, "freed_tokens": 1_000, "invalidated_tokens": 9_000}
    costly = Price(3, 15, 3.75, 6, 0.3)
    assert clearing_saving(ttl="1h", price=costly, **small) < clearing_saving(price=costly, **small)
    with pytest.raises(ValueError, match="cannot be smaller"):
        clearing_saving(calls_ahead=1, freed_tokens=10, invalidated_tokens=5, price=price)


def test_minimums_are_known_for_current_models() -> None:
    assert min_cacheable_tokens("claude-opus-5") == 512
    assert min_cacheable_tokens("claude-sonnet-4-5-20250929") == 1024
    assert min_cacheable_tokens("claude-haiku-4-5-20251001") == 4096
    assert min_cacheable_tokens("claude-unknown") is None
