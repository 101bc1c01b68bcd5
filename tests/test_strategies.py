"""Compaction strategies as plug-ins: the protocol, the guarantees the session gives for every
strategy, each built-in strategy's own semantics, and the registry."""

from __future__ import annotations

import json
import sys
import textwrap
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.example_strategy import KeepLastTurns
from support.fake_api import FakeAnthropic, validate_messages
from support.responders import offline_responder

from evo_magic import load_transcripts
from evo_magic.compact.base import Context
from evo_magic.compact.policy import CompactPolicy
from evo_magic.events import CompactionFinished, MicroCompacted
from evo_magic.models import AnthropicModel, FunctionModel, ModelRequest
from evo_magic.session import Session
from evo_magic.strategies import (
    ClearToolUses,
    LargeOutputs,
    MicroCompact,
    ObservationMasking,
    SlidingWindow,
    Summarise,
    SummariseOlder,
    default_pipeline,
)
from evo_magic.strategies.registry import (
    StrategySpecError,
    describe,
    describe_registered,
    make_strategy,
    rebuild,
    spec_of,
    strategies_markdown,
)


def records(session: Session, kind: str) -> list[dict[str, Any]]:
    lines = session.transcript_path.read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def scripted_model(steps: int = 2) -> FunctionModel:
    """A model that runs `steps` bash calls per request (echoing a long line), then answers;
    summary requests (no tools) get a short summary."""

    def respond(request: ModelRequest) -> list[dict[str, Any]]:
        if not request.tools:
            return [{"type": "text", "text": "SUMMARY of the older turns."}]
        since = 0
        for message in reversed(request.messages):
            if message["role"] == "user" and any(
                b.get("type") == "text" for b in message["content"]
            ):
                break
            since += message["role"] == "assistant"
        if since >= steps:
            return [{"type": "text", "text": f"Done after {since} steps."}]
        command = "printf 'x%.0s' $(seq 400); echo"
        return [{"type": "tool_use", "id": "", "name": "bash", "input": {"command": command}}]

    def with_ids(request: ModelRequest) -> list[dict[str, Any]]:
        content = respond(request)
        for block in content:
            if block["type"] == "tool_use":
                with_ids.calls += 1
                block["id"] = f"toolu_fn_{with_ids.calls:04d}"
        return content

    with_ids.calls = 0
    return FunctionModel(with_ids)


# -- the contract of the issue: a strategy of twenty lines, through Session and the SDK -----


def test_keep_last_turns_runs_through_session_and_is_recorded(workspace: Path):
    session = Session(
        workspace,
        model=scripted_model(),
        strategies=[LargeOutputs(), MicroCompact(keep_recent=3), KeepLastTurns(2)],
        policy=CompactPolicy(context_limit=2_500),
    )
    for n in range(4):
        session.ask(f"Request number {n}: run the commands.")
    done = records(session, "compaction")
    assert any(r["success"] for r in done)
    assert {r["strategy"] for r in done} == {"keep-last-turns"}
    assert all(r["layer"] == "over_limit" and r["trigger"] == "auto" for r in done)
    # The last two user turns stay verbatim after the summary.
    texts = [b["text"] for m in session.messages for b in m["content"] if b["type"] == "text"]
    assert texts[0].startswith("This conversation was compacted")
    assert "Request number 3: run the commands." in texts
    assert validate_messages(session.messages) is None
    start = records(session, "session_start")[0]
    assert [s["name"] for s in start["strategies"]] == ["large-outputs", "micro", "keep-last-turns"]
    frame = load_transcripts(session.directory).compactions
    full = frame[frame["layer"] == "over_limit"]
    assert len(full) == len(done) and set(full["strategy"]) == {"keep-last-turns"}


def test_a_strategy_through_the_real_sdk_and_the_fake(workspace: Path):
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        policy = CompactPolicy(context_limit=5_000)
        session = Session(workspace, model=model, policy=policy, strategies=[KeepLastTurns(1)])
        events = []
        session.subscribe(events.append)
        session.ask("Survey the project.")
        session.ask("Survey it again.")
        server.assert_no_rejections()
    done = [e for e in events if isinstance(e, CompactionFinished)]
    assert any(e.success for e in done) and {e.strategy for e in done} == {"keep-last-turns"}


