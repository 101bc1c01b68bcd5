"""Prompt caching and cost in the agent loop, through the real SDK and the loopback fake.

The fake validates every request's breakpoints as the real API does and emulates the prompt
cache (tests/support/fake_api, independent of evo_magic's own cache model), so these tests see the
usage a real server would report for what the session sent.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.fake_api import FakeAnthropic, reply, text, tool_use, unmarked

from evo_magic import render
from evo_magic.compact.base import Context
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import DEFAULT_PRICES, Ledger, Price, PriceTable, call_cost
from evo_magic.events import (
    AskFinished,
    CompactionFinished,
    ContextSize,
    MicroCompacted,
    ModelResponded,
    Notice,
)
from evo_magic.measure import to_json
from evo_magic.models import AnthropicModel, FunctionModel, ModelRequest
from evo_magic.prompt_cache import CachedPrefix, CacheSettings, PrefixTracker, place_breakpoints
from evo_magic.session import Session
from evo_magic.strategies import (
    ClearToolUses,
    LargeOutputs,
    MicroCompact,
    ObservationMasking,
    Summarise,
)
from evo_magic.strategies.micro import PLACEHOLDER
from evo_magic.summariser import AgentPrompt, Summariser
from evo_magic.usage import Usage

MODEL = "claude-sonnet-5-5"
M = 1_000_000


def write_docs(workspace: Path, count: int, lines: int = 40) -> None:
    """doc_1.txt ... doc_N.txt, each different, about 60 characters a line."""
    for n in range(1, count + 1):
        rows = [
            f"doc {n} line {i}: the batch limit is checked before items move" for i in range(lines)
        ]
        (workspace / f"doc_{n}.txt").write_text("\n".join(rows) + "\n")


def reading(count: int) -> list[Any]:
    """A script that reads doc_1 ... doc_N, one per call, then answers."""
    steps = [
        reply(
            text(f"Reading doc {n}."),
            tool_use("read_file", {"path": f"doc_{n}.txt"}, id=f"toolu_r{n}"),
        )
        for n in range(1, count + 1)
    ]
    return [*steps, reply(text("All read."))]


def writing(count: int) -> list[Any]:
    """A steady script: short notes written one per call (results too short to clear)."""
    steps = [
        reply(
            text(f"Writing note {n}: the limit is checked in step {n} before any item moves."),
            tool_use(
                "write_file", {"path": f"notes/{n}.md", "content": f"note {n}\n"}, id=f"toolu_w{n}"
            ),
        )
        for n in range(1, count + 1)
    ]
    return [*steps, reply(text("Notes written."))]


def run(session: Session, task: str = "Go through the documents.") -> list[Any]:
    """The events of one ask."""
    events: list[Any] = []
    unsubscribe = session.subscribe(events.append)
    try:
        session.ask(task)
    finally:
        unsubscribe()
    return events


def of(kind: type, events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def markers(body: dict) -> list[tuple[str, dict]]:
    """Where a request's cache_control markers are, in prompt order."""
    found = [
        (f"tools.{i}", t["cache_control"])
        for i, t in enumerate(body.get("tools", []))
        if "cache_control" in t
    ]
    system = body.get("system")
    if isinstance(system, list):
        found += [
            (f"system.{i}", b["cache_control"])
            for i, b in enumerate(system)
            if "cache_control" in b
        ]
    for i, message in enumerate(body["messages"]):
        if isinstance(message["content"], list):
            found += [
                (f"messages.{i}.{j}", b["cache_control"])
                for j, b in enumerate(message["content"])
                if "cache_control" in b
            ]
    return found


def priced(usage: Usage, price: Price) -> float:
    """The price table applied to a usage by hand: each kind of token at its rate."""
    write_5m, write_1h = usage.cache_writes()
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_input_tokens * price.cache_read
        + write_5m * price.cache_write_5m
        + write_1h * price.cache_write_1h
    ) / M


# -- requests ---------------------------------------------------------------------------------


def test_requests_carry_breakpoints_the_api_accepts(fake: FakeAnthropic, claude, workspace: Path):
    write_docs(workspace, 5)
    fake.queue(*reading(5))
    run(Session(workspace, model=claude))
    agent_calls = [body for body in fake.accepted if body.get("tools")]
    assert len(agent_calls) == 6
    for body in agent_calls:
        spots = markers(body)
        assert 3 <= len(spots) <= 4
        assert all(control == {"type": "ephemeral"} for _, control in spots)
        # The tools and the system prompt, then the newest message's last block.
        assert spots[0][0] == f"tools.{len(body['tools']) - 1}"
        assert spots[1][0] == f"system.{len(body['system']) - 1}"
        last = len(body["messages"]) - 1
        assert spots[-1][0] == f"messages.{last}.{len(body['messages'][last]['content']) - 1}"
    # The fake's teardown asserts that it rejected nothing.


