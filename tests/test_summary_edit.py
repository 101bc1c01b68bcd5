"""Reading and editing a summary before it applies: `Session.propose_summary`, `Session.compact(
summary=...)`, the compaction record, `Transcripts.compactions`, and the `%compact --edit`,
`--apply`, `--apply-file` and `%agent summaries` magics in a real InteractiveShell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import offline_responder
from fake_api import FakeAnthropic, reply, text

from evo_magic.analysis import load_transcripts
from evo_magic.compact.format import COMPACTED_HEADER, FOCUS_PREFIX
from evo_magic.compact.policy import CompactPolicy
from evo_magic.measure import to_json
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import SlidingWindow

PROPOSED = "PROPOSED: the survey found inventory.py and a notes file."
EDITED = "EDITED by hand: inventory.py has two TODOs; keep the notes file."


def is_summary(body: dict) -> bool:
    return not body.get("tools")


def respond_with_summary(body: dict) -> object:
    """The offline script for agent calls; summarisation calls get PROPOSED."""
    if is_summary(body):
        return reply(text(PROPOSED))
    return offline_responder()(body)


def session_on(server: FakeAnthropic, workspace: Path) -> Session:
    model = AnthropicModel(client=server.client(max_retries=0))
    return Session(workspace, model=model, policy=CompactPolicy(context_limit=100_000))


def records(session: Session, kind: str) -> list[dict]:
    session.transcript.sync()
    lines = session.transcript.path.read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("kind") == kind]


def test_a_proposal_is_the_summary_compact_would_make_and_changes_nothing(workspace: Path):
    focus = "the {TODO} lines and $HOME"
    with FakeAnthropic(respond_with_summary) as server:
        session = session_on(server, workspace)
        session.ask("Survey the project.")
        before = to_json(session.messages)
        proposal = session.propose_summary(focus)
        assert to_json(session.messages) == before, "proposing changes no history"
        assert session.proposal == proposal
        assert (proposal.text, proposal.focus, proposal.strategy) == (PROPOSED, focus, "summarise")
        assert proposal.after.messages == 1 < proposal.before.messages
        event = session.compact(focus)
        server.assert_no_rejections()
    proposed_body, compact_body = [b for b in server.accepted if is_summary(b)]
    assert proposed_body == compact_body, "the very request compact() sends"
    assert event.success and not event.summary_edited and event.summary_proposed is None
    assert session.proposal is None, "a compaction ends the proposal"


def test_an_edited_summary_applies_checked_and_is_recorded_with_the_original(workspace: Path):
    focus = "the TODOs"
    with FakeAnthropic(respond_with_summary) as server:
        session = session_on(server, workspace)
        session.ask("Survey the project.")
        proposal = session.propose_summary(focus)
        calls = len(server.accepted)
        event = session.compact(focus, summary=EDITED)
        assert len(server.accepted) == calls, "a given summary makes no model call"
        session.ask("Go on.")
        server.assert_no_rejections()
    assert event.success and event.summary == EDITED
    assert event.summary_edited and event.summary_proposed == proposal.text == PROPOSED
    # The history the next call sent: the seed's layout around the edited text.
    first = server.accepted[-1]["messages"][0]["content"][0]["text"]
    assert first.startswith(COMPACTED_HEADER) and EDITED in first and PROPOSED not in first
    assert f"{FOCUS_PREFIX}{focus}" in first
    assert session.state.last_summary == EDITED
    (record,) = records(session, "compaction")
    assert record["summary"] == EDITED and record["summary_proposed"] == PROPOSED
    assert record["summary_edited"] is True
    frame = load_transcripts(session.directory).compactions
    row = frame.iloc[0]
    assert (row.summary, row.summary_proposed, bool(row.summary_edited)) == (
        EDITED,
        PROPOSED,
        True,
    )


def test_a_summary_written_without_a_proposal_or_after_the_history_changed(workspace: Path):
    with FakeAnthropic(respond_with_summary) as server:
        session = session_on(server, workspace)
        session.ask("Survey the project.")
        session.propose_summary()
        session.ask("Check the notes.")
        assert session.proposal is None, "the history changed: the proposal is stale"
        event = session.compact(summary=EDITED)
        server.assert_no_rejections()
    assert event.success and event.summary_edited and event.summary_proposed is None


@pytest.mark.parametrize(
    ("summary", "strategy", "why"),
    [
        ("   \n", None, "summarise: the given summary is empty"),
        (EDITED, SlidingWindow(keep=1), "sliding-window: it makes no summary"),
    ],
)
def test_a_given_summary_that_cannot_apply_keeps_the_history(
    workspace: Path, summary: str, strategy: object, why: str
):
    with FakeAnthropic(respond_with_summary) as server:
        session = session_on(server, workspace)
        session.ask("Survey the project.")
        session.ask("Check the notes.")
        before = to_json(session.messages)
        event = session.compact(summary=summary, strategy=strategy)
        server.assert_no_rejections()
    assert not event.success and event.error and event.error.startswith(why)
    assert to_json(session.messages) == before
    assert session.state.consecutive_failures == 0, "a manual failure does not back off"


def test_a_proposal_needs_a_strategy_that_summarises(workspace: Path):
    with FakeAnthropic(respond_with_summary) as server:
        session = session_on(server, workspace)
        session.ask("Survey the project.")
        session.ask("Check the notes.")
        with pytest.raises(ValueError, match="'sliding-window' makes no summary"):
            session.propose_summary(strategy=SlidingWindow(keep=1))
    assert session.proposal is None
