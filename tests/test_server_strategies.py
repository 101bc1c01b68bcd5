"""The API's own compaction and context editing as strategies, through the real SDK against the
loopback fake: the requests carry exactly the documented parameters and betas, compaction blocks
come back byte for byte, a paused compaction continues the ask, the tokens are priced, and a
rejected feature hands over to its fallback once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pandas as pd
import pytest
from anthropic.types.beta import BetaMessage, BetaMessageTokensCount
from support.fake_api import FakeAnthropic, Reply, reply, text, tool_use

from evo_magic.compact.server import named_in
from evo_magic.cost import DEFAULT_PRICES, call_cost
from evo_magic.events import (
    AskFinished,
    CompactionFinished,
    MicroCompacted,
    ModelResponded,
    Notice,
)
from evo_magic.models import AnthropicModel, ModelError
from evo_magic.models.catalog import context_window, supports
from evo_magic.session import Session
from evo_magic.strategies import (
    MicroCompact,
    ServerClearThinking,
    ServerClearToolUses,
    ServerCompact,
    ServerSummarise,
    Summarise,
)
from evo_magic.strategies.registry import make_strategy

MODEL = "claude-sonnet-5-5"
CHUNK = "The quick brown fox reports on the ledger. " * 1_400  # ~60k chars, ~15k tokens


def of(kind: type, events: list[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def betas_of(headers: dict[str, str]) -> set[str]:
    return {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}


def session(workspace: Path, fake: FakeAnthropic, strategies: list[Any], model: str = MODEL):
    claude = AnthropicModel(model, client=fake.client())
    return Session(workspace, model=claude, strategies=strategies)


def grow(s: Session, fake: FakeAnthropic, asks: int) -> list[Any]:
    """`asks` asks of ~15k tokens each, answered in one line; returns every event."""
    events: list[Any] = []
    for n in range(asks):
        fake.queue(reply(text(f"noted {n}")))
        events += s.ask(f"Part {n}: {CHUNK}").events
    return events


# -- requests ----------------------------------------------------------------------------------


def test_requests_carry_exactly_the_documented_edits_in_order_and_their_betas(
    fake: FakeAnthropic, workspace: Path
):
    strategies = [
        ServerCompact(trigger_tokens=120_000, instructions="Keep file paths."),
        ServerClearToolUses(trigger_tokens=30_000, keep=2, clear_at_least=5_000,
                            exclude_tools=("edit_file",), clear_tool_inputs=True),
        ServerClearThinking(keep_turns=2),
        MicroCompact(),
    ]  # fmt: skip
    fake.queue(reply(text("hello")))
    session(workspace, fake, strategies).ask("Say hello.")
    body = fake.accepted[-1]
    assert body["context_management"] == {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 30_000},
                "keep": {"type": "tool_uses", "value": 2},
                "clear_at_least": {"type": "input_tokens", "value": 5_000},
                "exclude_tools": ["edit_file"],
                "clear_tool_inputs": True,
            },
            {
                "type": "compact_20260112",
                "trigger": {"type": "input_tokens", "value": 120_000},
                "pause_after_compaction": False,
                "instructions": "Keep file paths.",
            },
        ]
    }
    assert "compaction" not in body
    assert betas_of(fake.headers[-1]) == {"context-management-2025-06-27", "compact-2026-01-12"}


def test_without_server_strategies_no_beta_and_no_context_management_is_sent(
    fake: FakeAnthropic, workspace: Path
):
    fake.queue(reply(text("hello")))
    session(workspace, fake, [MicroCompact()]).ask("Say hello.")
    assert "context_management" not in fake.accepted[-1]
    assert "anthropic-beta" not in fake.headers[-1]


def test_registered_names_and_specs_make_the_strategies():
    made = make_strategy("server-compact(trigger_tokens=120000, fallback='summarise')")
    assert isinstance(made, ServerCompact) and made.trigger_tokens == 120_000
    assert isinstance(made.fallback, Summarise)
    assert isinstance(make_strategy("server-clear-tool-uses"), ServerClearToolUses)
    assert isinstance(make_strategy("server-clear-thinking"), ServerClearThinking)
    assert isinstance(make_strategy("server-summarise"), ServerSummarise)
    with pytest.raises(ValueError, match="50,000"):
        ServerCompact(trigger_tokens=10_000)  # under the API's minimum: refused here already
    with pytest.raises(ValueError, match="keep_turns"):
        ServerClearThinking(keep_turns=0)  # the API keeps at least one turn's thinking


# -- automatic compaction ---------------------------------------------------------------------


def test_a_server_compaction_replaces_the_history_and_its_block_comes_back_byte_for_byte(
    fake: FakeAnthropic, workspace: Path
):
    fake.tool_changes = [{"type": "tool_removal", "tool": {"type": "tool_reference",
                                                           "name": "edit_file"}}]  # fmt: skip
    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    events = grow(s, fake, 4)  # the fourth call passes 50k tokens
    compactions = of(CompactionFinished, events)
    assert len(compactions) == 1
    done = compactions[0]
    assert (done.strategy, done.trigger, done.success) == ("server-compact", "server", True)
    assert done.summary.startswith("Summary of 7 messages")
    assert done.before.tokens > 50_000 > done.after.tokens
    assert done.snapshot_path and Path(done.snapshot_path).exists()
    block = s.history.messages[0]["content"][0]
    assert block["type"] == "compaction" and block["content"] == done.summary
    assert len(s.history) == 1  # the reply, from its compaction block on

    fake.queue(reply(text("still here")))
    s.ask("And now?")
    sent = fake.accepted[-1]["messages"][0]["content"][0]
    assert json.dumps(sent, sort_keys=True) == json.dumps(block, sort_keys=True)
    assert sent["tool_changes"] == fake.tool_changes  # as the server sent them, nothing added


class Broken:
    """An over-limit strategy that always fails."""

    name, when = "broken", "over_limit"

    def compact(self, messages: Any, ctx: Any) -> Any:
        raise RuntimeError("nothing works here")


def test_a_server_compaction_ends_the_back_off_as_any_compaction_does(
    fake: FakeAnthropic, workspace: Path
):
    """A compaction that succeeded is counted by one writer (`CompactState.compacted`), the
    server's too: the failures in a row and the wait for growth after them are over. (The
    server's compaction counted itself by hand and left the back-off as it was.)"""
    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000), Broken()])
    s.configure(context_limit=100_000)  # characters: over it before the server's 50k tokens
    events = grow(s, fake, 4)
    failed = [e for e in of(CompactionFinished, events) if not e.success]
    server = [e for e in of(CompactionFinished, events) if e.trigger == "server"]
    assert failed and all(e.strategy == "broken" for e in failed)
    assert server and server[-1].success
    assert events.index(failed[0]) < events.index(server[-1])
    assert s.state.consecutive_failures == 0 and s.state.retry_after_chars == 0
    assert s.state.compact_count == 1 and not s.paused