def test_the_one_hour_ttl_is_sent_and_billed_at_its_rate(
    fake: FakeAnthropic, claude, workspace: Path
):
    fake.queue(*writing(3))
    session = Session(workspace, model=claude, cache=CacheSettings(ttl="1h"))
    events = run(session)
    bodies = [body for body in fake.accepted if body.get("tools")]
    assert all(
        control == {"type": "ephemeral", "ttl": "1h"} for b in bodies for _, control in markers(b)
    )
    price = DEFAULT_PRICES.lookup(MODEL)
    assert price is not None
    for event in of(ModelResponded, events):
        assert event.usage.cache_creation_input_tokens > 0
        assert event.usage.cache_writes() == (0, event.usage.cache_creation_input_tokens)
        assert event.cost_usd == pytest.approx(priced(event.usage, price))


def test_caching_off_sends_no_breakpoint_and_reads_nothing(
    fake: FakeAnthropic, claude, workspace: Path
):
    fake.queue(*writing(3))
    events = run(Session(workspace, model=claude, cache=CacheSettings(enabled=False)))
    assert not any(markers(body) for body in fake.accepted)
    assert all(
        e.usage.cache_read_input_tokens == e.usage.cache_creation_input_tokens == 0
        for e in of(ModelResponded, events)
    )


def test_caching_can_be_turned_off_between_asks_and_the_change_is_recorded(
    fake: FakeAnthropic, claude, workspace: Path
):
    session = Session(workspace, model=claude)
    fake.queue(reply(text("One.")), reply(text("Two.")))
    session.ask("First.")
    session.configure(cache=CacheSettings(enabled=False))
    session.ask("Second.")
    first, second = fake.accepted
    assert markers(first) and not markers(second)
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    start = next(r for r in records if r["kind"] == "session_start")
    assert start["cache"] == {"enabled": True, "ttl": "5m", "static_ttl": None}
    assert [r["cache"]["enabled"] for r in records if r["kind"] == "cache"] == [False]
    with pytest.raises(TypeError, match="CacheSettings"):
        session.configure(cache={"enabled": True})  # type: ignore[assignment]


def test_summaries_carry_no_breakpoint(fake: FakeAnthropic, claude, workspace: Path):
    write_docs(workspace, 4)
    fake.queue(*reading(4))
    fake.responder = lambda body: reply(text("Summary: four documents about the batch limit."))
    session = Session(workspace, model=claude, policy=CompactPolicy(context_limit=6_000))
    events = run(session)
    assert of(CompactionFinished, events)
    summaries = [body for body in fake.accepted if not body.get("tools")]
    assert summaries and not any(markers(body) for body in summaries)


# -- what the cache does ----------------------------------------------------------------------


def test_a_steady_conversation_reads_most_of_its_prefix_from_cache(
    fake: FakeAnthropic, claude, workspace: Path
):
    fake.queue(*writing(8))
    events = run(Session(workspace, model=claude))
    calls = of(ModelResponded, events)
    assert len(calls) == 9
    first = calls[0].usage
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 0
    for event in calls[1:]:
        usage = event.usage
        # Everything the previous call sent is read; only the newest turn is written.
        assert (
            usage.cache_read_input_tokens
            >= calls[calls.index(event) - 1].usage.cache_read_input_tokens
        )
        assert usage.cache_hit_rate > 0.75
        assert usage.cache_creation_input_tokens < 0.2 * usage.context_tokens
    whole = sum((e.usage for e in calls), Usage())
    assert whole.cache_hit_rate > 0.75


