"""Properties of the pure compaction functions, over random valid histories and random policies.

A history here is what the loop holds before a model call: user and assistant messages taking
turns, parallel tool calls with unique ids answered by tool_results at the start of the next user
message (some of them errors, some from `compact` or from excluded tools, of every length around
`min_chars`, as strings or text blocks, some already the placeholder), and plain requests and
answers in between. Every generated history passes `validate_messages` to begin with.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fake_api import validate_messages, validate_request

from evo_magic.compact.base import Context
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import (
    COMPACTED_HEADER,
    FILES_HEADER,
    FOCUS_PREFIX,
    REQUEST_HEADER,
    compacted_message,
)
from evo_magic.measure import TokenAnchor, measure, message_chars, to_json
from evo_magic.strategies import MicroCompact
from evo_magic.strategies.blocks import result_text
from evo_magic.strategies.micro import PLACEHOLDER
from evo_magic.summariser import Summariser, conversation_text


@dataclass
class MicroResult:
    cleared_ids: list[str]
    chars_freed: int


def micro_compact(messages: list[dict[str, Any]], strategy: MicroCompact) -> MicroResult:
    """The MicroCompact strategy's result applied in place (as the session applies it to its
    history)."""
    before = message_chars(messages)
    result = strategy.compact(messages, Context.for_messages(messages, trigger="every_call"))
    if result is None:
        return MicroResult([], 0)
    new = list(result)
    cleared = [
        b["tool_use_id"]
        for old, message in zip(messages, new, strict=True)
        if message is not old
        for a, b in zip(old["content"], message["content"], strict=True)
        if a is not b
    ]
    messages[:] = new
    return MicroResult(cleared, before - message_chars(messages))


def latest_batch_index(messages: list[dict[str, Any]]) -> int | None:
    """Index of the last user message that holds tool results (the batch not yet seen)."""
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index]["content"]
        if messages[index]["role"] == "user" and any(
            b.get("type") == "tool_result" for b in content
        ):
            return index
    return None


def summary_request(messages: list[dict[str, Any]], policy: CompactPolicy, focus: str | None):
    summariser = Summariser(
        input_limit=policy.summary_input_limit, max_tokens=policy.summary_max_tokens
    )
    return summariser.request(messages, focus)


TOOL_NAMES = ("bash", "read_file", "write_file", "edit_file", "compact", "search_docs")
# Characters that JSON escapes (or that are not ASCII), so sizes are not just string lengths.
ALPHABET = 'ab z09"\\\n\té€😀\u2028'


def examples(count: int) -> settings:
    """Settings for a property: `count` examples (the file runs in a few seconds), no deadline."""
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- strategies ------------------------------------------------------------------------------


def nonblank(max_size: int = 40) -> st.SearchStrategy[str]:
    """Text the API accepts in a text block: never empty, never only whitespace."""
    return st.builds(lambda s: "t" + s, st.text(ALPHABET, max_size=max_size))


# Built once: a strategy made inside the composite would be validated again on every draw.
TEXTS = nonblank()
FOCUSES = nonblank(20)
TOOLS = st.sampled_from(TOOL_NAMES)
ROUNDS = st.integers(0, 12)
CALLS = st.integers(0, 4)
ONE_IN_FIVE = st.integers(0, 4).map(lambda n: n == 0)
ONE_IN_SIX = st.integers(0, 5).map(lambda n: n == 0)


# Result text of any length from empty to a few thousand characters, clustered around the
# interesting sizes (the placeholder, the default min_chars) by repeating a short unit.
result_strings = st.one_of(
    st.text(ALPHABET, max_size=10),
    st.builds(
        lambda unit, n: unit * n, st.text(ALPHABET, min_size=1, max_size=6), st.integers(0, 700)
    ),
    st.just(PLACEHOLDER),
)
result_contents = st.one_of(
    result_strings,
    st.lists(
        st.builds(lambda s: {"type": "text", "text": "t" + s}, result_strings),
        min_size=1,
        max_size=3,
    ),
)


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A valid history ending in a user message (or, sometimes, in an answer)."""
    next_id = iter(range(10**6))
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": draw(TEXTS)}]}
    ]
    for _ in range(draw(ROUNDS)):
        calls = draw(CALLS)
        blocks: list[dict[str, Any]] = []
        if calls == 0 or draw(st.booleans()):
            blocks.append({"type": "text", "text": draw(TEXTS)})
        uses = []
        for _ in range(calls):
            name = draw(TOOLS)
            tool_input = {"focus": draw(FOCUSES)} if name == "compact" else {"arg": "x"}
            uses.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(next_id):05d}",
                    "name": name,
                    "input": tool_input,
                }
            )
        messages.append({"role": "assistant", "content": blocks + uses})
        if not uses:  # an answer, then the user's next request
            messages.append({"role": "user", "content": [{"type": "text", "text": draw(TEXTS)}]})
            continue
        order = draw(st.permutations(uses))
        results = []
        for use in order:
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": use["id"],
                "content": draw(result_contents),
            }
            if draw(ONE_IN_FIVE):
                result["is_error"] = True
            results.append(result)
        # After an interrupted or failed turn the user's next words follow the results.
        extra = [{"type": "text", "text": draw(TEXTS)}] if draw(ONE_IN_SIX) else []
        messages.append({"role": "user", "content": results + extra})
    if draw(ONE_IN_SIX):
        messages.append({"role": "assistant", "content": [{"type": "text", "text": draw(TEXTS)}]})
    assert validate_messages(messages) is None
    return messages