def test_the_fake_refuses_a_compaction_block_changed_by_one_byte(fake: FakeAnthropic):
    client = fake.client()
    params = {
        "model": MODEL, "max_tokens": 64, "betas": ["compact-2026-01-12"],
        "context_management": {"edits": [{"type": "compact_20260112",
                                          "trigger": {"type": "input_tokens", "value": 50_000}}]},
    }  # fmt: skip
    first = client.beta.messages.create(messages=[{"role": "user", "content": CHUNK * 4}], **params)
    block = first.content[0].model_dump(mode="json", exclude_none=False)
    assert block["type"] == "compaction"
    follow = [{"role": "assistant", "content": [block]}, {"role": "user", "content": "go on"}]
    fake.queue(reply(text("fine")))
    assert client.beta.messages.create(messages=follow, **params).content[-1].text == "fine"
    tampered = {**block, "encrypted_content": "X" + block["encrypted_content"][1:]}
    follow[0] = {"role": "assistant", "content": [tampered]}
    with pytest.raises(anthropic.BadRequestError, match="signature"):
        client.beta.messages.create(messages=follow, **params)
    fake.rejections.clear()


def test_a_paused_compaction_continues_the_ask_with_the_request_verbatim(
    fake: FakeAnthropic, workspace: Path
):
    s = session(
        workspace, fake, [ServerCompact(trigger_tokens=50_000, pause_after_compaction=True)]
    )
    grow(s, fake, 3)
    fake.queue(reply(text("the answer")))
    result = s.ask(f"Part 3: {CHUNK}")
    assert result.text == "the answer"
    assert result.turns == 2  # the paused call, then the answer
    second = fake.accepted[-1]["messages"]
    assert second[0]["content"][0]["type"] == "compaction"
    assert second[1]["role"] == "user" and f"Part 3: {CHUNK}" in second[1]["content"][0]["text"]
    assert of(CompactionFinished, result.events)[0].success
    assert s.pending_request is None