def test_a_micro_compaction_shows_up_as_a_cache_write(workspace: Path):
    """The call after a clearing writes again what the clearing invalidated; the same session
    without micro-compaction reads it."""
    write_docs(workspace, 6)

    def calls_of(strategies: list[Any]) -> tuple[list[Any], list[Any]]:
        with FakeAnthropic() as server:
            server.queue(*reading(6))
            model = AnthropicModel(MODEL, client=server.client())
            events = run(Session(workspace, model=model, strategies=strategies))
            server.assert_no_rejections()
        return of(ModelResponded, events), events

    steady, _ = calls_of([])
    compacted, events = calls_of([MicroCompact(keep_recent=2, cache_aware=False)])
    clearings = of(MicroCompacted, events)
    assert clearings
    for clearing in clearings:
        assert clearing.cache_invalidated_tokens > clearing.cleared_tokens > 0
        after = next(e for e in events[events.index(clearing) :] if isinstance(e, ModelResponded))
        call = after.call - 1
        extra_write = (
            after.usage.cache_creation_input_tokens - steady[call].usage.cache_creation_input_tokens
        )
        # The invalidated tail, less the freed tokens (gone), is written again.
        rewritten = clearing.cache_invalidated_tokens - clearing.cleared_tokens
        assert extra_write >= 0.8 * rewritten
        assert after.usage.cache_read_input_tokens < steady[call].usage.cache_read_input_tokens


def test_default_micro_compaction_waits_for_a_clearing_that_pays_and_without_cache_is_eager(
    workspace: Path,
):
    """Cache-aware micro-compaction is the default: with caching on it clears less often than
    the seed's eager clearing and the session costs less; with caching off it sends exactly the
    requests of the seed's pipeline."""
    write_docs(workspace, 12, lines=25)

    def session(strategies: Any, cache: CacheSettings) -> tuple[list[Any], list[Any], float]:
        with FakeAnthropic() as server:
            server.queue(*reading(12))
            model = AnthropicModel(MODEL, client=server.client())
            with Session(workspace, model=model, strategies=strategies, cache=cache) as s:
                events = run(s)
                cost = s.cost_usd
            server.assert_no_rejections()
            sent = [unmarked(body["messages"]) for body in server.accepted if body.get("tools")]
        assert cost is not None
        return of(MicroCompacted, events), sent, cost

    seed = [LargeOutputs(), MicroCompact(cache_aware=False), Summarise()]
    default, _, default_cost = session(None, CacheSettings())
    eager, eager_sent, eager_cost = session(seed, CacheSettings())
    assert len(eager) >= 6 and len(default) < len(eager) / 2
    assert default_cost < eager_cost
    uncached, uncached_sent, _ = session(None, CacheSettings(enabled=False))
    assert uncached_sent == eager_sent and len(uncached) == len(eager)


@pytest.mark.slow
def test_cache_aware_masking_waits_for_a_masking_that_pays(workspace: Path):
    """Observation masking before every call rewrites the cached tail each time one more
    result leaves the window; cache-aware, it waits until masking pays for the cache write:
    it masks less often and the session costs less than with eager masking, and less than
    with no masking at all (60 calls under a limit they never reach: over it, masking acts at
    once)."""
    write_docs(workspace, 60, lines=40)
    roomy = CompactPolicy(context_limit=10**6)

    def session(strategies: list[Any]) -> tuple[list[Any], float]:
        with FakeAnthropic() as server:
            server.queue(*reading(60))
            model = AnthropicModel(MODEL, client=server.client())
            with Session(
                workspace, model=model, strategies=strategies, policy=roomy, max_turns=61
            ) as s:
                events = run(s)
                cost = s.cost_usd
            server.assert_no_rejections()
        assert cost is not None
        return of(MicroCompacted, events), cost

    eager, eager_cost = session([ObservationMasking(3)])
    aware, aware_cost = session([ObservationMasking(3, cache_aware=True)])
    _, none_cost = session([])
    assert len(eager) >= 10 and 0 < len(aware) < len(eager) / 2
    assert aware_cost < eager_cost and aware_cost < none_cost


def test_a_clearing_reports_the_tokens_it_takes_out_of_the_prompt(workspace: Path):
    """`cleared_tokens` (and the size after it) follow the model's own tokenizer: the rate of
    the messages is fitted on the session's exact counts, the tools and system prompt apart.
    This model counts three characters a token, plus 2,000 for what is not messages."""
    write_docs(workspace, 8)
    script = iter(reading(8))

    def model(request: ModelRequest) -> dict[str, Any]:
        answer = next(script)  # a fake's Reply: its blocks and stop reason
        tokens = 2_000 + len(to_json(list(request.messages))) // 3
        usage = {"input_tokens": tokens, "output_tokens": 20}
        return {"content": answer.content, "stop_reason": answer.stop_reason, "usage": usage}

    eager = MicroCompact(keep_recent=2, cache_aware=False)
    events = run(Session(workspace, model=FunctionModel(model), strategies=[eager]))
    clearings = of(MicroCompacted, events)
    assert len(clearings) >= 4
    for clearing in clearings[1:]:  # from the second, the session has counts to fit on
        assert clearing.cleared_tokens == pytest.approx(clearing.chars_freed / 3, rel=0.02)
        assert clearing.before.tokens - clearing.after.tokens == clearing.cleared_tokens


