"""A way back to what was compacted (issue 34, part two): strategies that offer the model a
tool (`recall`, `todo`), through the real SDK against the loopback fake: the tools are in
every request in a fixed order, the round trips work, the placeholders point to `recall`,
the todo list survives compactions word for word, and replay (as recorded and under the
strategies themselves) sends what the live session sent, counting a tool's definition where
the recorded session did not offer it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fake_api import FakeAnthropic, reply, text, tool_use
from test_cheap_strategies import live, results
from test_replay_fidelity import agent_requests, assert_reproduced, scripted_agent

from evo_magic import load_transcripts, replay
from evo_magic.analysis.retention import retention
from evo_magic.compact.policy import CompactPolicy
from evo_magic.measure import to_json
from evo_magic.models import AnthropicModel
from evo_magic.secrets import add_secret
from evo_magic.session import Session
from evo_magic.strategies import MicroCompact, Recall, Summarise, Todo, default_pipeline
from evo_magic.strategies.registry import make_strategy
from evo_magic.strategies.todo import TODO_PREFIX
from evo_magic.tools import default_tools, offered_tools

BASE = [tool.name for tool in default_tools()]
READS = ("inventory.py", "README.md", "samples.csv", "inventory.py")


def call(name: str, tool_input: dict, id: str):
    return reply(tool_use(name, tool_input, id=id))


def tool_names(body: dict) -> list[str]:
    return [tool["name"] for tool in body["tools"]]


# -- strategies that offer a tool ---------------------------------------------------------------


def test_a_strategys_tools_follow_the_defaults_in_strategy_order_once_each():
    tools = offered_tools(default_tools(), [Todo(), MicroCompact(), Recall(), Todo(max_chars=9)])
    assert [t.name for t in tools] == [*BASE, "todo", "recall"]

    class Bad:
        name, when = "bad", "every_call"

        def compact(self, messages, ctx):
            return None

        def tools(self):
            return ["recall"]

    with pytest.raises(TypeError, match="must return Tool values"):
        offered_tools(default_tools(), [Bad()])


def test_configuring_a_tool_strategy_adds_its_tool_from_the_next_call_and_records_it(
    workspace: Path,
):
    with FakeAnthropic(scripted_agent()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model) as s:
            s.ask("Hello.")
            s.configure(strategies=[*default_pipeline(), Recall()])
            s.ask("Again.")
            s.configure(strategies=default_pipeline())
            s.ask("Once more.")
        server.assert_no_rejections()
    names = [tool_names(body) for body in agent_requests(server)]
    assert names == [BASE, [*BASE, "recall"], BASE]
    records = [json.loads(line) for line in (s.directory / "session.jsonl").open()]
    told = [r["tools"] for r in records if r["kind"] in ("session_start", "strategies")]
    assert told == [BASE, [*BASE, "recall"], BASE]


# -- recall -------------------------------------------------------------------------------------


def test_recall_reads_a_compacted_result_again_and_the_placeholder_says_so(workspace: Path):
    strategies = [Recall(page_chars=300), MicroCompact(keep_recent=1, cache_aware=False)]
    original = (workspace / "inventory.py").read_text()
    script = [
        call("read_file", {"path": "inventory.py"}, "toolu_inv"),
        call("read_file", {"path": "README.md"}, "toolu_readme"),
        call("recall", {"query": "def "}, "toolu_q"),
        call("recall", {"query": "inventory samples", "ranked": True}, "toolu_rank"),
        call("recall", {"id": "toolu_inv", "page": 1}, "toolu_page"),
        call("recall", {"id": "toolu_inv", "page": 999}, "toolu_bad"),
    ]
    s, server = live(workspace, strategies, script, ["Read the code."])
    bodies = agent_requests(server)
    assert all(tool_names(b) == [*BASE, "recall"] for b in bodies)
    last = results(bodies[-1])
    # The replaced read names its original and the tool that reads it.
    assert last["toolu_inv"].endswith('use recall(id="toolu_inv") to read it again.]')
    shown: dict[str, str] = {}
    for body in bodies:  # each result as the model first saw it
        shown = {**results(body), **shown}
    # The literal search finds the file's code, and says the context holds only its placeholder.
    assert "- id=toolu_inv (read_file" in shown["toolu_q"] and "; compacted)" in shown["toolu_q"]
    assert shown["toolu_rank"].splitlines()[1].startswith("- id=")
    page = shown["toolu_page"]
    assert page.startswith("[toolu_inv: read_file") and "page 1 of" in page
    assert page.split("\n", 1)[1] == original[:300]  # the original, not the placeholder
    assert "`page` must be from 1 to" in shown["toolu_bad"]
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": strategies})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)


def test_recall_finds_what_a_full_compaction_took_out_and_redacts_credentials(workspace: Path):
    secret = "sk-ant-recall-test-0123456789abcdef"
    add_secret(secret)
    filler = "".join(f"line {i}: the service starts, then waits\n" for i in range(60))
    (workspace / "notes.txt").write_text(f"the deploy key is {secret}; the port is 8443\n{filler}")
    script = [call("read_file", {"path": "notes.txt"}, "toolu_notes"), reply(text("Read."))]
    after = [call("recall", {"query": "port is"}, "toolu_find")]
    with FakeAnthropic(scripted_agent(*script, *after)) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, strategies=[Recall(), Summarise()]) as s:
            s.ask("Read the notes.")
            assert s.compact().success
            assert "8443" not in json.dumps(s.messages)  # summarised by the offline model
            s.ask("Which port was it?")
        server.assert_no_rejections()
    found = results(agent_requests(server)[-1])["toolu_find"]
    assert "id=toolu_notes" in found and "8443" in found and "; gone)" in found  # summarised
    assert secret not in json.dumps(agent_requests(server))


def test_recall_refuses_an_unknown_id_and_a_call_with_nothing_to_do(workspace: Path):
    script = [
        call("recall", {"id": "toolu_nowhere"}, "toolu_a"),
        call("recall", {}, "toolu_b"),
    ]
    s, server = live(workspace, [Recall()], script, ["Look back."])
    last = results(agent_requests(server)[-1])
    assert "no original 'toolu_nowhere'" in last["toolu_a"]
    assert "give either `query`" in last["toolu_b"]


# -- todo ---------------------------------------------------------------------------------------


def test_the_todo_list_is_carried_verbatim_across_every_compaction(workspace: Path):
    first = "- [x] read inventory.py\n- [ ] fix the total"
    second = "- [x] read inventory.py\n- [x] fix the total\n- [ ] write a test"
    strategies = [Todo(), Summarise()]
    script = [
        call("todo", {"todos": first}, "toolu_t1"),
        call("read_file", {"path": "inventory.py"}, "toolu_r"),
        reply(text("Planned and read.")),
        call("todo", {"todos": second}, "toolu_t2"),
    ]
    with FakeAnthropic(scripted_agent(*script)) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, strategies=strategies) as s:
            s.ask("Plan, then read.")
            assert s.compact().success
            opening = s.messages[0]["content"]
            s.ask("Go on.")
            assert s.compact().success
            again = s.messages[0]["content"]
            s.ask("And now?")
        server.assert_no_rejections()
    texts = [block["text"] for block in opening if block["type"] == "text"]
    assert TODO_PREFIX + first in texts
    texts = [block["text"] for block in again if block["type"] == "text"]
    assert TODO_PREFIX + second in texts and TODO_PREFIX + first not in texts
    last = json.dumps(agent_requests(server)[-1]["messages"])
    assert json.dumps(TODO_PREFIX + second)[1:-1] in last
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": strategies})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)


def test_a_todo_list_over_its_bound_is_refused_and_not_carried(workspace: Path):
    script = [call("todo", {"todos": "x" * 50}, "toolu_t")]
    s, server = live(workspace, [Todo(max_chars=20), Summarise()], script, ["Plan."])
    assert "over the 20 it may hold" in results(agent_requests(server)[-1])["toolu_t"]
    with Session(workspace, model="offline", strategies=[Todo(max_chars=20), Summarise()]) as t:
        t.ask("Plan.")
        t.compact()
        assert TODO_PREFIX not in json.dumps(t.messages)


# -- replay models the tools' presence ----------------------------------------------------------


def test_replay_counts_an_offered_tools_definition_in_every_request(workspace: Path):
    script = [call("read_file", {"path": p}, f"toolu_{i}") for i, p in enumerate(["a", "b"])]
    s, server = live(workspace, [], script, ["Read."])
    r = replay(load_transcripts(s.directory), {"none": [], "recall": [Recall()]})
    sent = r.calls.pivot(index="call", columns="strategy", values="sent_tokens")
    added = (sent["recall"] - sent["none"]).tolist()
    definition = len(to_json(Recall().tools()[0].definition()))
    assert len(set(added)) == 1  # the same definition, in every request
    assert definition / 6 < added[0] < definition / 2  # its characters, in tokens
    assert not r.calls[r.calls["strategy"] == "recall"]["tokens_exact"].any()


def test_the_tool_strategies_are_registered_by_name():
    assert make_strategy("recall(max_hits=3)") == Recall(max_hits=3)
    assert make_strategy("todo") == Todo()
    with pytest.raises(ValueError, match="max_hits"):
        Recall(max_hits=0)


def test_retention_runs_over_the_replay_of_each_tool_strategy(workspace: Path):
    script = [call("read_file", {"path": p}, f"toolu_{i}") for i, p in enumerate(READS)]
    s, _ = live(workspace, [], script, ["Read the project files."])
    settings = {
        "none": [],
        "recall": [Recall()],
        "todo": [Todo(), Summarise()],
        "handoff": [make_strategy("handoff")],
    }
    measured = retention(
        load_transcripts(s.directory), settings, policy=CompactPolicy(context_limit=3_000)
    )
    totals = measured.totals[measured.totals["kind"] == "all"].set_index("strategy")
    # recall edits nothing: every fact stays; handoff (never called) summarises over the limit.
    assert totals.loc["recall", "kept_share"] == totals.loc["none", "kept_share"] == 1.0
    assert totals.loc["handoff", "kept_share"] < 1.0
    assert totals.loc["recall", "cost_usd"] > totals.loc["none", "cost_usd"]  # its definition


def test_replay_without_a_recorded_tool_strategy_drops_its_definition(workspace: Path):
    script = [call("read_file", {"path": p}, f"toolu_{i}") for i, p in enumerate(READS)]
    s, server = live(workspace, [Recall()], script, ["Read."])
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "none": []})
    sent = r.calls.pivot(index="call", columns="strategy", values="sent_tokens")
    dropped = (sent["recorded"] - sent["none"]).tolist()
    definition = len(to_json(Recall().tools()[0].definition()))
    assert len(set(dropped)) == 1 and definition / 6 < dropped[0] < definition / 2
    assert_reproduced(r, "recorded", server)