def test_a_failed_server_summary_is_kept_and_reported(fake: FakeAnthropic, workspace: Path):
    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    grow(s, fake, 3)
    fake.fail_next_summary = True
    events = grow(s, fake, 1)
    failed = of(CompactionFinished, events)[0]
    assert not failed.success and "null content" in (failed.error or "")
    assert failed.after == failed.before
    last = s.history.messages[-1]["content"]
    assert last[0] == {**last[0], "type": "compaction", "content": None}
    fake.queue(reply(text("ok")))
    s.ask("Continue.")  # the null block goes back as it came: the fake accepts it


def test_the_compaction_iteration_is_priced_as_the_calls_summary_cost(
    fake: FakeAnthropic, workspace: Path
):
    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    grow(s, fake, 3)
    fake.queue(reply(text("compacted")))
    result = s.ask(f"Part 3: {CHUNK}")
    finished = of(AskFinished, result.events)[0]
    compaction = of(CompactionFinished, result.events)[0]
    responded = of(ModelResponded, result.events)[0]
    assert compaction.summary_usage.input_tokens > 50_000
    expected = call_cost(compaction.summary_usage, MODEL, DEFAULT_PRICES)
    assert expected is not None
    assert compaction.summary_cost_usd == pytest.approx(expected.total)
    assert finished.summary_cost_usd == pytest.approx(expected.total)
    # The call itself is the message iteration: the compacted context, not the 60k before it.
    assert responded.usage.context_tokens < 50_000
    assert finished.cost_usd == pytest.approx(responded.cost_usd)


# -- clearing ---------------------------------------------------------------------------------


def test_a_server_clearing_is_recorded_on_the_call_and_leaves_the_history(
    fake: FakeAnthropic, workspace: Path
):
    seen: list[dict] = []

    def respond(body: dict) -> Reply:
        seen.append(body)
        return reply(text("done"))

    fake.responder = respond
    for n in range(4):
        (workspace / f"doc{n}.txt").write_text(f"line {n}\n" * 400)
    fake.queue(*[reply(tool_use("read_file", {"path": f"doc{n}.txt"})) for n in range(4)])
    strategy = ServerClearToolUses(trigger_tokens=1_000, keep=1)
    result = session(workspace, fake, [strategy]).ask("Read the docs.")
    calls = of(ModelResponded, result.events)
    applied = [edit for call in calls for edit in call.applied_edits]
    assert applied and applied[-1]["type"] == "clear_tool_uses_20250919"
    assert applied[-1]["cleared_tool_uses"] == 3 and applied[-1]["cleared_input_tokens"] > 0
    cleared = [e for e in of(MicroCompacted, result.events) if e.strategy == strategy.name]
    assert cleared and cleared[-1].cleared_tokens == applied[-1]["cleared_input_tokens"]
    assert cleared[-1].applied == applied[-1]
    # The model saw placeholders; the history keeps every output.
    prompt_results = [
        b for m in seen[-1]["messages"] if m["role"] == "user" for b in m["content"]
        if b.get("type") == "tool_result"
    ]  # fmt: skip
    assert sum("cleared" in str(b["content"]) for b in prompt_results) == 3