def test_after_a_clearing_the_next_request_marks_the_edited_message(
    fake: FakeAnthropic, claude, workspace: Path
):
    """So that the next clearing, further on, reads the conversation back to this one."""
    write_docs(workspace, 7)
    fake.queue(*reading(7))
    eager = MicroCompact(keep_recent=2, cache_aware=False)
    events = run(Session(workspace, model=claude, strategies=[eager]))
    bodies = [body for body in fake.accepted if body.get("tools")]
    clearings = of(MicroCompacted, events)
    assert len(clearings) >= 3
    responses = of(ModelResponded, events)
    for clearing in clearings:
        after = next(e for e in events[events.index(clearing) :] if isinstance(e, ModelResponded))
        edited = min(edit.index for edit in clearing.edits)
        body = bodies[after.call - 1]
        assert any(spot.startswith(f"messages.{edited}.") for spot, _ in markers(body))
    # From the second clearing on, the call after it reads past the tools and system prompt.
    static = responses[0].usage.cache_creation_input_tokens
    for clearing in clearings[1:]:
        after = next(e for e in events[events.index(clearing) :] if isinstance(e, ModelResponded))
        assert after.usage.cache_read_input_tokens > static


# -- accounting -------------------------------------------------------------------------------


def test_the_recorded_cost_equals_the_price_table_applied_to_the_usage(
    fake: FakeAnthropic, claude, workspace: Path
):
    write_docs(workspace, 4)
    fake.queue(*reading(4))
    fake.responder = lambda body: reply(text("Summary: four documents about the batch limit."))
    session = Session(workspace, model=claude, policy=CompactPolicy(context_limit=6_000))
    events = run(session)
    price = DEFAULT_PRICES.lookup(MODEL)
    assert price is not None
    calls = of(ModelResponded, events)
    for event in calls:
        assert event.cost_usd == pytest.approx(priced(event.usage, price))
    compactions = [e for e in of(CompactionFinished, events) if e.success]
    assert compactions
    for compaction in compactions:
        assert compaction.summary_usage.output_tokens > 0
        assert compaction.summary_cost_usd == pytest.approx(priced(compaction.summary_usage, price))
    finished = of(AskFinished, events)[-1]
    calls_total = sum(e.cost_usd for e in calls)
    summaries_total = sum(e.summary_cost_usd for e in compactions)
    assert finished.cost_usd == pytest.approx(calls_total)
    assert finished.summary_cost_usd == pytest.approx(summaries_total)
    assert (
        session.cost_usd
        == finished.session_cost_usd
        == pytest.approx(calls_total + summaries_total)
    )
    assert calls[-1].session_cost_usd == pytest.approx(calls_total + summaries_total)
    # The transcript holds the same figures.
    records = [json.loads(line) for line in session.transcript_path.read_text().splitlines()]
    responses = [r for r in records if r["kind"] == "model_response"]
    assert [r["cost_usd"] for r in responses] == [e.cost_usd for e in calls]
    assert all("cache_creation" in r["usage"] for r in responses)
    recorded = [r for r in records if r["kind"] == "compaction" and r["success"]]
    assert [r["summary_cost_usd"] for r in recorded] == [e.summary_cost_usd for e in compactions]


def test_prices_can_be_overridden(fake: FakeAnthropic, claude, workspace: Path):
    rates = {"input": 100, "output": 1_000, "cache_read": 1, "cache_write_5m": 200}
    session = Session(workspace, model=claude, prices={MODEL: rates})
    fake.queue(reply(text("Hello.")))
    events = run(session)
    event = of(ModelResponded, events)[0]
    price = session.prices.lookup(MODEL)
    assert (
        price is not None
        and price.input == 100
        and price.cache_write_1h == DEFAULT_PRICES.lookup(MODEL).cache_write_1h
    )
    assert event.cost_usd == pytest.approx(priced(event.usage, price))
    assert event.cost_usd > 10 * call_cost(event.usage, MODEL).total
    table = PriceTable({MODEL: Price.standard(1, 2)}, as_of="2026-01-01", source="test")
    session.configure(prices=table)
    assert session.prices is table
    with pytest.raises(ValueError, match="unknown field"):
        Session(workspace, model=claude, prices={MODEL: {"cache_reads": 1}})
    with pytest.raises(ValueError, match="PriceTable or a mapping"):
        Session(workspace, model=claude, prices=[("m", 1)])  # type: ignore[arg-type]


