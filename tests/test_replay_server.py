"""Replay of the API's own compaction and context editing: sessions recorded through the real SDK
against the loopback fake (which applies the edits as the API does) replay as recorded, and a
session recorded without them replays under them with a modelled server that compacts and clears
where the fake did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support import fake_context
from support.fake_api import FakeAnthropic, estimate_input_tokens
from support.responders import offline_responder
from test_replay_fidelity import agent_requests, replayed, sent

from evo_magic import load_transcripts, replay
from evo_magic.analysis.replay import ReplayedCall
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import call_cost, price_table
from evo_magic.demo import make_demo_workspace
from evo_magic.events import MicroCompacted
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import ServerClearToolUses, ServerCompact, ServerSummarise
from evo_magic.usage import Usage

MODEL = "claude-sonnet-4-6"
ASKS = (
    "Survey this project: what does it do, and where are the TODOs?",
    "Read the CSV once more and list the odd rows.",
    "Now look again and double-check.",
    "Finish up.",
)
COMPACT = ServerCompact(trigger_tokens=50_000)
CLEAR = ServerClearToolUses(trigger_tokens=20_000, keep=2, clear_tool_inputs=True)


def record(tmp: Path, strategies: list[Any]) -> tuple[Path, list[dict], list[dict]]:
    """The asks on a sample project with a large CSV (about 60k tokens by the end), through the
    real SDK against the fake; the session's folder, the agent's requests as the fake accepted
    them, and the fake's replies' usage and applied edits per request."""
    workspace = make_demo_workspace(tmp, rows=3000)
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(MODEL, client=server.client(max_retries=0))
        with Session(workspace, model=model, strategies=strategies) as s:
            for ask in ASKS:
                s.ask(ask)
        server.assert_no_rejections()
    return s.directory, agent_requests(server), server.accepted


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[dict]]]:
    made = {}
    for name, strategies in (("plain", []), ("compact", [COMPACT]), ("clear", [CLEAR])):
        folder, requests, _ = record(tmp_path_factory.mktemp(name), strategies)
        made[name] = (folder, requests)
    return made


def rows(r: Any, label: str) -> pd.DataFrame:
    return r.calls[r.calls["strategy"] == label].reset_index(drop=True)


def test_a_server_compacted_session_replays_its_recorded_blocks_exactly(sessions):
    """Under "recorded", every request's characters and breakpoints are what the fake received,
    the compaction block included byte for byte; the compacting call is its message iteration
    and its recorded compaction iteration is that call's summary cost."""
    folder, requests = sessions["compact"]
    t = load_transcripts(folder)
    r = replay(t, {"recorded": "recorded"})
    expected = [sent(body) for body in requests]
    assert replayed(r.calls, "recorded") == expected
    first = next(i for i, body in enumerate(requests) if _has_block(body["messages"]))
    assert first > 0  # the session did compact, and sent its block back afterwards
    mine = rows(r, "recorded")
    compacting = mine.iloc[first - 1]
    done = t.compactions[t.compactions["trigger"] == "server"].iloc[0]
    iteration = Usage(
        input_tokens=int(done.summary_input_tokens),
        output_tokens=int(done.summary_output_tokens),
        cache_creation_input_tokens=int(done.summary_cache_creation_input_tokens),
        cache_read_input_tokens=int(done.summary_cache_read_input_tokens),
    )
    priced = call_cost(iteration, MODEL, price_table(None))
    assert priced is not None and compacting["summary_cost_usd"] == pytest.approx(priced.total)
    assert compacting["sent_tokens"] >= COMPACT.trigger_tokens > compacting["context_tokens"]
    assert compacting["compactions_so_far"] == 1 and not mine["server_modelled"].any()


def test_a_server_cleared_session_replays_as_sent_with_the_tokens_the_server_counted(sessions):
    folder, requests = sessions["clear"]
    t = load_transcripts(folder)
    r = replay(t, {"recorded": "recorded"})
    assert replayed(r.calls, "recorded") == [sent(body) for body in requests]
    mine = rows(r, "recorded")
    reported = t.calls.sort_values("call")
    counted = reported[["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"]]
    assert list(mine["context_tokens"]) == list(counted.sum(axis=1))
    assert (mine["sent_tokens"] > mine["context_tokens"]).any()  # the server cleared