def test_preview_counts_the_edits_with_count_tokens_and_bills_nothing(
    fake: FakeAnthropic, workspace: Path
):
    (workspace / "big.txt").write_text("payload line\n" * 2_000)
    fake.queue(reply(tool_use("read_file", {"path": "big.txt"})), reply(text("read")))
    s = session(workspace, fake, [MicroCompact(keep_recent=5)])
    s.ask("Read big.txt.")
    calls = len(fake.accepted)
    preview = s.preview(strategy=ServerClearToolUses(trigger_tokens=1, keep=0))
    assert len(fake.accepted) == calls  # no model call
    counted = fake.count_tokens_requests[-1]
    assert counted["context_management"]["edits"][0]["type"] == "clear_tool_uses_20250919"
    assert preview.original_input_tokens is not None and preview.input_tokens is not None
    assert preview.original_input_tokens - preview.input_tokens > 1_000
    assert preview.after.tokens == preview.input_tokens


# -- on demand --------------------------------------------------------------------------------


def test_server_summarise_on_demand_sends_the_compaction_parameter_alone(
    fake: FakeAnthropic, workspace: Path
):
    s = session(workspace, fake, [MicroCompact()])
    grow(s, fake, 1)
    done = s.compact(focus="the open TODOs", strategy=ServerSummarise())
    assert done.success, done.error
    body = fake.accepted[-1]
    assert body["compaction"] == {"type": "summarize", "instructions": "the open TODOs"}
    assert "context_management" not in body
    assert betas_of(fake.headers[-1]) == {"compact-2026-09-04"}
    assert "Instructions followed: the open TODOs" in done.summary
    assert done.summary_usage.input_tokens > 10_000 and done.summary_cost_usd
    assert s.history.messages == [
        {"role": "assistant", "content": [s.history.messages[0]["content"][0]]}
    ]
    fake.queue(reply(text("after")))
    assert s.ask("What next?").text == "after"


# -- fallback ---------------------------------------------------------------------------------


def test_a_rejected_feature_falls_back_once_and_every_record_names_what_ran(workspace: Path):
    with FakeAnthropic() as fake:
        strategies = [ServerCompact(fallback=Summarise()), MicroCompact()]
        s = session(workspace, fake, strategies, model="claude-compatible-1")
        fake.queue(reply(text("one")), reply(text("two")))
        first = s.ask("First.")
        second = s.ask("Second.")
        assert (first.text, second.text) == ("one", "two")
        assert len(fake.rejections) == 1 and "compact_20260112" in fake.rejections[0][1]
        notices = [
            n for n in of(Notice, first.events + second.events) if n.code == "server_fallback"
        ]
        assert len(notices) == 1 and "summarise for server-compact" in notices[0].message
        assert all("context_management" not in body for body in fake.accepted)
        assert [x.name for x in s.strategies] == ["summarise", "micro"]
        fake.queue(reply(text("A summary of the two asks.")))
        done = s.compact()
        assert done.success and (done.strategy, done.fallback_for) == (
            "summarise",
            "server-compact",
        )
        assert done.as_record()["fallback_for"] == "server-compact"
        # Run by hand, the same strategy is not a fallback.
        fake.queue(reply(text("three")), reply(text("Another summary.")))
        s.ask("Third.")
        assert s.compact(strategy=Summarise()).fallback_for is None


def test_a_refused_on_demand_summary_falls_back_and_says_so(workspace: Path):
    with FakeAnthropic() as fake:
        strategies = [ServerSummarise(fallback=Summarise()), MicroCompact()]
        s = session(workspace, fake, strategies, model="claude-compatible-1")
        events: list[Any] = []
        s.subscribe(events.append)
        grow(s, fake, 1)
        fake.queue(reply(text("A client summary.")))
        done = s.compact(focus="the open TODOs")
        assert done.success and (done.strategy, done.fallback_for) == (
            "summarise",
            "server-summarise",
        )
        assert done.summary == "A client summary."
        assert len(fake.rejections) == 1 and "summarize" in fake.rejections[0][1]
        failed = [e for e in of(CompactionFinished, events) if not e.success]
        assert [e.strategy for e in failed] == ["server-summarise"]
        assert [n.code for n in of(Notice, events) if n.code != "unpriced_model"] == [
            "server_fallback"
        ]
        assert [x.name for x in s.strategies] == ["summarise", "micro"]