def test_an_unknown_model_costs_NA_and_is_said_once(fake: FakeAnthropic, workspace: Path):
    model = AnthropicModel("claude-unknown-9", client=fake.client())
    fake.queue(*writing(2), reply(text("Again.")))
    session = Session(workspace, model=model)
    events = run(session)
    events += run(session, "Once more.")
    assert [e.cost_usd for e in of(ModelResponded, events)] == [None] * 4
    assert [e.cost_usd for e in of(AskFinished, events)] == [None, None]
    notices = [e for e in of(Notice, events) if e.code == "unpriced_model"]
    assert len(notices) == 1 and "claude-unknown-9" in notices[0].message
    assert session.cost_usd is None
    assert session.spending.unpriced_calls == 4
    # With a price given, the next calls are costed.
    session.configure(prices={"claude-unknown-9": {"input": 1, "output": 2}})
    fake.queue(reply(text("Priced now.")))
    priced_events = run(session, "And now?")
    assert of(AskFinished, priced_events)[0].cost_usd > 0


# -- the pieces -------------------------------------------------------------------------------

SONNET = DEFAULT_PRICES.lookup(MODEL)
OUTPUT = "x" * 2_000  # a tool output worth clearing


def agent_history(outputs: list[str]) -> list[dict[str, Any]]:
    """A request, then one tool call and its result per output."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Look around."}]}
    ]
    for n, output in enumerate(outputs, 1):
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "bash", "input": {"command": "ls"}}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "Next."}, call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}
        messages.append({"role": "user", "content": [result]})
    return messages


def chars(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def cached(messages: list[dict[str, Any]], *, age: float = 10.0, tokens: int = 0) -> CachedPrefix:
    """The cache after a call that sent ``messages``: all of them cached, a minute old at most."""
    return CachedPrefix(tokens or chars(messages) // 4 + 900, len(messages), age, "5m", SONNET)


def context(messages: list[dict[str, Any]], prefix: CachedPrefix | None, **limits: Any) -> Context:
    """The context of a pass before a model call (the every-call trigger)."""
    return Context.for_messages(messages, cached_prefix=prefix, trigger="every_call", **limits)


OPTIONS: dict[type, dict[str, Any]] = {
    MicroCompact: {},
    ClearToolUses: {"trigger_tool_uses": 2},
    ObservationMasking: {"keep_turns": 3},
}


@pytest.mark.parametrize("strategy", [MicroCompact, ClearToolUses, ObservationMasking])
def test_cache_aware_clearing_waits_while_the_cache_write_costs_more(strategy: type):
    # Two results due, five outputs after them in the cached prefix: not worth rewriting.
    messages = agent_history([OUTPUT] * 5)
    options = OPTIONS[strategy]
    eager = strategy(cache_aware=False, **options)
    seed = eager.compact(messages, context(messages, cached(messages)))
    assert seed is not None  # the seed's behaviour clears whatever is due
    aware = strategy(cache_aware=True, **options)
    assert aware.compact(messages, context(messages, cached(messages))) is None
    # Asked for (%compact --strategy, the model's compact tool), it clears what is due.
    asked = replace(context(messages, cached(messages)), trigger="user")
    assert list(aware.compact(messages, asked) or []) == list(seed)
    # The same clearing pays with enough calls ahead to read the freed tokens in...
    far = strategy(cache_aware=True, calls_ahead=100, **options)
    assert far.compact(messages, context(messages, cached(messages))) is not None
    # ...when the cache has gone cold (nothing left to lose)...
    cold = cached(messages, age=301.0)
    assert aware.compact(messages, context(messages, cold)) is not None
    # ...when the history is over the limit (a full compaction would break everything)...
    over = context(messages, cached(messages), context_limit=5_000)
    assert over.over_limit and aware.compact(messages, over) is not None
    # ...but not when it cannot bring the history under the limit and a full compaction,
    # which replaces the history anyway, follows (its summary then reads the history whole)...
    far_over = context(messages, cached(messages), context_limit=2_000)
    assert chars(list(seed)) > 2_000  # what clearing leaves is still over that limit
    assert aware.compact(messages, replace(far_over, compaction_due=True)) is None
    assert aware.compact(messages, far_over) is not None  # none follows (paused, backing off)
    # ...and without a cached prefix (caching off), or for a model that costs nothing, it
    # behaves as the seed.
    plain = aware.compact(messages, context(messages, None))
    assert plain is not None and list(plain) == list(seed)
    free = replace(cached(messages), price=DEFAULT_PRICES.lookup("offline"))
    assert list(aware.compact(messages, context(messages, free)) or []) == list(seed)


@pytest.mark.parametrize(
    "strategy", [MicroCompact(cache_aware=True), ObservationMasking(3, cache_aware=True)]
)
def test_results_due_pile_up_until_clearing_them_together_pays(strategy: Any):
    kept = 3  # MicroCompact's keep_recent, the masking's turns (one result a turn here)
    outputs = [OUTPUT] * 4
    while True:
        messages = agent_history(outputs)
        result = strategy.compact(messages, context(messages, cached(messages)))
        if result is not None:
            break
        outputs.append(OUTPUT)
        assert len(outputs) < 30, "never cleared"
    changed = [i for i, message in enumerate(result) if message is not messages[i]]
    # Every result due then is cleared at once: all but the keep_recent newest.
    assert len(outputs) > 4 and len(changed) == len(outputs) - kept
    freed = sum(chars(messages[i]) - chars(result[i]) for i in changed)
    ctx = context(messages, cached(messages))
    assert ctx.clearing_saving(changed[0], freed, strategy.calls_ahead) > 0
    # One result fewer, the same clearing did not pay.
    fewer = agent_history(outputs[:-1])
    assert strategy.compact(fewer, context(fewer, cached(fewer))) is None


def test_invalidated_tokens_are_those_of_the_cached_messages_from_the_edit_on():
    messages = agent_history([OUTPUT] * 3)
    prefix = cached(messages)
    ctx = context(messages, prefix)
    assert ctx.cached_prefix_end == len(messages) and ctx.cached_prefix_tokens == prefix.tokens
    tail = sum(chars(m) for m in messages[2:])
    assert ctx.cache_invalidated_tokens(2) == round(tail * 0.25)
    assert ctx.cache_invalidated_tokens(len(messages)) == 0  # past the cached prefix
    assert ctx.cache_invalidated_tokens(0) <= prefix.tokens
    assert context(messages, cached(messages, age=400.0)).cache_invalidated_tokens(2) == 0
    assert context(messages, None).cache_invalidated_tokens(2) == 0
    assert context(messages, None).clearing_saving(2, 4_000, 10) is None
    no_price = CachedPrefix(prefix.tokens, prefix.end, 1.0, "5m", None)
    assert context(messages, no_price).clearing_saving(2, 4_000, 10) is None


def test_placement_after_an_edit_marks_the_edited_message():
    messages = agent_history([OUTPUT] * 6)
    last = len(messages) - 1
    plain = place_breakpoints(messages, system="sys").breakpoints
    assert conversation_spots(plain) == [(last - 2, 0), (last, 0)]
    edited = place_breakpoints(messages, system="sys", edited_from=4).breakpoints
    assert conversation_spots(edited) == [(4, 0), (last, 0)]
    # An edit at or after the previous call's end changes nothing (its entry is still valid).
    later = place_breakpoints(messages, system="sys", edited_from=last - 1).breakpoints
    assert later == plain
    assert len(edited) <= 4


def conversation_spots(spots: tuple[Any, ...]) -> list[tuple[int, int | None]]:
    return [(s.index, s.block) for s in spots if s.section == "messages"]


def test_the_tracker_follows_calls_edits_and_replacements():
    now = [100.0]
    tracker = PrefixTracker(clock=lambda: now[0])
    assert tracker.prefix() is None
    usage = Usage(input_tokens=10, cache_read_input_tokens=3_000, cache_creation_input_tokens=1_000)
    tracker.after_call(usage, 9, CacheSettings(), SONNET)
    now[0] += 30
    prefix = tracker.prefix()
    assert prefix is not None
    assert (prefix.tokens, prefix.end, prefix.age, prefix.price) == (4_000, 9, 30.0, SONNET)
    assert prefix.warm
    tracker.edited(6, 1_500)
    assert (tracker.prefix().tokens, tracker.prefix().end, tracker.edited_from) == (2_500, 6, 6)
    tracker.edited(8, 100)  # past the prefix now: nothing more is invalidated
    assert (tracker.prefix().tokens, tracker.edited_from) == (2_500, 6)
    tracker.after_call(usage, 11, CacheSettings(), SONNET)
    assert tracker.edited_from is None and tracker.prefix().end == 11
    tracker.replaced()
    assert tracker.prefix() is None
    tracker.after_call(usage, 11, CacheSettings(enabled=False), SONNET)
    assert tracker.prefix() is None  # caching off: nothing of the history is cached
    tracker.after_call(Usage(input_tokens=400), 3, CacheSettings(), SONNET)
    assert tracker.prefix() is None  # below the minimum cacheable length: nothing cached
    now[0] += 1_000
    tracker.after_call(usage, 5, CacheSettings(ttl="1h"), SONNET)
    now[0] += 600
    assert tracker.prefix().warm  # ten minutes into a one-hour entry


def test_the_ledger_keeps_calls_and_summaries_apart_and_says_an_unknown_model_once():
    ledger = Ledger()
    usage = Usage(input_tokens=1_000, output_tokens=100, cache_read_input_tokens=9_000)
    start = ledger.spent
    cost = ledger.charge(usage, MODEL)
    summary = ledger.charge(usage, MODEL, summary=True)
    assert cost == summary == pytest.approx(priced(usage, SONNET))
    assert ledger.spent.calls_usd == cost and ledger.spent.summaries_usd == summary
    assert ledger.spent.total_usd == pytest.approx(cost + summary)
    assert ledger.charge(usage, "claude-unknown-9") is None
    assert ledger.spent.total_usd is None and ledger.spent.calls_cost_usd is None
    assert ledger.spent.summaries_cost_usd == summary
    spent = ledger.spent - start
    assert (spent.unpriced_calls, spent.calls_usd) == (1, cost)
    first = ledger.unpriced_notice("claude-unknown-9-20261201")
    assert first is not None and "prices" in first
    assert ledger.unpriced_notice("claude-unknown-9") is None  # same family: said once
    assert ledger.unpriced_notice(MODEL) is None  # priced


def test_the_footer_shows_the_cells_cost_the_sessions_and_the_hit_rate():
    usage = Usage(
        input_tokens=100,
        output_tokens=50,
        cache_read_input_tokens=800,
        cache_creation_input_tokens=100,
    )
    size = ContextSize(3, 1_000, 1_000, True)
    event = AskFinished("done", 2, "end_turn", usage, 1.0, size, 0.0123, 0.001, 0.5)
    line = render.footer(event, 1)
    assert "cost $0.0133 this cell (summaries $0.0010), $0.5000 so far" in line
    assert "cache hit rate 80%" in line
    unknown = AskFinished("done", 1, "end_turn", usage, 1.0, size, None, 0.0, None)
    assert "cost — this cell, — so far" in render.footer(unknown, 0)


def test_the_offline_stand_in_costs_nothing_and_says_nothing(workspace: Path):
    session = Session(workspace, model="offline")
    events = run(session, "Survey the project.")
    assert [e.cost_usd for e in of(ModelResponded, events)] == [0.0] * len(
        of(ModelResponded, events)
    )
    assert not [e for e in of(Notice, events) if e.code == "unpriced_model"]
    assert session.cost_usd == 0.0


# -- summaries in the conversation ----------------------------------------------------------


def summary_or_script(script: list[Any]) -> Any:
    """A responder: a summary for a summarisation request (no tools, or tools turned off),
    else the script's next reply."""
    steps = iter(script)

    def respond(body: dict) -> Any:
        if not body.get("tools") or body.get("tool_choice", {}).get("type") == "none":
            return reply(text("Summary: six documents about the batch limit, read in order."))
        return next(steps)

    return respond