def test_function_model_needs_a_dozen_lines(workspace: Path):
    seen: list[ModelRequest] = []

    def fn(request: ModelRequest):
        seen.append(request)
        if len(request.messages) == 1:
            return [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "pwd"}}]
        return {"content": [{"type": "text", "text": "here"}], "usage": {"input_tokens": 7}}

    session = Session(workspace, model=FunctionModel(fn))
    result = session.ask("Where are we?")
    assert result.text == "here" and result.turns == 2
    assert str(workspace) in session.messages[2]["content"][0]["content"]
    assert seen[0].tools and seen[0].max_tokens == session.max_tokens
    assert seen[1].messages[-1]["content"][0]["tool_use_id"] == "t1"
    assert result.usage.input_tokens > 7  # the first call's estimate plus the given 7


# -- what the session guarantees for any strategy ------------------------------------------


class Raises:
    name, when = "raises", "over_limit"

    def compact(self, messages, ctx):
        raise RuntimeError("boom in the strategy")


class Unanswered:
    name, when = "unanswered", "over_limit"

    def compact(self, messages, ctx):
        call = {"type": "tool_use", "id": "toolu_dangling", "name": "bash", "input": {}}
        return [messages[0], {"role": "assistant", "content": [call]}]


class DropsRequest:
    name, when = "drops-request", "over_limit"

    def compact(self, messages, ctx):
        return [{"role": "user", "content": [{"type": "text", "text": "Something else."}]}]


class Grows:
    name, when = "grows", "over_limit"

    def compact(self, messages, ctx):
        padding = {"role": "user", "content": [{"type": "text", "text": "pad " * 5_000}]}
        return [*messages, padding]


@pytest.mark.parametrize(
    ("strategy", "reason"),
    [
        (Raises(), "raises raised RuntimeError: boom in the strategy"),
        (Unanswered(), "not a valid history"),
        (DropsRequest(), "drops the user's pending request"),
        (Grows(), "would not be smaller"),
    ],
)
def test_bad_results_are_failed_compactions_and_change_nothing(workspace, strategy, reason):
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        policy = CompactPolicy(context_limit=100_000)
        session = Session(workspace, model=model, policy=policy, max_turns=3)
        session.ask("Survey the project.")  # stops at max_turns: the request stays pending
        before = json.dumps(session.messages)
        session.configure(strategies=[strategy])
        event = session.compact("keep the notes")
        assert not event.success and reason in event.error
        assert event.strategy == strategy.name
        assert json.dumps(session.messages) == before
        session.configure(strategies=None)
        session.configure(max_turns=10)
        session.ask("Go on.")
        server.assert_no_rejections()
    failures = [r for r in records(session, "compaction") if not r["success"]]
    assert [r["error"] for r in failures] == [event.error]  # said once


def test_automatic_failures_back_off_and_pause(workspace: Path):
    session = Session(
        workspace,
        model=scripted_model(steps=6),
        strategies=[Raises()],
        policy=CompactPolicy(context_limit=1_500, max_failures=2),
    )
    notices = []
    session.subscribe(lambda e: notices.append(e.code) if hasattr(e, "code") else None)
    for n in range(3):
        session.ask(f"Request {n}.")
    failures = [r for r in records(session, "compaction") if not r["success"]]
    assert len(failures) == 2 and session.state.consecutive_failures == 2
    assert notices.count("auto_compaction_paused") == 1


def test_strategies_change_between_asks_and_the_change_is_recorded(workspace: Path):
    session = Session(workspace, model=scripted_model(), policy=CompactPolicy(context_limit=2_000))
    assert [s.name for s in session.strategies] == ["large-outputs", "micro", "summarise"]
    session.ask("First.")
    session.configure(strategies=[SlidingWindow(keep=4)])
    session.ask("Second.")
    session.ask("Third.")
    changes = records(session, "strategies")
    assert [s["name"] for s in changes[-1]["strategies"]] == ["sliding-window"]
    assert any(r["strategy"] == "sliding-window" for r in records(session, "compaction"))
    with pytest.raises(TypeError, match="is not a compaction strategy"):
        session.configure(strategies=[object()])