def test_a_rejection_names_only_the_strategies_whose_edits_were_sent():
    compact, on_demand = ServerCompact(), ServerSummarise()
    message = "context_management.edits.0: compact_20260112 is not supported on model x"
    assert named_in(message, [compact, on_demand, MicroCompact()]) == [compact]
    clear = ServerClearToolUses()
    both = [compact, clear]
    assert named_in("context_management.edits.1: clear_tool_uses_20250919: bad keep", both) == [
        clear
    ]
    assert named_in("context_management: Extra inputs are not permitted", both) == both
    # A malformed block is not a missing feature: no fallback hides it.
    tampered = "messages.0.content.0: the compaction block's signature does not match"
    assert named_in(tampered, both) == []


def test_a_model_the_table_says_lacks_it_falls_back_before_any_request(
    fake: FakeAnthropic, workspace: Path
):
    assert supports("claude-haiku-4-5", "compact_20260112") is False
    assert context_window("claude-haiku-4-5-20251101") == 200_000
    assert supports("claude-unknown-9", "compact_20260112") is None
    s = session(workspace, fake, [ServerCompact(fallback=Summarise())], model="claude-haiku-4-5")
    fake.queue(reply(text("one")))
    result = s.ask("First.")
    assert [n.code for n in of(Notice, result.events)] == ["server_fallback"]
    assert "context_management" not in fake.accepted[-1]


def test_the_offline_model_has_no_server_so_the_fallback_runs(workspace: Path):
    s = Session(workspace, model="offline", strategies=[ServerCompact(fallback="summarise")])
    result = s.ask("Survey the project.")
    notices = [n.message for n in of(Notice, result.events) if n.code == "server_fallback"]
    assert len(notices) == 1 and "offline model has no server" in notices[0]
    assert [x.name for x in s.strategies] == ["summarise"]
    with pytest.raises(ModelError, match="no fallback"):
        Session(workspace, model="offline", strategies=[ServerCompact()]).ask("Survey it.")


def test_without_a_fallback_the_error_is_clear_and_the_history_valid(workspace: Path):
    with FakeAnthropic() as fake:
        s = session(workspace, fake, [ServerCompact()], model="claude-compatible-1")
        with pytest.raises(ModelError, match="no fallback"):
            s.ask("First.")
        assert len(fake.rejections) == 1
        s.configure(strategies=[MicroCompact()])
        fake.queue(reply(text("fine")))
        assert s.ask("Again.").text == "fine"
        assert len(fake.rejections) == 1


def test_a_context_window_exceeded_stop_is_a_clear_error_and_the_history_valid(
    fake: FakeAnthropic, workspace: Path
):
    s = session(workspace, fake, [ServerCompact()])
    fake.queue(Reply([text("partial")], stop_reason="model_context_window_exceeded"))
    with pytest.raises(ModelError, match="context window"):
        s.ask("Go.")
    fake.queue(reply(text("fine")))
    assert s.ask("Again.").text == "fine"


# -- the fake -----------------------------------------------------------------------------------


def _raw(client: anthropic.Anthropic, **params: Any) -> dict:
    return json.loads(client.beta.messages.with_raw_response.create(**params).http_response.text)