def test_an_in_context_summary_reads_the_conversation_from_the_cache(workspace: Path):
    """`Summariser(in_context=True)` asks in the conversation itself, with the agent's system
    prompt and tools (turned off): the fake accepts it, reads the conversation from the cache,
    and the compaction's summary costs a fraction of the summary of the conversation as text."""
    write_docs(workspace, 6)

    def compacting(summariser: Summariser) -> tuple[CompactionFinished, list[dict]]:
        with FakeAnthropic(summary_or_script(reading(6))) as server:
            model = AnthropicModel(MODEL, client=server.client())
            policy = CompactPolicy(context_limit=9_000)
            with Session(workspace, model=model, policy=policy, summariser=summariser) as s:
                events = run(s)
            server.assert_no_rejections()
            bodies = list(server.accepted)
        (finished,) = [e for e in of(CompactionFinished, events) if e.success][:1]
        return finished, bodies

    as_text, text_bodies = compacting(Summariser())
    in_context, bodies = compacting(Summariser(in_context=True))
    asked = next(b for b in bodies if b.get("tool_choice") == {"type": "none"})
    agent = [b for b in bodies if "tool_choice" not in b]
    assert asked["tools"] == agent[0]["tools"] and asked["system"] == agent[0]["system"]
    instruction = asked["messages"][-1]["content"][-1]["text"]
    assert instruction.startswith("The conversation to summarise is everything above")
    # It reads what the agent's calls cached and writes nothing: no marker on its newest turn.
    assert not [b for b in asked["messages"][-1]["content"] if "cache_control" in b]
    assert in_context.summary_usage.cache_creation_input_tokens == 0
    usage = in_context.summary_usage
    assert usage.cache_read_input_tokens > 0.6 * usage.context_tokens
    assert not [b for b in text_bodies if "tool_choice" in b]  # as text: no tools at all
    assert as_text.summary_usage.cache_read_input_tokens == 0
    assert in_context.summary_cost_usd < 0.5 * as_text.summary_cost_usd