def test_server_compact_replayed_compacts_where_the_prompt_crosses_the_trigger(sessions):
    """A session recorded without it, replayed under ServerCompact: the call whose modelled
    prompt first reaches the trigger compacts (the call at which the live session, the same
    script through the fake, compacted), its cost includes the compaction iteration, and the
    history from then on is the block and what follows."""
    folder, _ = sessions["plain"]
    _, compacted_live = sessions["compact"]
    seen: dict[int, list[dict]] = {}

    def observe(call: ReplayedCall) -> None:
        if call.strategy == "server-compact" and call.call is not None:
            seen[call.call] = [dict(m) for m in call.messages]

    r = replay(folder, {"none": [], "server-compact": [COMPACT]}, on_call=observe)
    none, server = rows(r, "none"), rows(r, "server-compact")
    crossing = int((none["context_tokens"] >= COMPACT.trigger_tokens).idxmax())
    live = next(i for i, body in enumerate(compacted_live) if _has_block(body["messages"])) - 1
    assert crossing == live
    before = server.iloc[:crossing]
    assert list(before["context_tokens"]) == list(none["context_tokens"].iloc[:crossing])
    assert (before["compactions_so_far"] == 0).all() and server["server_modelled"].all()
    row = server.iloc[crossing]
    assert row["compactions_so_far"] == 1 and row["sent_tokens"] >= COMPACT.trigger_tokens
    # The message iteration reads the block alone: the stand-in summary (2,000 tokens by
    # default) besides the tools and system prompt (the first call's prompt, about).
    overhead = int(none["context_tokens"].iloc[0])
    assert 2_000 < row["context_tokens"] - overhead + 50 < 2_200
    # The compaction iteration reads the whole prompt (from the cache at best) and writes the
    # stand-in summary: its cost lies between those two readings.
    summary = int(r.summaries.set_index("strategy").loc["server-compact", "stand-in"])
    assert summary == 1
    prices = price_table(None)
    out = 2_000  # the default stand-in's size, in tokens
    low = call_cost(Usage(cache_read_input_tokens=row["sent_tokens"]), MODEL, prices)
    high = call_cost(
        Usage(cache_creation_input_tokens=row["sent_tokens"], output_tokens=out * 2), MODEL, prices
    )
    assert low is not None and high is not None
    assert low.total < row["summary_cost_usd"] < high.total
    after = seen[int(row["call"]) + 1]
    assert after[0]["role"] == "assistant" and after[0]["content"][0]["type"] == "compaction"
    assert after[0]["content"][1:]  # the reply follows the block in the same message
    assert r.totals.set_index("strategy").loc["server-compact", "peak_context_tokens"] < (
        none["context_tokens"].max()
    )


def test_server_clear_tool_uses_replayed_clears_what_the_fake_clears(sessions):
    """Per call, the prompt replay's modelled server gives the model under ServerClearToolUses
    is the one the fake makes of the same messages with the same edit, and the replayed
    clearings report what the fake reported to the live session that ran it."""
    folder, _ = sessions["plain"]
    prompts: dict[int, list[dict]] = {}
    sent_views: dict[int, list[dict]] = {}
    applied: dict[int, list[dict]] = {}

    def observe(call: ReplayedCall) -> None:
        if call.strategy == "clear" and call.call is not None:
            prompts[call.call] = [dict(m) for m in call.messages]
            applied[call.call] = [e.applied for e in call.changes if isinstance(e, MicroCompacted)]

    def views(call: ReplayedCall) -> None:
        if call.call is not None:
            sent_views[call.call] = [dict(m) for m in call.messages]

    replay(folder, {"clear": [CLEAR]}, on_call=observe)
    replay(folder, {"none": []}, on_call=views)
    edit = dict(CLEAR.server_edit().edit or {})
    cleared_calls = 0
    for call, view in sent_views.items():
        body = {"model": MODEL, "max_tokens": 1, "messages": view,
                "context_management": {"edits": [edit]}}  # fmt: skip
        by_fake = fake_context.plan(body, estimate_input_tokens).body["messages"]
        assert _cleared_ids(prompts[call]) == _cleared_ids(by_fake), call
        cleared_calls += bool(_cleared_ids(by_fake))
    assert cleared_calls >= len(sent_views) // 2
    # What the fake told the live session it cleared, call by call.
    live_counts = _live_cleared_counts(load_transcripts(sessions["clear"][0]))
    assert any(applied.values()) and live_counts
    for call, edits in applied.items():
        assert [e["cleared_tool_uses"] for e in edits] == live_counts.get(call, []), call


def _has_block(messages: list[dict]) -> bool:
    return any(
        isinstance(m["content"], list) and any(b.get("type") == "compaction" for b in m["content"])
        for m in messages
    )


def _cleared_ids(messages: list[dict]) -> set[str]:
    return {
        b["tool_use_id"]
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result" and b.get("content") == fake_context.CLEARED_PLACEHOLDER
    }