def test_every_reply_of_the_fake_parses_with_the_sdks_typed_beta_models(fake: FakeAnthropic):
    client = fake.client()
    compact = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
    clear = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 10},
             "keep": {"type": "tool_uses", "value": 0}}  # fmt: skip
    call = tool_use("read_file", {"path": "a"}, id="toolu_1")
    with_tools = [
        {"role": "user", "content": "read"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "x" * 400}]},
    ]  # fmt: skip
    big = [{"role": "user", "content": CHUNK * 4}]
    tools = [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    base = {"model": MODEL, "max_tokens": 64, "tools": tools}
    cases = [
        {"messages": big, "context_management": {"edits": [compact]},
         "betas": ["compact-2026-01-12"]},
        {"messages": big, "context_management": {"edits": [{**compact,
         "pause_after_compaction": True}]}, "betas": ["compact-2026-01-12"]},
        {"messages": big, "compaction": {"type": "summarize"}, "betas": ["compact-2026-09-04"]},
        {"messages": with_tools, "context_management": {"edits": [clear]},
         "betas": ["context-management-2025-06-27"]},
    ]  # fmt: skip
    for params in cases:
        parsed = BetaMessage.model_validate(_raw(client, **base, **params))
        assert parsed.type == "message"
        with client.beta.messages.stream(**base, **params) as stream:
            streamed = stream.get_final_message()
        assert [b.type for b in streamed.content] == [b.type for b in parsed.content]
    fake.fail_next_summary = True
    failed = BetaMessage.model_validate(_raw(client, **base, **cases[0]))
    assert failed.content[0].type == "compaction" and failed.content[0].content is None
    counted = client.beta.messages.with_raw_response.count_tokens(
        model=MODEL, messages=with_tools, tools=tools, context_management={"edits": [clear]},
        betas=["context-management-2025-06-27"],
    )  # fmt: skip
    tokens = BetaMessageTokensCount.model_validate(json.loads(counted.http_response.text))
    assert tokens.context_management is not None
    assert tokens.context_management.original_input_tokens > tokens.input_tokens


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"context_management": {"edits": [{"type": "clear_everything"}]},
          "betas": ["context-management-2025-06-27"]}, "clear_everything"),
        ({"context_management": {"edits": [{"type": "compact_20260112"}]},
          "compaction": {"type": "summarize"},
          "betas": ["compact-2026-01-12", "compact-2026-09-04"]}, "cannot be combined"),
        ({"context_management": {"edits": [{"type": "compact_20260112"}]}}, "anthropic-beta"),
        ({"context_management": {"edits": [{"type": "compact_20260112",
          "trigger": {"type": "input_tokens", "value": 49_999}}]},
          "betas": ["compact-2026-01-12"]}, "50000"),
        ({"context_management": {"edits": [
            {"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}]},
          "betas": ["context-management-2025-06-27"]}, "first"),
    ],
)  # fmt: skip
def test_the_fake_rejects_what_the_api_rejects(params: dict, error: str):
    with FakeAnthropic() as fake:
        client = fake.client()
        with pytest.raises(anthropic.BadRequestError, match=error):
            client.beta.messages.create(
                model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}], **params
            )


def test_the_compactions_frame_says_what_ran_and_for_what(workspace: Path):
    from evo_magic.analysis import load_transcripts

    with FakeAnthropic() as fake:
        s = session(
            workspace, fake, [ServerCompact(fallback=Summarise())], model="claude-compatible-1"
        )
        fake.queue(reply(text("one")), reply(text("A summary.")))
        s.ask("First.")
        s.compact()
        s.close()
    with FakeAnthropic() as fake:
        t = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
        grow(t, fake, 4)
        t.close()
        fake.assert_no_rejections()
    frame = load_transcripts(workspace / ".evo_magic").compactions
    rows = {
        (r.strategy, r.ran, None if pd.isna(r.fallback_for) else r.fallback_for, r.trigger)
        for r in frame.itertuples()
    }
    assert rows == {
        ("server-compact", "summarise", "server-compact", "user"),
        ("server-compact", "server-compact", None, "server"),
    }


def test_the_cell_log_lines_say_what_the_server_did(fake: FakeAnthropic, workspace: Path):
    from evo_magic.render import compaction_line, micro_line

    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    done = of(CompactionFinished, grow(s, fake, 4))[0]
    assert compaction_line(done).startswith("compaction (by the API, server-compact): ")
    cleared = MicroCompacted(
        cleared_ids=(), chars_freed=0, before=done.before, after=done.after,
        strategy="server-clear-tool-uses", cleared_tokens=1_200,
        applied={"type": "clear_tool_uses_20250919", "cleared_tool_uses": 4,
                 "cleared_input_tokens": 1_200},
    )  # fmt: skip
    assert micro_line(cleared) == (
        "server-clear-tool-uses: the API cleared 4 tool uses, 1,200 tokens from this call's "
        "prompt (the history keeps them)"
    )


