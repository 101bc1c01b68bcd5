"""Replay reproduces what a session sent (the design's invariant 8): settings changed between
asks, in Python and through `%config` in a real shell, replayed under "recorded" and under the
session's own strategies give every request's characters and cache breakpoints exactly as the
loopback fake received them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from IPython.utils.capture import capture_output
from support.fake_api import FakeAnthropic, Reply, reply, text, tool_use, unmarked
from support.responders import offline_responder

from evo_magic import load_transcripts, replay
from evo_magic.compact.policy import CompactPolicy
from evo_magic.measure import to_json
from evo_magic.models import AnthropicModel
from evo_magic.prompt_cache import CacheSettings
from evo_magic.session import Session
from evo_magic.strategies import (
    ClearToolUses,
    LargeOutputs,
    MicroCompact,
    Summarise,
    SummariseOlder,
    TokenBudget,
)

ASKS = (
    "Survey this project: what does it do, and where are the TODOs?",
    "Now look again, then compact the context yourself.",
    "And once more, carefully.",
    "Finish up.",
)


def agent_requests(server: FakeAnthropic) -> list[dict]:
    """The agent's own calls (summaries are asked without tools)."""
    return [body for body in server.accepted if body.get("tools")]


def sent(body: dict) -> tuple[int, tuple[tuple[int, int], ...]]:
    """Characters of the messages as sent (the session's measure) and where their cache
    breakpoints were."""
    messages = body["messages"]
    marks = tuple(
        (i, j)
        for i, message in enumerate(messages)
        if isinstance(message["content"], list)
        for j, block in enumerate(message["content"])
        if "cache_control" in block
    )
    return len(to_json(unmarked(messages))), marks


def replayed(calls: pd.DataFrame, label: str) -> list[tuple[int, tuple[tuple[int, int], ...]]]:
    mine = calls[calls["strategy"] == label]
    pairs = zip(mine["context_chars"], mine["breakpoints"], strict=True)
    return [(int(chars), tuple(marks)) for chars, marks in pairs]


def assert_reproduced(r, label: str, server: FakeAnthropic) -> None:
    expected = [sent(body) for body in agent_requests(server)]
    got = replayed(r.calls, label)
    assert len(got) == len(expected), label
    for call, (a, b) in enumerate(zip(got, expected, strict=True), start=1):
        assert a == b, f"{label}: call {call} replayed {a}, sent {b}"


def test_settings_changed_between_asks_replay_exactly(workspace: Path):
    """Strategies set after the start, then changed; the limit lowered; caching switched off
    and on: "recorded" reproduces every request and its breakpoints."""
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, policy=CompactPolicy(context_limit=9_000)) as s:
            s.configure(strategies=[MicroCompact(keep_recent=2), SummariseOlder(keep=4)])
            s.ask(ASKS[0])
            s.configure(policy=s.policy.with_changes(context_limit=6_000))
            s.ask(ASKS[1])
            s.configure(cache=CacheSettings(enabled=False))
            s.configure(
                strategies=[ClearToolUses(keep=2, trigger_tokens=400), SummariseOlder(keep=4)]
            )
            s.ask(ASKS[2])
            s.configure(cache=CacheSettings())
            s.ask(ASKS[3])
        server.assert_no_rejections()
    t = load_transcripts(s.directory)
    assert t.compactions["success"].sum() >= 3  # compactions under both settings
    # Replaying it raised IndexError under every setting (the recorded replacements left the
    # prefix tracker pointing past the new history).
    r = replay(t, {"recorded": "recorded", "none": [], "default": None})
    assert set(r.totals["calls"]) == {len(agent_requests(server))}
    assert_reproduced(r, "recorded", server)
    # Caching was off for the third ask: its calls carried no breakpoint, and were modelled so.
    calls = r.calls[r.calls["strategy"] == "recorded"]
    assert (calls["breakpoints"].map(len) == 0).any() and (calls["breakpoints"].map(len) > 0).any()


def test_a_plain_session_replays_exactly_from_the_first_cache_aware_decision_on(
    workspace: Path,
):
    """The default pipeline is cache-aware: "recorded" and the session's own pipeline decide
    clearing on the usage the server reported, and send what the session sent."""
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, policy=CompactPolicy(context_limit=9_000)) as s:
            for ask in ASKS * 2:
                s.ask(ask)
    t = load_transcripts(s.directory)
    r = replay(t, {"recorded": "recorded", "own": None})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)