def _live_cleared_counts(t: Any) -> dict[int, list[int]]:
    """Per call, the `cleared_tool_uses` the fake reported to the live session."""
    import json

    found: dict[int, list[int]] = {}
    for path in {str(f) for f in t.calls["file"]}:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("kind") == "model_response" and record.get("applied_edits"):
                counts = [e["cleared_tool_uses"] for e in record["applied_edits"]]
                found[int(record["call"])] = counts
    return found


def test_server_summarise_answers_the_recorded_compact_with_a_modelled_block(tmp_path: Path):
    """A `%compact` the user made (here with the seed's Summarise) is asked of every setting at
    the same place: under ServerSummarise the modelled server answers it with its block (and
    the pending request), priced as a request that reads the conversation."""
    workspace = make_demo_workspace(tmp_path / "work")
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(MODEL, client=server.client(max_retries=0))
        with Session(workspace, model=model) as s:
            s.ask(ASKS[0])
            assert s.compact("the TODOs").success
            s.ask(ASKS[2])
        server.assert_no_rejections()
    seen: dict[int, list[dict]] = {}

    def observe(call: ReplayedCall) -> None:
        if call.call is not None:
            seen[call.call] = [dict(m) for m in call.messages]

    r = replay(s.directory, {"server-summarise": [ServerSummarise()]}, on_call=observe)
    mine = rows(r, "server-summarise")
    assert mine["server_modelled"].all()
    compacted = mine[mine["compactions_so_far"] == 1]
    assert len(compacted) and (mine["compactions_so_far"] <= 1).all()
    first = compacted.iloc[0]
    assert first["summary_cost_usd"] > 0
    block = seen[int(first["call"])][0]["content"][0]
    assert block["type"] == "compaction" and block["content"]


def test_a_model_the_table_says_lacks_compaction_falls_back_or_is_skipped(sessions):
    """As live: priced as a model without server compaction (claude-sonnet-4-5 in the table),
    ServerCompact hands over to its fallback, or without one the setting is skipped, saying
    why."""
    from evo_magic.analysis.replay import ReplayWarning
    from evo_magic.strategies import Summarise

    folder, _ = sessions["plain"]
    policy = CompactPolicy(context_limit=150_000)
    with pytest.warns(ReplayWarning, match="does not offer server-compact"):
        r = replay(
            folder,
            {
                "fallback": [ServerCompact(fallback=Summarise())],
                "bare": [ServerCompact()],
                "summarise": [Summarise()],
            },
            model="claude-sonnet-4-5",
            policy=policy,
        )
    assert set(r.calls["strategy"]) == {"fallback", "summarise"}
    fallback, summarise = rows(r, "fallback"), rows(r, "summarise")
    assert fallback["compactions_so_far"].max() >= 1
    assert list(fallback["context_tokens"]) == list(summarise["context_tokens"])
    assert not fallback["server_modelled"].any()


def test_a_compaction_block_not_in_the_apis_shape_is_left_as_its_placeholder(
    sessions, tmp_path: Path
):
    """The session file is data: a recorded compaction block with a field the API does not
    have, or a signature that is not text, is not sent back; replay goes on with the frames'
    placeholder (the characters then differ from what was sent, nothing fails)."""
    import json
    import shutil

    source, requests = sessions["compact"]
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    path = folder / "session.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    tampered = 0
    for n, line in enumerate(lines):
        record = json.loads(line)
        content = (record.get("message") or {}).get("content")
        if isinstance(content, list) and any(b.get("type") == "compaction" for b in content):
            for block in content:
                if block.get("type") == "compaction":
                    block["signature"] = 12345 if tampered % 2 else block["signature"]
                    block["__class__"] = "os.system" if not tampered % 2 else None
                    if block["__class__"] is None:
                        del block["__class__"]
            lines[n] = json.dumps(record)
            tampered += 1
    assert tampered >= 2
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    prompts: list[list[dict]] = []
    r = replay(
        folder,
        {"recorded": "recorded"},
        on_call=lambda call: prompts.append([dict(m) for m in call.messages]),
    )
    got = replayed(r.calls, "recorded")
    expected = [sent(body) for body in requests]
    assert len(got) == len(expected)
    first = next(i for i, body in enumerate(requests) if _has_block(body["messages"]))
    assert got[:first] == expected[:first] and got[first] != expected[first]
    assert not any(_has_block(messages) for messages in prompts)
    assert prompts[first][0]["content"][0] == {"type": "text", "text": "[compaction]"}
