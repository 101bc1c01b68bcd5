"""What the server strategies leave on record, through the real SDK against the loopback fake:
the strategy a server compaction is recorded under, the tokens it read, the clearing edits of a
call in the `calls` frame, a fallback that runs when the server makes no summary, and sessions
whose strategies were recorded by older versions replaying as recorded."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
from support.fake_api import FakeAnthropic, reply, text, tool_use
from test_server_strategies import CHUNK, grow, of, session

from evo_magic import load_transcripts, replay
from evo_magic.events import CompactionFinished, ModelResponded
from evo_magic.session import Session
from evo_magic.strategies import ServerCompact, ServerSummarise, Summarise
from evo_magic.strategies.registry import make_strategy


def test_a_server_compaction_is_recorded_under_the_strategy_that_compacts(
    fake: FakeAnthropic, workspace: Path
):
    strategies = [
        make_strategy("server-clear-tool-uses"),
        make_strategy("server-compact(trigger_tokens=50000)"),
    ]
    s = session(workspace, fake, strategies)
    done = of(CompactionFinished, grow(s, fake, 4))
    assert [(e.strategy, e.trigger, e.success) for e in done] == [
        ("server-compact", "server", True)
    ]
    s.close()
    frame = load_transcripts(s.directory).compactions
    assert list(zip(frame["strategy"], frame["ran"], strict=True)) == [
        ("server-compact", "server-compact")
    ]


def test_a_server_compactions_before_is_what_its_iteration_read_exactly(
    fake: FakeAnthropic, workspace: Path
):
    s = session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    grow(s, fake, 3)
    fake.queue(reply(text("compacted")))
    done = of(CompactionFinished, s.ask(f"Part 3: {CHUNK}").events)[0]
    read = done.summary_usage.context_tokens
    assert read > 50_000  # the fake's compaction iteration: what the server read
    assert (done.before.tokens, done.before.tokens_exact) == (read, True)
    s.close()
    row = load_transcripts(s.directory).compactions.iloc[0]
    assert (row.before_tokens, row.before_tokens_exact) == (read, True)


def test_the_calls_frame_has_each_calls_applied_edits(fake: FakeAnthropic, workspace: Path):
    for n in range(4):
        (workspace / f"doc{n}.txt").write_text(f"line {n}\n" * 400)
    fake.queue(*[reply(tool_use("read_file", {"path": f"doc{n}.txt"})) for n in range(4)])
    fake.queue(reply(text("done")))
    s = session(workspace, fake, [make_strategy("server-clear-tool-uses(trigger_tokens=1000)")])
    responded = of(ModelResponded, s.ask("Read the docs.").events)
    s.close()
    calls = load_transcripts(s.directory).calls.sort_values("call")
    expected = [[dict(e) for e in call.applied_edits] or None for call in responded]
    assert any(expected) and not all(expected)  # some calls cleared, some did not
    found = [None if pd.isna(v) else json.loads(v) for v in calls["applied_edits"]]
    assert found == expected
    assert found[-1][0]["type"] == "clear_tool_uses_20250919"


def test_server_summarise_falls_back_when_the_reply_holds_no_compaction_block(workspace: Path):
    """The offline stand-in answers the summary request with text, as a compatible endpoint
    that ignores the `compaction` parameter does: the fallback runs and says what it stood in
    for."""
    s = Session(workspace, model="offline", strategies=[])
    s.ask("Survey the project.")
    done = s.compact(strategy=ServerSummarise(fallback=Summarise()))
    assert done.success, done.error
    assert (done.strategy, done.fallback_for) == ("summarise", "server-summarise")
    assert s.history.messages[0]["role"] == "user"  # the client summary, not a block


def test_a_fallback_recorded_as_its_repr_by_older_versions_replays_as_recorded(workspace: Path):
    """Versions before strategies were recorded as specs wrote a fallback as its repr
    (`Summarise(when='over_limit', ...)`); such a session replays as recorded, nothing
    imported."""
    with FakeAnthropic() as fake:
        strategies: list[Any] = [ServerCompact(trigger_tokens=50_000, fallback=Summarise())]
        s = session(workspace, fake, strategies, model="claude-compatible-1")
        fake.queue(reply(text("one")), reply(text("A summary.")), reply(text("two")))
        s.ask("First: " + "the ledger balances. " * 100)
        done = s.compact()
        assert done.success, done.error
        s.ask("Second.")
        s.close()
    path = s.directory / "session.jsonl"
    lines = path.read_text().splitlines()
    old = json.dumps(repr(Summarise()))
    written = [line.replace('"fallback":"summarise"', f'"fallback":{old}') for line in lines]
    assert written != lines
    path.write_text("\n".join(written) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a strategy it could not rebuild is a warning
        prices = {"claude-compatible-1": {"input": 3.0, "output": 15.0}}
        t = load_transcripts(s.directory, prices=prices)
        r = replay(t, {"recorded": "recorded"}, prices=prices)
    assert len(r.calls) == 2  # the two asks (the summary is not a call)
    assert int(r.totals.set_index("strategy").loc["recorded", "compactions"]) == 1