def test_events_hold_copies_not_the_live_history(workspace: Path):
    session = Session(workspace, model=scripted_model(steps=5))
    result = session.ask("Run five commands.")
    # Micro-compaction replaced old results after their events were made: the events still
    # show the output as it was when each message joined.
    appended = [e for e in result.events if e.kind == "tool_result"]
    assert all("xxxx" in e.block["content"] for e in appended)
    assert any(
        b.get("content", "").startswith("[Earlier tool result")
        for m in session.messages
        for b in m["content"]
    )
    with pytest.raises(AttributeError):
        appended[0].index = 3  # frozen


def test_default_pipeline_is_the_seed_with_the_strategies_own_numbers():
    large, micro, summary = default_pipeline()
    assert (large.limit, large.preview_chars) == (30_000, 2_000)
    assert (micro.keep_recent, micro.min_chars, micro.cache_aware) == (3, 120, True)
    assert summary.when == "over_limit"
    # The policy holds the limits only: none of the pipeline's numbers is written twice.
    policy_fields = {f.name for f in fields(CompactPolicy)}
    for strategy in (large, micro, summary):
        assert not policy_fields & {f.name for f in fields(strategy)}, strategy.name


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("sliding-window(keep=-1)", "sliding-window.keep must be at least 1, got -1"),
        ("micro(keep_recent=-3)", "micro.keep_recent must be at least 0, got -3"),
        ('observation-masking(keep_turns="x")', "observation-masking.keep_turns must be a whole"),
        ("server-compact(trigger_tokens=1000)", "server-compact.trigger_tokens must be at least"),
        ("micro(keep=3)", "micro has no parameter keep (its parameters: cache_aware"),
        ("observation-masking(placeholder='{x}')", "observation-masking.placeholder: must be"),
        ("token-budget(marks=[0.5, 2])", "token-budget.marks: must be a share between 0 and 1"),
        ("summarise(when='every_call')", "summarise.when must be one of 'over_limit'"),
        ("server-summarise(fallback='server-compact')", "must be a client strategy"),
        ("clear-tool-uses(exclude_tools=[1])", "clear-tool-uses.exclude_tools must be a list"),
    ],
)
def test_a_bad_parameter_is_refused_when_the_strategy_is_made(spec: str, named: str):
    """Every built-in checks its parameters by one path when it is made (no IndexError or
    TypeError on a later call): the spec, the parameter and the rule in one line."""
    with pytest.raises(StrategySpecError) as caught:
        make_strategy(spec)
    message = str(caught.value)
    assert named in message and repr(spec) in message and "\n" not in message


def test_a_third_party_check_that_raises_anything_refuses_the_spec(monkeypatch):
    """Whatever a strategy's own check raises, making it from a spec is a StrategySpecError:
    the setting that names it can be refused whole."""

    class Picky:
        name, when = "picky", "over_limit"

        def __init__(self, n: int = 1):
            if n > 3:
                raise RuntimeError("n is too large for this lab")
            self.n = n

        def compact(self, messages, ctx):
            return None

    with pytest.raises(StrategySpecError, match="'Picky\\(n=5\\)': RuntimeError: n is too large"):
        make_strategy("Picky(n=5)", {"Picky": Picky})
    assert make_strategy("Picky(n=2)", {"Picky": Picky}).n == 2


def test_every_parameter_of_every_built_in_is_declared_with_help_and_a_default():
    """The tables and `%agent strategies` are read from the declarations: every parameter has
    a help line, and a spec of its own default makes the same strategy again."""
    for info in describe_registered():
        assert info.source, info.name
        for parameter in info.parameters:
            assert parameter.help, f"{info.name}.{parameter.name}"
        strategy = make_strategy(info.name)
        assert make_strategy(spec_of(strategy)) == strategy
        assert rebuild(describe(strategy)) == strategy