policies = st.builds(
    MicroCompact,
    keep_recent=st.integers(0, 5),
    min_chars=st.one_of(st.sampled_from([0, 10, 73, 74, 75, 120]), st.integers(0, 600)),
    placeholder=st.sampled_from([PLACEHOLDER, "[cleared]", "[" + "long placeholder " * 20 + "]"]),
    exclude_tools=st.frozensets(st.sampled_from(TOOL_NAMES), max_size=3),
    clear_at_least=st.one_of(st.just(0), st.integers(0, 6_000)),
)

# -- helpers ---------------------------------------------------------------------------------


def results_in_order(messages: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(message index, tool_result block) for every result, oldest first."""
    return [
        (index, block)
        for index, message in enumerate(messages)
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def tool_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {
        block["id"]: block["name"]
        for message in messages
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] == "tool_use"
    }


def saving(block: dict[str, Any], policy: MicroCompact) -> int:
    """Characters the placeholder would save in place of this result's content."""
    return len(to_json(block.get("content", ""))) - len(to_json(policy.placeholder))


def full_older_results(
    messages: list[dict[str, Any]], policy: MicroCompact
) -> list[tuple[int, dict[str, Any]]]:
    """(position among all results, block) of every *full older result*: a tool_result outside
    the latest batch, from a tool not in `exclude_tools`, that is not the placeholder, whose text
    is longer than `min_chars`, and that the placeholder would make shorter. These are the results
    micro-compaction may replace; it keeps the ones among the `keep_recent` most recent results
    (all results counted, the latest batch's included, as in the seed)."""
    latest = latest_batch_index(messages)
    names = tool_names(messages)
    return [
        (position, block)
        for position, (index, block) in enumerate(results_in_order(messages))
        if index != latest
        and names[block["tool_use_id"]] not in policy.exclude_tools
        and block.get("content") != policy.placeholder
        and len(result_text(block)) > policy.min_chars
        and saving(block, policy) > 0
    ]


def shape(messages: list[dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    """Roles, block types, ids and error flags: everything micro-compaction must not change."""
    return [
        [(message["role"],)]
        + [
            (block["type"], block.get("id"), block.get("tool_use_id"), block.get("is_error"))
            for block in message["content"]
        ]
        for message in messages
    ]


# -- layer 1 ---------------------------------------------------------------------------------


@pytest.mark.slow
@examples(200)
@given(histories(), policies)
def test_micro_compact_properties(messages: list[dict[str, Any]], policy: MicroCompact) -> None:
    original = copy.deepcopy(messages)
    chars_before = message_chars(messages)
    latest = latest_batch_index(messages)

    result = micro_compact(messages, policy)

    # The API still accepts it; roles, ids, types and error flags are as they were.
    assert validate_messages(messages) is None
    assert shape(messages) == shape(original)
    # The batch the model has not seen yet is byte-identical.
    if latest is not None:
        assert to_json(messages[latest]) == to_json(original[latest])
    # Exactly the reported results changed, each to the placeholder and nothing else about it.
    cleared = set(result.cleared_ids)
    assert len(cleared) == len(result.cleared_ids)
    for (_, old), (_, new) in zip(
        results_in_order(original), results_in_order(messages), strict=True
    ):
        if old["tool_use_id"] in cleared:
            assert new == {**old, "content": policy.placeholder}
            assert old["content"] != policy.placeholder
        else:
            assert new == old
    for old_message, new_message in zip(original, messages, strict=True):
        for old, new in zip(old_message["content"], new_message["content"], strict=True):
            if old["type"] != "tool_result":
                assert to_json(new) == to_json(old)
    # Results of excluded tools are never cleared.
    names = tool_names(original)
    assert not any(names[tool_id] in policy.exclude_tools for tool_id in cleared)
    # The reported saving is the exact drop of the seed's measure; the cached measure agrees.
    assert result.chars_freed == chars_before - message_chars(messages)
    assert measure(messages, None).chars == message_chars(messages)
    # clear_at_least: all or nothing.
    if result.cleared_ids:
        assert result.chars_freed >= max(policy.clear_at_least, 1)
    else:
        assert result.chars_freed == 0
        assert to_json(messages) == to_json(original)

    # At most keep_recent full older results remain, all among the keep_recent most recent
    # results; unless clear_at_least held the pass back, when what it would free is too little.
    total = len(results_in_order(messages))
    remaining = full_older_results(messages, policy)
    candidates = [
        (p, b) for p, b in full_older_results(original, policy) if p < total - policy.keep_recent
    ]
    if result.cleared_ids or policy.clear_at_least == 0:
        assert len(remaining) <= policy.keep_recent
        assert all(position >= total - policy.keep_recent for position, _ in remaining)
        assert result.cleared_ids == [block["tool_use_id"] for _, block in candidates]
    else:
        assert sum(saving(block, policy) for _, block in candidates) < policy.clear_at_least

    # Idempotent: a second pass clears nothing and changes nothing.
    compacted = to_json(messages)
    again = micro_compact(messages, policy)
    assert again.cleared_ids == [] and again.chars_freed == 0
    assert to_json(messages) == compacted


@pytest.mark.slow
@examples(100)
@given(histories(), policies)
def test_micro_compact_in_a_loop_only_ever_clears(
    messages: list[dict[str, Any]], policy: MicroCompact
) -> None:
    """Replay the history as the loop builds it, a pass before every model call: a pass only
    turns full results into the placeholder (the rest of the prefix stays byte-stable), and with
    clear_at_least 0 the passes end where one pass over the whole history ends."""
    live: list[dict[str, Any]] = []
    for message in copy.deepcopy(messages):
        live.append(message)
        if message["role"] != "user":
            continue
        before = copy.deepcopy(live)
        result = micro_compact(live, policy)
        assert validate_messages(live) is None
        for (_, old), (_, new) in zip(
            results_in_order(before), results_in_order(live), strict=True
        ):
            if new != old:
                assert new["content"] == policy.placeholder
                assert old["content"] != policy.placeholder
                assert new["tool_use_id"] in result.cleared_ids
        for old_message, new_message in zip(before, live, strict=True):
            for old, new in zip(old_message["content"], new_message["content"], strict=True):
                if old["type"] != "tool_result":
                    assert new == old
    if policy.clear_at_least == 0:
        once = copy.deepcopy(messages)
        micro_compact(once, policy)
        assert to_json(live) == to_json(once)


# -- measurement -----------------------------------------------------------------------------


@examples(60)
@given(histories(), st.integers(0, 100_000))
def test_measure_is_the_seeds_measure_with_anchored_tokens(
    messages: list[dict[str, Any]], tokens: int
) -> None:
    size = measure(messages, None)
    assert size.chars == message_chars(messages) == len(to_json(messages))
    assert size.messages == len(messages)
    assert not size.tokens_exact
    anchored = measure(messages, TokenAnchor(size.chars, tokens))
    assert anchored.tokens == tokens and anchored.tokens_exact
    # Anything appended since the anchored call is estimated on top of the exact count.
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "more " * 50}]})
    grown = measure(messages, TokenAnchor(size.chars, tokens))
    assert grown.chars == message_chars(messages)
    assert grown.tokens > tokens and not grown.tokens_exact