def test_settings_changed_through_config_in_a_real_shell_replay_exactly(
    ip,  # noqa: F811 (test_magics' fixture)
    monkeypatch: pytest.MonkeyPatch,
):
    """`%config` sets the strategies after the session started (the first cell), then the
    limit and caching between cells: "recorded" and the same strategies given to replay (the
    rest following the recorded timeline) reproduce every request and its breakpoints."""
    specs = ["large-outputs", "micro(keep_recent=2)", "summarise-older(keep=4)"]
    with FakeAnthropic(offline_responder()) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-replay-0000")
        ip.run_line_magic("config", f"AgentMagics.strategies = {specs!r}")
        ip.run_line_magic("config", "AgentMagics.context_limit = 9000")
        with capture_output():
            ip.run_cell_magic("agent", "", ASKS[0])
            ip.run_line_magic("config", "AgentMagics.context_limit = 6000")
            ip.run_cell_magic("agent", "", ASKS[1])
            ip.run_line_magic("config", "AgentMagics.caching = False")
            ip.run_cell_magic("agent", "", ASKS[2])
            ip.run_line_magic("config", "AgentMagics.caching = True")
            ip.run_line_magic("config", "AgentMagics.max_failures = 2")
            ip.run_cell_magic("agent", "", ASKS[3])
        server.assert_no_rejections()
    from evo_magic.notebook.magics import AgentMagics

    magics = next(m for m in ip.configurables if isinstance(m, AgentMagics))
    session = magics.sessions["default"]
    kinds = [line.split('"kind":"')[1].split('"')[0] for line in _lines(session.directory)]
    start = json.loads(_lines(session.directory)[0])  # the session is made as configured
    assert [d["name"] for d in start["strategies"]] == ["large-outputs", "micro", "summarise-older"]
    assert kinds.count("policy") >= 2 and kinds.count("cache") == 2
    t = load_transcripts(session.directory)
    r = replay(t, {"recorded": "recorded", "own": specs})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)


def _lines(directory: Path) -> list[str]:
    return (directory / "session.jsonl").read_text(encoding="utf-8").splitlines()


def test_a_call_over_the_models_context_window_is_flagged(workspace: Path):
    """Recorded prompts of 190k tokens and more: on a 200k model the calls above the window
    are flagged and counted; on a 1M model none is; on an unknown model the window is NA."""

    answer = offline_responder()
    calls = []

    def respond(body: dict) -> Reply:
        reply = answer(body)
        calls.append(body)
        reply.usage = {"input_tokens": 190_000 + 4_000 * len(calls)}
        return reply

    with FakeAnthropic(respond) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, cache=CacheSettings(enabled=False)) as s:
            s.ask(ASKS[0])
    t = load_transcripts(s.directory)
    expected = int((t.calls["input_tokens"] > 200_000).sum())
    assert 0 < expected < len(t.calls)
    small = replay(t, {"recorded": "recorded", "none": []}, model="claude-sonnet-4-5")
    rows = small.calls[small.calls["strategy"] == "recorded"]
    assert (rows["context_window"] == 200_000).all()
    assert list(rows["over_window"]) == list(rows["context_tokens"] > 200_000)
    assert small.totals.set_index("strategy").loc["recorded", "over_window_calls"] == expected
    large = replay(t, {"recorded": "recorded"}, model="claude-opus-4-6")
    assert not large.calls["over_window"].any() and large.totals["over_window_calls"].sum() == 0
    unknown = replay(t, {"recorded": "recorded"}, model="someone-elses-model")
    assert unknown.calls["over_window"].isna().all()


def test_the_plot_separates_sessions_and_says_which_lines_overlap(workspace: Path, tmp_path: Path):
    import matplotlib

    matplotlib.use("Agg")
    root = tmp_path / "transcripts"
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        for ask in ASKS[:2]:
            with Session(workspace, model=model, transcripts_root=root) as s:
                s.ask(ask)
    r = replay(root, {"recorded": "recorded", "none": [], "seed": None})
    figure = r.plot()
    left = figure.axes[0]
    lines = left.get_lines()
    assert len(lines) == 3
    for line in lines:  # one gap between the two sessions, no line across it
        ys = list(line.get_ydata())
        assert sum(1 for y in ys if y != y) == 1
    labels = [text.get_text() for text in left.get_legend().get_texts()]
    tokens = {k: list(v["context_tokens"]) for k, v in r.calls.groupby("strategy", sort=False)}
    # The sessions ran the default pipeline: "seed" is "recorded", drawn dashed and said so;
    # "none" (micro-compaction cleared old results) is a line of its own.
    assert tokens["seed"] == tokens["recorded"] != tokens["none"]
    assert labels == ["recorded", "none", "seed (overlaps recorded)"]
    assert lines[0].get_linestyle() == "-" != lines[2].get_linestyle()
    assert lines[2].get_marker() not in (None, "None", "")