def test_a_summary_falls_back_to_the_conversation_as_text_when_it_cannot_continue_it():
    prompt = AgentPrompt(
        "You are an agent.", [{"name": "bash", "input_schema": {"type": "object"}}]
    )
    summariser = Summariser(in_context=True, input_limit=5_000)
    history = agent_history(["x" * 500] * 3)
    continued = summariser.request(history, "the docs", prompt)
    assert continued.tool_choice == {"type": "none"} and continued.tools == prompt.tools
    assert continued.messages[:-1] == history[:-1]
    assert continued.messages[-1]["content"][:-1] == history[-1]["content"]  # results first
    assert "the docs" in continued.messages[-1]["content"][-1]["text"]
    # A call left unanswered cannot be followed by a user turn; a long one is cut as text.
    unanswered = history[:-1]
    long = agent_history(["x" * 2_000] * 3)
    for messages in (unanswered, long):
        request = summariser.request(messages, None, prompt)
        assert not request.tools and "<conversation>" in request.messages[0]["content"][0]["text"]
    assert not Summariser().request(history, None, prompt).tools  # the default: as text


def test_the_offline_stand_in_summarises_in_context(tmp_path: Path):
    """The scripted offline model answers an in-context summary request (tools defined, none
    allowed) with a summary of the conversation, not with another agent step."""
    from evo_magic.demo import make_demo_workspace
    from evo_magic.models import OfflineModel

    workspace = make_demo_workspace(tmp_path / "work")
    summariser = Summariser(in_context=True)
    with Session(workspace, model=OfflineModel(), summariser=summariser) as session:
        session.ask("Survey this project and note the TODOs.")
        finished = session.compact("the TODOs")
    assert finished.success, finished.error
    summary = session.state.last_summary or ""
    assert "Survey this project" in summary and "the TODOs" in summary
    assert "The conversation to summarise" not in summary


