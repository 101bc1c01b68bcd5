"""Reading and editing a summary before it applies: `Session.propose_summary`, `Session.compact(
summary=...)`, the compaction record, `Transcripts.compactions`, and the `%compact --edit`,
`--apply`, `--apply-file` and `%agent summaries` magics in a real InteractiveShell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from support.fake_api import FakeAnthropic, reply, text
from support.responders import offline_responder

from evo_magic.analysis import load_transcripts
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import COMPACTED_HEADER, FOCUS_PREFIX
from evo_magic.measure import to_json
from evo_magic.models import AnthropicModel
from evo_magic.notebook.magics import AgentMagics
from evo_magic.notebook.summary_edit import PROPOSAL_FILE
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


# The shells of the magics' tests below (`ip`, with `api`) talk to a fake that proposes PROPOSED.
pytestmark = pytest.mark.responder.with_args(respond_with_summary)


def session_on(server: FakeAnthropic, workspace: Path) -> Session:
    model = AnthropicModel(client=server.client(max_retries=0))
    return Session(workspace, model=model, policy=CompactPolicy(context_limit=100_000))


def records(session: Session, kind: str) -> list[dict]:
    session.sync()
    lines = session.transcript_path.read_text().splitlines()
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


# -- the magics, in a real InteractiveShell ----------------------------------------------------


def the_session(shell) -> Session:
    magics = next(m for m in shell.configurables if isinstance(m, AgentMagics))
    return magics.sessions["default"]


def first_text(session: Session) -> str:
    return session.messages[0]["content"][0]["text"]


def test_terminal_round_trip_edit_the_file_then_apply_it(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Survey the project.")
    session = the_session(ip)
    before = to_json(session.messages)
    with capture_output() as shown:
        ip.run_line_magic("compact", "--edit focus=the TODOs")
    out = shown.stdout
    path = session.directory / PROPOSAL_FILE
    assert out.startswith("Proposed summary (summarise; focus “the TODOs”): ")
    assert "Nothing has changed yet." in out and PROPOSED in out
    assert "%compact --apply\n" in out and f"%compact --apply-file {path}\n" in out
    assert to_json(session.messages) == before
    assert path.read_text() == PROPOSED + "\n"

    path.write_text(f"{EDITED}\n")
    with capture_output() as shown:
        ip.run_line_magic("compact", f"--apply-file {path}")
    assert 'compaction (user) focus "the TODOs"' in shown.stdout
    text = first_text(session)
    assert EDITED in text and PROPOSED not in text and f"{FOCUS_PREFIX}the TODOs" in text
    assert len([b for b in api.accepted if is_summary(b)]) == 1, "one call: the proposal"

    shown = ip.run_line_magic("agent", "summaries")
    assert EDITED in repr(shown) and EDITED in shown._repr_html_()  # whole, not cut
    assert "focus “the TODOs” · edited" in repr(shown)
    table = shown.frame
    assert list(table.columns) == [
        "when",
        "turn",
        "strategy",
        "trigger",
        "focus",
        "summary_edited",
        "summary",
        "summary_proposed",
    ]
    (row,) = table.itertuples()
    assert (row.strategy, row.trigger, row.focus) == ("summarise", "user", "the TODOs")
    assert (row.summary, row.summary_proposed, bool(row.summary_edited)) == (
        EDITED,
        PROPOSED,
        True,
    )
    assert row.when.year >= 2024


def test_apply_as_proposed_and_what_apply_refuses(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Survey the project.")
    with pytest.raises(UsageError, match="no proposed summary"):
        ip.run_line_magic("compact", "--apply")
    with capture_output():
        ip.run_line_magic("compact", "--edit")
        ip.run_cell_magic("agent", "--max-turns 2", "Go on.")
    with pytest.raises(UsageError, match="no proposed summary for the history as it is now"):
        ip.run_line_magic("compact", "--apply")
    with pytest.raises(UsageError, match="--preview and --edit do not go together"):
        ip.run_line_magic("compact", "--edit --preview")
    with capture_output():
        ip.run_line_magic("compact", "--edit focus=one")
    with pytest.raises(UsageError, match="proposed with its own focus"):
        ip.run_line_magic("compact", "--apply focus=another")
    with pytest.raises(UsageError, match="is not a file"):
        ip.run_line_magic("compact", "--apply-file no-such-file.md")
    with capture_output():
        ip.run_line_magic("compact", "--apply")
    session = the_session(ip)
    assert PROPOSED in first_text(session) and f"{FOCUS_PREFIX}one" in first_text(session)
    (record,) = records(session, "compaction")
    # Applied as proposed: not edited (it was recorded as edited), the proposal kept with it.
    assert not record["summary_edited"] and record["summary"] == record["summary_proposed"]


def test_jupyter_text_area_edit_and_apply(ip, api):
    from ipywidgets.widgets.widget import _instances

    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Survey the project.")
    ip.run_line_magic("config", "AgentMagics.display_mode = 'rich'")
    with capture_output() as shown:
        ip.run_line_magic("compact", "--edit focus=the TODOs")
    (bundle,) = [o.data for o in shown.outputs]
    assert PROPOSED in bundle["text/plain"]
    # The widget the front end is told to show, as it finds it: by its model id.
    editor = _instances[bundle["application/vnd.jupyter.widget-view+json"]["model_id"]]
    assert "evo-summary-editor" in editor._dom_classes
    head, area, buttons, status = editor.children
    assert area.value == PROPOSED and "Edit it, then Apply." in head.value
    apply, cancel = buttons.children
    assert (apply.description, cancel.description) == ("Apply", "Cancel")
    session = the_session(ip)
    area.value = EDITED
    with capture_output() as updated:
        apply.click()
    assert EDITED in first_text(session) and f"{FOCUS_PREFIX}the TODOs" in first_text(session)
    assert "Applied the edited summary" in status.value
    assert area.disabled and apply.disabled
    (record,) = [o.data for o in updated.outputs]  # the editor became a static record
    assert EDITED in record["text/html"] and "Applied the edited summary" in record["text/plain"]


def test_an_editor_whose_proposal_is_no_longer_current_applies_nothing(ip, api):
    from evo_magic.notebook.summary_edit import SummaryEditor

    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Survey the project.")
    session = the_session(ip)
    editor = SummaryEditor(session, session.propose_summary())
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 2", "Go on.")
    before = to_json(session.messages)
    editor.text.value = EDITED
    assert editor.on_apply() is None
    assert to_json(session.messages) == before
    assert "no longer current" in editor.status.value and editor.apply.disabled