# -- layer 2: the pure parts -----------------------------------------------------------------

OMITTED = "\n[... {n} characters from the middle of the conversation omitted ...]\n"
OMITTED_MARKER = re.compile(
    r"\n\[\.\.\. (\d+) characters from the middle of the conversation omitted \.\.\.\]\n"
)


@pytest.mark.slow
@examples(150)
@given(histories(), st.data())
def test_conversation_text_keeps_head_and_tail_within_the_limit(
    messages: list[dict[str, Any]], data: st.DataObject
) -> None:
    full = "\n".join(to_json(message) for message in messages)
    limit = data.draw(st.one_of(st.integers(0, 200), st.integers(0, len(full) + 50)))
    text = conversation_text(messages, limit)
    assert len(text) <= limit or text == full
    if len(full) <= limit:
        assert text == full
        return
    marker = OMITTED_MARKER.search(text)
    if marker:
        head, tail = text[: marker.start()], text[marker.end() :]
        assert int(marker.group(1)) == len(full) - len(head) - len(tail)
        # The marker is left out only when it does not fit; when it fits the budget is used.
        assert len(text) >= limit - len(str(len(full)))
    else:
        assert limit < len(OMITTED.format(n=len(full))) + 2
        assert len(text) == limit
        # The ends alone: find where the head stops (the text is at most ~80 characters).
        splits = [
            cut
            for cut in range(len(text) + 1)
            if full.startswith(text[:cut]) and full.endswith(text[cut:])
        ]
        assert splits
        cut = min((c for c in splits if c >= 1), default=0)
        head, tail = text[:cut], text[cut:]
    assert full.startswith(head) and full.endswith(tail)
    assert len(head) + len(tail) < len(full)
    if limit >= 2:
        assert head and tail
    # The newest turns get the larger share.
    assert len(tail) >= len(head)