def test_a_summary_of_part_of_the_history_is_asked_as_text(workspace: Path):
    """SummariseOlder summarises the older messages only: a prefix that ends where no cache
    entry is, so even with summaries in context it is asked as text (no tools)."""
    from evo_magic.strategies import SummariseOlder

    write_docs(workspace, 6)
    with FakeAnthropic(summary_or_script(reading(6))) as server:
        model = AnthropicModel(MODEL, client=server.client())
        policy = CompactPolicy(context_limit=9_000, summary_in_context=True)
        strategies = [SummariseOlder(keep=4)]
        with Session(workspace, model=model, policy=policy, strategies=strategies) as s:
            events = run(s)
        server.assert_no_rejections()
        summaries = [b for b in server.accepted if not b.get("tools")]
        in_context = [b for b in server.accepted if "tool_choice" in b]
    assert [e for e in of(CompactionFinished, events) if e.success]
    assert summaries and not in_context


def test_micro_compaction_asked_for_by_name_clears_whatever_the_cache(workspace: Path):
    write_docs(workspace, 8)
    with FakeAnthropic(summary_or_script(reading(8))) as server:
        model = AnthropicModel(MODEL, client=server.client())
        with Session(workspace, model=model) as session:
            events = run(session)
            assert not of(MicroCompacted, events)  # the cache is warm: the default waits
            finished = session.compact(strategy=MicroCompact())
            placeholders = [
                b
                for m in session.messages
                for b in m["content"]
                if isinstance(b, dict) and b.get("content") == PLACEHOLDER
            ]
        server.assert_no_rejections()
    assert finished.success and finished.after.chars < finished.before.chars
    assert len(placeholders) >= 4