def test_the_docs_strategy_table_is_made_from_the_declarations():
    page = (Path(__file__).parent.parent / "docs" / "strategies.md").read_text(encoding="utf-8")
    start = page.index("<!-- table: strategies -->")
    table = page[page.index("\n", start) + 1 : page.index("\n<!-- /table -->", start)]
    assert table == strategies_markdown(), "python -m evo_magic.doc_tables docs/strategies.md"


# -- built-in strategies ----------------------------------------------------------------------


def history(turns: int, calls: int = 2, size: int = 300, tools=("bash", "read_file")) -> list:
    """A valid history: a request, then `turns` assistant turns of `calls` tool calls each."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "the goal"}]}
    ]
    n = 0
    for turn in range(turns):
        uses, results = [], []
        for call in range(calls):
            n += 1
            name = tools[(turn + call) % len(tools)]
            uses.append({"type": "tool_use", "id": f"t{n}", "name": name, "input": {"a": n}})
            results.append({"type": "tool_result", "tool_use_id": f"t{n}", "content": "o" * size})
        messages += [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    return messages


def applied(result, messages):
    return messages if result is None else list(result)


def results_of(messages) -> list[dict[str, Any]]:
    return [b for m in messages for b in m["content"] if b.get("type") == "tool_result"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.integers(0, 8),
    calls=st.integers(1, 3),
    keep=st.integers(0, 6),
    clear_at_least=st.integers(0, 800),
    excluded=st.sampled_from([(), ("read_file",), ("bash", "read_file")]),
    inputs=st.sampled_from([False, True, ("bash",)]),
)
def test_clear_tool_uses_keeps_clears_and_reports(
    turns, calls, keep, clear_at_least, excluded, inputs
):
    messages = history(turns, calls)
    strategy = ClearToolUses(
        trigger_tool_uses=0,
        keep=keep,
        clear_at_least=clear_at_least,
        exclude_tools=excluded,
        clear_tool_inputs=inputs,
    )
    ctx = Context.for_messages(messages, trigger="every_call")
    new = applied(strategy.compact(messages, ctx), messages)
    assert validate_messages(new) is None
    before, after = results_of(messages), results_of(new)
    cleared = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    names = {b["id"]: b["name"] for m in messages for b in m["content"] if b["type"] == "tool_use"}
    # Never within `keep`, never an excluded tool; all or nothing against clear_at_least.
    assert all(i < len(before) - keep for i in cleared)
    assert all(names[before[i]["tool_use_id"]] not in excluded for i in cleared)
    due = [
        i
        for i in range(max(len(before) - keep, 0))
        if names[before[i]["tool_use_id"]] not in excluded
    ]
    if cleared:
        assert cleared == due
        freed = len(json.dumps(messages)) - len(json.dumps(new))
        assert ctx.tokens_of_chars(freed) >= clear_at_least
        for i in cleared:
            use = next(
                b for m in new for b in m["content"] if b.get("id") == before[i]["tool_use_id"]
            )
            clears_input = inputs is True or (inputs and names[use["id"]] in inputs)
            assert (use["input"] == {}) == bool(clears_input)
    else:
        assert new == messages


def test_clear_tool_uses_waits_for_its_trigger():
    messages = history(4)
    ctx = Context.for_messages(messages)
    assert ClearToolUses(trigger_tokens=10**6).compact(messages, ctx) is None
    assert ClearToolUses(trigger_tokens=10).compact(messages, ctx) is not None
    assert ClearToolUses(trigger_tool_uses=100).compact(messages, ctx) is None


def test_clear_tool_uses_reports_as_the_api_does(workspace: Path):
    session = Session(
        workspace, model=scripted_model(steps=6), strategies=[ClearToolUses(trigger_tokens=500)]
    )
    result = session.ask("Run six commands.")
    edits = [e for e in result.events if isinstance(e, MicroCompacted)]
    assert edits and all(e.strategy == "clear-tool-uses" for e in edits)
    assert sum(len(e.cleared_ids) for e in edits) == 6 - 3  # all but `keep`
    assert all(e.cleared_tokens > 0 and e.chars_freed > 0 for e in edits)


@settings(max_examples=80, deadline=None)
@given(turns=st.integers(0, 12), calls=st.integers(1, 3), keep=st.integers(0, 5))
def test_observation_masking_keeps_the_last_turns_whole(turns, calls, keep):
    messages = history(turns, calls)
    new = applied(
        ObservationMasking(keep).compact(messages, Context.for_messages(messages)), messages
    )
    assert validate_messages(new) is None
    result_messages = [i for i, m in enumerate(messages) if m["role"] == "user" and i > 0]
    kept = set(result_messages[-keep:]) if keep else set()
    for i, (old, now) in enumerate(zip(messages, new, strict=True)):
        if i in kept or old["role"] == "assistant" or i == 0:
            assert now == old
        else:
            assert all(
                b["content"].startswith("[Old tool output omitted: 1 lines") for b in now["content"]
            )


@settings(max_examples=80, deadline=None)
@given(turns=st.integers(0, 10), calls=st.integers(1, 3), keep=st.integers(1, 12))
def test_sliding_window_keeps_the_first_message_and_cuts_at_pair_safe_points(turns, calls, keep):
    messages = history(turns, calls)
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "answer"}]})
    result = SlidingWindow(keep=keep).compact(messages, Context.for_messages(messages))
    if result is None:
        # Nothing to drop: the window, moved back to keep calls with their results, holds
        # everything after the first message.
        cut = len(messages) - keep
        while cut > 1 and messages[cut]["content"][0].get("type") == "tool_result":
            cut -= 1
        assert cut <= 1
        return
    assert validate_messages(result) is None
    assert result[0] == messages[0]
    tail = result[1:]
    assert tail == messages[len(messages) - len(tail) :]
    assert keep <= len(tail) <= keep + 1  # one more only to keep a call with its result


def test_sliding_window_keeps_the_pending_request():
    messages = [*history(1), {"role": "user", "content": [{"type": "text", "text": "REQUEST"}]}]
    messages += history(4)[1:]
    ctx = Context.for_messages(messages, pending_request="REQUEST")
    result = SlidingWindow(keep=2).compact(messages, ctx)
    assert result[1]["content"][0]["text"] == "REQUEST"
    assert validate_messages(result) is None


def test_summarise_older_keeps_the_newest_messages_verbatim():
    messages = history(6)
    summarised = []
    ctx = Context.for_messages(
        messages,
        focus="FOCUS",
        summarise=lambda ms, focus: summarised.append((len(ms), focus)) or "S",
    )
    result = SummariseOlder(keep=3).compact(messages, ctx)
    assert validate_messages(result) is None
    # The cut moved back so that the kept tail starts with an assistant turn, not its results.
    assert result[1]["role"] == "assistant" and result[1:] == messages[-4:]
    assert summarised == [(len(messages) - 4, "FOCUS")]
    assert "FOCUS" in result[0]["content"][0]["text"]
    by_tokens = SummariseOlder(keep_tokens=ctx.count_tokens(messages[-2:])).compact(messages, ctx)
    assert by_tokens[1:] == messages[-2:] or by_tokens[1:] == messages[-3:]


def test_summarise_is_the_seed_layout():
    messages = history(2)
    ctx = Context.for_messages(
        messages, focus="F", recent_files=["a.py"], pending_request="P", summarise=lambda m, f: "S"
    )
    (message,) = Summarise().compact(messages, ctx)
    text = message["content"][0]["text"]
    assert text.split("\n\n") == [
        text.split("\n\n")[0],
        "S",
        "Focus to preserve next: F",
        "Recent files to reopen if needed:\n- a.py",
        "The user's latest request, verbatim (not yet fully answered):\nP",
    ]


def test_every_built_in_keeps_pairs_valid_on_random_histories():
    for turns in range(0, 9):
        for calls in (1, 3):
            messages = history(turns, calls, size=200)
            ctx = Context.for_messages(messages, summarise=lambda m, f: "summary")
            for strategy in (
                LargeOutputs(limit=100, preview_chars=10),
                MicroCompact(keep_recent=1),
                ClearToolUses(trigger_tokens=0, keep=1),
                ObservationMasking(1),
                SlidingWindow(keep=3),
                SummariseOlder(keep=3),
                Summarise(),
            ):
                if isinstance(strategy, LargeOutputs):
                    ctx._save_output = lambda tool_use_id, text: f"saved/{tool_use_id}.txt"
                result = strategy.compact(messages, ctx)
                assert validate_messages(applied(result, messages)) is None, strategy.name


# -- the registry ------------------------------------------------------------------------------


def test_specs_by_name_path_and_call_syntax():
    assert isinstance(make_strategy("micro"), MicroCompact)
    micro = make_strategy("micro(keep_recent=5, exclude_tools=['read_file'])")
    assert micro.keep_recent == 5 and micro.exclude_tools == {"read_file"}
    window = make_strategy("evo_magic.strategies.SlidingWindow(keep=7)")
    assert isinstance(window, SlidingWindow) and window.keep == 7
    mine = make_strategy("KeepLastTurns(n=3)", {"KeepLastTurns": KeepLastTurns})
    assert mine.n == 3
    for bad, message in [
        ("nope", "unknown strategy 'nope'"),
        ("micro(3)", "keyword arguments only"),
        ("micro(keep_recent=x)", "must be a literal"),
        ("micro(bogus=1)", "bogus"),
        ("no.such.module.Thing", "cannot import"),
        ("micro(", "not a strategy spec"),
    ]:
        with pytest.raises(StrategySpecError, match=message.replace("(", r"\(")):
            make_strategy(bad)


def test_a_package_registers_a_strategy_by_entry_point(tmp_path: Path, monkeypatch):
    package = tmp_path / "mylab"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            '''
            class Halve:
                """Keep the newer half of the messages."""
                name = "halve"
                when = "over_limit"
                def __init__(self, minimum=4):
                    self.minimum = minimum
                def compact(self, messages, ctx):
                    return None
            '''
        )
    )
    dist = tmp_path / "mylab-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mylab\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[evo_magic.strategies]\nhalve = mylab:Halve\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    listed = {info.name: info for info in describe_registered()}
    assert listed["halve"].params == "minimum=4" and listed["halve"].when == "over_limit"
    assert listed["halve"].summary == "Keep the newer half of the messages."
    assert make_strategy("halve(minimum=6)").minimum == 6
    assert "mylab" in sys.modules


# -- preview -----------------------------------------------------------------------------------


def test_a_preview_is_what_the_compaction_then_does(workspace: Path):
    session = Session(workspace, model=scripted_model(steps=6), strategies=[MicroCompact()])
    session.ask("Run six commands.")
    clearing = ClearToolUses(trigger_tokens=0, keep=1)
    before = json.dumps(session.messages)
    preview = session.preview(clearing)
    assert json.dumps(session.messages) == before  # nothing applied
    assert preview.acts and preview.replaces and preview.error is None
    event = session.compact(strategy=clearing)
    assert event.success and event.strategy == "clear-tool-uses" and event.trigger == "user"
    assert preview.messages == session.messages
    assert preview.after == event.after
    assert set(preview.dropped()) == {
        i for i, m in enumerate(json.loads(before)) if m != session.messages[i]
    }

    summary = session.preview(Summarise(), focus="F", summarise=True)
    event = session.compact("F", Summarise())
    assert summary.replaces and summary.summaries == (event.summary,)
    assert summary.messages == session.messages
    assert (summary.after.messages, summary.after.chars) == (
        event.after.messages,
        event.after.chars,
    )
    assert summary.after.tokens == event.after.tokens


def test_a_preview_says_why_a_compaction_would_fail(workspace: Path):
    session = Session(workspace, model=scripted_model(steps=1))
    session.ask("One command.")
    preview = session.preview(Grows())
    assert "would not be smaller" in preview.error and not preview.acts
    assert "would FAIL" in repr(preview)
    stand_in = session.preview()
    assert stand_in.stand_in and "summary stand-in" in stand_in.summaries[0]