@examples(60)
@given(
    histories(),
    st.one_of(st.none(), nonblank(60)),
    st.integers(1, 4_000),
)
def test_summary_request_is_one_valid_toolless_call(
    messages: list[dict[str, Any]], focus: str | None, max_tokens: int
) -> None:
    policy = CompactPolicy(summary_max_tokens=max_tokens, summary_input_limit=3_000)
    request = summary_request(messages, policy, focus)
    assert request.tools == [] and request.max_tokens == max_tokens
    body = {"model": "m", "max_tokens": request.max_tokens, "messages": request.messages}
    assert validate_request(body) is None
    prompt = request.messages[0]["content"][0]["text"]
    if focus:
        assert focus in prompt
    assert conversation_text(messages, policy.summary_input_limit) in prompt


paths = st.builds(
    lambda parts: "/".join(parts) + ".py",
    st.lists(st.text("abcxyz_-é", min_size=1, max_size=8), min_size=1, max_size=3),
)


@examples(150)
@given(
    nonblank(300),
    st.one_of(st.none(), st.text(ALPHABET, max_size=60)),
    st.lists(paths, max_size=5, unique=True),
    st.one_of(st.none(), st.text(ALPHABET, max_size=300)),
)
def test_compacted_message_is_valid_and_carries_everything(
    summary: str, focus: str | None, files: list[str], pending: str | None
) -> None:
    message = compacted_message(summary, focus, files, pending)
    assert validate_messages([message]) is None
    assert message["role"] == "user" and len(message["content"]) == 1
    text = message["content"][0]["text"]
    assert text.startswith(COMPACTED_HEADER)
    assert summary in text
    assert (FOCUS_PREFIX + focus in text) if focus else FOCUS_PREFIX not in text
    if files:
        listing = "\n".join([FILES_HEADER, *(f"- {path}" for path in files)])
        assert listing in text
    else:
        assert FILES_HEADER not in text
    if pending is not None and pending.strip():
        assert text.endswith(f"{REQUEST_HEADER}\n{pending}")  # verbatim, last
    else:
        assert REQUEST_HEADER not in text
    # The next request merges into it and the history stays one the API accepts.
    follow_up = {"role": "user", "content": message["content"] + [{"type": "text", "text": "go"}]}
    assert validate_messages([follow_up]) is None