def test_prices_changed_between_asks_apply_from_where_they_were_recorded(workspace: Path):
    free = {rate: 0.0 for rate in ("input", "output", "cache_write_5m", "cache_write_1h")}
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model) as s:
            s.ask(ASKS[0])
            first = s.calls
            s.configure(prices={"claude-sonnet-5-5": {**free, "cache_read": 0.0}})
            s.ask(ASKS[1])
    t = load_transcripts(s.directory)
    r = replay(t, {"recorded": "recorded", "none": []})
    for label in ("recorded", "none"):
        cost = r.calls[r.calls["strategy"] == label]["cost_usd"].tolist()
        assert all(c > 0 for c in cost[:first]) and all(c == 0 for c in cost[first:]), label
    shipped = replay(t, {"recorded": "recorded"}, prices={})  # replay's own table throughout
    assert (shipped.calls["cost_usd"] > 0).all()


# -- each rule live and replay share: changing it on one side alone breaks these ---------------


def scripted_agent(*replies: Reply):
    """Agent calls get `replies` in turn, then "Done."; summaries come from the offline model."""
    pending = list(replies)
    summaries = offline_responder()

    def respond(body: dict) -> object:
        if not body.get("tools"):
            return summaries(body)
        return pending.pop(0) if pending else reply(text("Done."))

    return respond


def test_a_reply_cut_at_max_tokens_leaves_the_request_pending_live_and_in_replay(
    workspace: Path,
):
    """The request's begin and end (`History.begin_request`, `History.answered`): a reply cut
    off at max_tokens does not answer it, so the compaction later in the same ask carries it.
    Replay ended the request at any reply without tool calls and so compacted without it."""
    reads = [
        reply(tool_use("read_file", {"path": name}, id=f"toolu_r{i}"))
        for i, name in enumerate(["inventory.py", "samples.csv", "README.md", "inventory.py"])
    ]
    cut = reply(text("I will now summarise every row of"), stop_reason="max_tokens")
    with FakeAnthropic(scripted_agent(reads[0], cut, *reads[1:])) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, context_limit=9_000) as s:
            s.ask("Read the project files, then tell me what the samples hold.")
            assert s.state.compact_count == 1
            opening = json.dumps(s.messages[0])
        server.assert_no_rejections()
    assert "tell me what the samples hold" in opening  # carried: it was still pending
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": None})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)


def test_a_saved_output_is_shown_at_the_same_path_live_and_in_replay(
    workspace: Path, tmp_path: Path
):
    """Where a large output is saved is shown to the model by one rule (`output_shown`), with
    the session's own folder recorded at its start: replay under the session's strategies
    sends what it sent, under the default root and under another one. Replay showed
    `tool-results/<id>.txt`, 36 characters short on every call after a large output."""
    (workspace / "big.txt").write_text("many words\n" * 4_000)
    spills = [LargeOutputs(limit=5_000, preview_chars=200), MicroCompact(), Summarise()]
    for root in (None, tmp_path / "elsewhere"):
        big = reply(tool_use("read_file", {"path": "big.txt"}, id="toolu_big"))
        with FakeAnthropic(scripted_agent(big, reply(text("Read it.")))) as server:
            model = AnthropicModel(client=server.client(max_retries=0))
            with Session(workspace, model=model, strategies=spills, transcripts_root=root) as s:
                s.ask("Read big.txt.")
                s.ask("Anything else?")
            server.assert_no_rejections()
        shown = json.dumps(agent_requests(server)[-1]["messages"])
        assert str(s.directory / "tool-results" / "toolu_big.txt") in shown or (
            f".evo_magic/{s.session_id}/tool-results/toolu_big.txt" in shown
        )
        r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": spills})
        assert_reproduced(r, "recorded", server)
        assert_reproduced(r, "own", server)


def test_equal_strategies_set_again_keep_what_they_know_live_and_in_replay(workspace: Path):
    """Setting strategies equal to the running ones keeps them (and their notes) on both
    sides (`Compactor.configure`): TokenBudget says each mark once. Were the notes dropped on
    one side only, that side would tell the model a mark again."""
    budget = [TokenBudget(window_tokens=6_000, marks=(0.2, 0.4)), MicroCompact()]
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, strategies=budget) as s:
            s.ask(ASKS[0])
            s.configure(strategies=[TokenBudget(window_tokens=6_000, marks=(0.2, 0.4)),
                                    MicroCompact()])  # fmt: skip
            s.ask(ASKS[2])
        server.assert_no_rejections()
    told = json.dumps(agent_requests(server)[-1]["messages"]).count("[context budget]")
    assert told == 2  # each mark once, across the strategies set again
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": budget})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)
