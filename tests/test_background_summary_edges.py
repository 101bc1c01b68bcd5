"""summarise(background_at=...) at its edges, through the real SDK against the loopback fake:
a real SIGINT while the compaction waits for the worker leaves a valid history and a usable
session; and a summary prepared for a limit never reached is charged on a record, so the
recorded costs add up to what the session spent."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from support.fake_api import FakeAnthropic, validate_messages
from support.responders import offline_responder

from evo_magic import load_transcripts, replay
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import COMPACTED_HEADER
from evo_magic.events import CompactionFinished, CompactionStarted
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import Summarise

LIMIT = 16_000


def _session(workspace: Path, server: FakeAnthropic, background_at: float) -> Session:
    """A session through the fake whose summary is prepared from `background_at` of LIMIT."""
    model = AnthropicModel(client=server.client(max_retries=0))
    strategies = [Summarise(background_at=background_at)]
    return Session(
        workspace, model=model, policy=CompactPolicy(context_limit=LIMIT), strategies=strategies
    )


def test_an_interrupt_while_waiting_for_the_worker_keeps_the_session_usable(workspace: Path):
    answer = offline_responder()
    release = threading.Event()
    summaries: list[dict] = []

    def respond(body: dict) -> Any:
        if not body.get("tools"):  # a summary: held until the test lets it go
            summaries.append(body)
            release.wait(30)
        return answer(body)

    with FakeAnthropic(respond) as server:
        session = _session(workspace, server, 0.6)
        timers: list[threading.Timer] = []

        def interrupt_when_waiting(event: Any) -> None:
            if isinstance(event, CompactionStarted) and event.trigger == "auto" and not timers:
                # The compaction now waits for the held worker: interrupt it there.
                timers.append(threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)))
                timers[0].start()

        session.subscribe(interrupt_when_waiting)
        with pytest.raises(KeyboardInterrupt):
            session.ask("Survey the project.")
            session.ask("Survey it again.")
        assert timers, "the conversation never reached the limit"
        timers[0].join()
        assert len(summaries) == 1  # the worker's request, still held
        assert validate_messages(session.messages) is None
        before = session.messages
        assert not before[0]["content"][0].get("text", "").startswith(COMPACTED_HEADER)
        release.set()
        events: list[Any] = []
        session.subscribe(events.append)
        session.ask("Go on.")
        server.assert_no_rejections()
        session.close()
    done = [e for e in events if isinstance(e, CompactionFinished) and e.success]
    assert done, "the session compacted no more after the interrupt"
    assert validate_messages(session.messages) is None
    assert session.messages[0]["content"][0]["text"].startswith(COMPACTED_HEADER)


def _recorded_total(directory: Path) -> float:
    t = load_transcripts(directory)
    calls = float(t.calls["cost_usd"].sum())
    summaries = float(t.compactions["summary_cost_usd"].fillna(0).sum())
    return calls + summaries


def test_a_summary_prepared_for_a_limit_never_reached_is_charged_on_a_record(workspace: Path):
    with FakeAnthropic(offline_responder()) as server:
        # A limit the first ask passes 60% of, but never reaches.
        session = _session(workspace, server, 0.1)
        session.ask("Survey the project.")
        summaries = [b for b in server.accepted if not b.get("tools")]
        assert len(summaries) == 1, "no summary was prepared"
        assert session.state.compact_count == 0
        spent = session.cost_usd
        session.close()
    assert spent > 0
    assert math.isclose(_recorded_total(session.directory), spent, rel_tol=1e-9)
    t = load_transcripts(session.directory)
    unused = t.compactions[t.compactions["trigger"] == "background"]
    assert len(unused) == 1 and not unused["success"].iloc[0]
    assert unused["summary_input_tokens"].iloc[0] > 0
    # Replay charges it too, at the session's end, on its last call's row.
    policy = CompactPolicy(context_limit=LIMIT)
    strategies = {"early": [Summarise(background_at=0.1)], "plain": [Summarise()]}
    replayed = replay(t, strategies, policy=policy).calls
    charged = replayed.groupby("strategy")["summary_cost_usd"].sum()
    assert charged["plain"] == 0 and charged["early"] > 0
    early = replayed[replayed["strategy"] == "early"]
    assert early["summary_cost_usd"].iloc[-1] == charged["early"]  # the last row carries it


def test_a_summary_prepared_before_a_reset_is_charged_at_the_next_call(workspace: Path):
    with FakeAnthropic(offline_responder()) as server:
        with _session(workspace, server, 0.1) as session:
            events: list[Any] = []
            session.subscribe(events.append)
            session.ask("Survey the project.")
            session.reset()  # the history is emptied: no compaction can take the summary
            session.ask("Hello again.")
            charged = [e for e in events if isinstance(e, CompactionFinished)]
            assert [e.trigger for e in charged] == ["background"]
            assert charged[0].summary_usage.input_tokens > 0 and not charged[0].success
            spent = session.cost_usd
        server.assert_no_rejections()
    assert spent is not None
    assert math.isclose(_recorded_total(session.directory), spent, rel_tol=1e-9)


def test_a_session_never_closed_still_records_its_unused_summary_at_exit(tmp_path: Path):
    # A script that prepares a summary in the background and exits without closing its session.
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pathlib import Path
from support.fake_api import FakeAnthropic
from support.responders import offline_responder
from evo_magic.compact.policy import CompactPolicy
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import Summarise

workspace = Path({str(tmp_path)!r}) / "work"
workspace.mkdir()
(workspace / "notes.md").write_text("# notes\\n" + "a line of notes\\n" * 400)
server = FakeAnthropic(offline_responder()).__enter__()
model = AnthropicModel(client=server.client(max_retries=0))
session = Session(workspace, model=model, policy=CompactPolicy(context_limit={LIMIT}),
                  strategies=[Summarise(background_at=0.1)])
session.ask("Survey the project.")
print(session.directory)
print(repr(session.cost_usd))
"""
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    directory, spent = done.stdout.split("\n")[-3:-1]
    t = load_transcripts(Path(directory))
    unused = t.compactions[t.compactions["trigger"] == "background"]
    assert len(unused) == 1 and not unused["success"].iloc[0]
    assert math.isclose(_recorded_total(Path(directory)), float(spent), rel_tol=1e-9)