def test_the_meter_shows_the_servers_compaction(fake: FakeAnthropic, workspace: Path):
    from evo_magic.meter.log import MeterLog

    meter = MeterLog()
    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    s.subscribe(meter)
    grow(s, fake, 5)
    (full,) = [c for c in meter.compactions if not c.micro]
    assert (full.strategy, full.trigger, full.success) == ("server-compact", "server", True)
    assert full.summary.startswith("Summary of") and full.cost_usd
    notes = [note for call in meter.calls for note in call.before_it]
    assert any(note == "compaction C1 server-compact (server)" for note in notes), notes


# -- the notebook -------------------------------------------------------------------------------


def test_server_strategies_from_config_and_percent_compact_in_a_real_shell(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output
    from support.responders import offline_responder

    from evo_magic.notebook.magics import AgentMagics

    with FakeAnthropic(offline_responder()) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-server-0000")
        monkeypatch.chdir(workspace)
        # The same shell the other magics tests use (one singleton per process).
        ip = start_ipython() or InteractiveShell.instance()
        ip.run_line_magic("load_ext", "evo_magic")
        try:
            ip.run_line_magic("config", "AgentMagics.display_mode = 'plain'")
            ip.run_line_magic(
                "config",
                'AgentMagics.strategies = ["server-clear-tool-uses", '
                '"server-compact(trigger_tokens=120000)"]',
            )
            with capture_output() as captured:
                ip.run_cell_magic("agent", "", "Survey the project.")
                preview = ip.run_line_magic(
                    "compact", "--preview --strategy server-clear-tool-uses(trigger_tokens=1)"
                )
                ip.run_line_magic("compact", '--strategy server-summarise focus="the open TODOs"')
            assert preview.original_input_tokens >= preview.input_tokens > 0
            assert "context_management" in api.count_tokens_requests[-1]
            edits = [e["type"] for e in api.accepted[0]["context_management"]["edits"]]
            assert edits == ["clear_tool_uses_20250919", "compact_20260112"]
            assert api.accepted[0]["context_management"]["edits"][1]["trigger"]["value"] == 120_000
            assert api.accepted[-1]["compaction"] == {
                "type": "summarize",
                "instructions": "the open TODOs",
            }
            assert "compaction (user, server-summarise)" in captured.stdout
            session = next(m for m in ip.configurables if isinstance(m, AgentMagics))
            history = session.sessions["default"].history.messages
            assert history[0]["content"][0]["type"] == "compaction"
        finally:
            ip.run_line_magic("unload_ext", "evo_magic")
            ip.config.pop("AgentMagics", None)
        api.assert_no_rejections()


def test_compaction_blocks_go_back_with_their_beta_after_the_strategies_change(
    fake: FakeAnthropic, workspace: Path
):
    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    grow(s, fake, 4)
    s.configure(strategies=[MicroCompact()])
    fake.queue(reply(text("still fine")))
    assert s.ask("Go on.").text == "still fine"
    assert "context_management" not in fake.accepted[-1]
    assert betas_of(fake.headers[-1]) == {"compact-2026-01-12"}


def test_pins_are_in_every_request_after_the_apis_compaction(fake: FakeAnthropic, workspace: Path):
    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    s.pin("Never use tabs; the public API must not change.")
    events = grow(s, fake, 4)  # the fourth call passes 50k tokens: the server compacts
    assert len(of(CompactionFinished, events)) == 1
    fake.queue(reply(text("still here")))
    events = s.ask("And now?").events
    pinned = "[pinned by the user: always in the context] Never use tabs"
    for body in fake.accepted:
        texts = [
            block.get("text", "")
            for message in body["messages"]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
        ]
        assert any(t.startswith(pinned) for t in texts), "a request without the pin"
    last = fake.accepted[-1]["messages"]
    assert last[0]["content"][0]["type"] == "compaction"  # the pin comes after the block
    assert [n.code for n in of(Notice, events)].count("pins_carried") == 1
    fake.assert_no_rejections()
