"""`handoff`: the model writes the state the next context needs and the conversation restarts
from it (the user's messages verbatim, the handoff, the newest batch) with no summariser call;
it is reminded at a share of the limit and, never handing off, is summarised instead. Through
the real SDK against the loopback fake; replay sends what the live session sent."""

from __future__ import annotations

import json
from pathlib import Path

from support.fake_api import FakeAnthropic, reply, text, tool_use
from test_cheap_strategies import live, results
from test_replay_fidelity import agent_requests, assert_reproduced

from evo_magic import load_transcripts, replay
from evo_magic.compacted import COMPACTED_HEADER, REMINDER_PREFIX
from evo_magic.strategies import Handoff
from evo_magic.strategies.handoff import HANDOFF_HEADER, STATE_PREFIX, USER_PREFIX
from evo_magic.strategies.registry import make_strategy

STATE = "Goal: report the expired samples. Done: read inventory.py. Next: run the report."


def read(path: str, id: str):
    return reply(tool_use("read_file", {"path": path}, id=id))


def summary_requests(server: FakeAnthropic) -> list[dict]:
    return [body for body in server.requests if not body.get("tools")]


def test_a_handoff_restarts_the_context_from_the_users_words_and_the_state(workspace: Path):
    script = [
        read("inventory.py", "toolu_1"),
        reply(text("Read it.")),
        read("samples.csv", "toolu_2"),
        reply(tool_use("handoff", {"state": STATE}, id="toolu_h")),
    ]
    strategies = [Handoff()]
    asks = ["Read inventory.py.", "Now read the samples, then hand off."]
    s, server = live(workspace, strategies, script, asks)
    bodies = agent_requests(server)
    assert all([t["name"] for t in b["tools"]][-1] == "handoff" for b in bodies)
    after = bodies[-1]["messages"]
    opening = [block["text"] for block in after[0]["content"]]
    assert opening == [
        HANDOFF_HEADER,
        USER_PREFIX + asks[0],
        USER_PREFIX + asks[1],
        STATE_PREFIX + STATE,
    ]
    assert after[1]["content"][0]["name"] == "handoff" and len(after) == 3
    assert "toolu_h" in results(bodies[-1]) and "toolu_2" not in results(bodies[-1])
    assert summary_requests(server) == []  # no summariser call
    records = [json.loads(line) for line in (s.directory / "session.jsonl").open()]
    done = [r for r in records if r["kind"] == "compaction"]
    assert [r["strategy"] for r in done] == ["handoff"] and done[0]["summary"] == ""
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": strategies})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)


def test_the_model_is_reminded_once_and_summarised_when_it_never_hands_off(workspace: Path):
    script = [read(p, f"toolu_{i}") for i, p in enumerate(["inventory.py"] * 6)]
    strategies = [Handoff(remind_at=0.5)]
    s, server = live(workspace, strategies, script, ["Read it again and again."],
                     context_limit=6_000)  # fmt: skip
    bodies = agent_requests(server)
    reminded = [
        i for i, body in enumerate(bodies)
        if REMINDER_PREFIX + "The context is at" in json.dumps(body["messages"][-1])
    ]  # fmt: skip
    # Once per fill: each reminder is in a context that starts differently (a new fill).
    openings = {json.dumps(bodies[i]["messages"][0]) for i in reminded}
    assert reminded and len(openings) == len(reminded)
    # Over the limit without a handoff: the fallback summarised, as summarise does.
    assert len(summary_requests(server)) >= 1
    assert any(COMPACTED_HEADER in json.dumps(body["messages"][0]) for body in bodies)
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": strategies})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)


def test_an_empty_handoff_is_refused_and_changes_nothing(workspace: Path):
    script = [reply(tool_use("handoff", {"state": "  "}, id="toolu_h"))]
    s, server = live(workspace, [Handoff()], script, ["Hand off."])
    last = agent_requests(server)[-1]
    assert "`state` must be the handoff" in results(last)["toolu_h"]
    assert last["messages"][0]["content"][0]["text"] == "Hand off."


def test_handoff_is_registered_with_its_parameters():
    assert make_strategy("handoff(remind_at=0.7)") == Handoff(remind_at=0.7)
