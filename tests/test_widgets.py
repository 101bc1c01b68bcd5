"""The context meter: widget state, the static HTML of exported notebooks, the terminal text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evo_magic.compact.policy import CompactPolicy
from evo_magic.notebook.widget import ContextMeter
from evo_magic.session import Session

SECRET = "sk-ant-test-WIDGET-SECRET-1234"


@pytest.fixture
def session(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    return Session(workspace, model="offline", policy=CompactPolicy(context_limit=9_000))


def test_meter_follows_the_session_live(session: Session):
    meter = ContextMeter(session)
    assert meter.get_state()["messages"] == 0
    session.ask("Survey the project.")
    state = meter.get_state()
    assert state["messages"] == len(session.messages)
    assert state["chars"] == session.context().chars
    assert state["context_limit"] == 9_000
    assert state["model_calls"] == len(state["sizes"]) == 6
    layers = [row["layer"] for row in state["compactions"]]
    assert "layer 1 (micro)" in layers and "layer 2 (auto)" in layers
    auto = next(r for r in state["compactions"] if r["layer"] == "layer 2 (auto)")
    assert auto["before_chars"] > 9_000 > auto["after_chars"]
    assert auto["after_messages"] == 1


def test_static_html_shows_before_and_after(session: Session):
    meter = ContextMeter(session)
    session.ask("Survey the project.")
    session.compact("the notes file")
    bundle = meter._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    page = bundle["text/html"]
    assert "layer 3 (%compact)" in page and "the notes file" in page
    assert "→" in page and "<svg" in page
    event = session.state.compact_count
    assert event == 2
    assert "layer 3 (%compact) focus='the notes file'" in bundle["text/plain"]
    assert "-> 1 msgs" in bundle["text/plain"]


def test_failed_compaction_is_shown_as_failed(session: Session):
    meter = ContextMeter(session)
    session.compact()  # nothing to compact yet
    assert "failed: nothing to compact" in meter._repr_mimebundle_()["text/html"]
    assert "FAILED" in meter._repr_mimebundle_()["text/plain"]


def test_no_secret_in_widget_state_or_bundle(session: Session):
    meter = ContextMeter(session)
    session.ask(f"My key is {SECRET}; survey the project.")
    everything = json.dumps(meter.get_state(), default=str)
    everything += json.dumps(meter._view.get_state(), default=str)
    everything += json.dumps(meter._repr_mimebundle_(), default=str)
    assert SECRET not in everything


def test_snapshot_is_static_html_and_text_of_the_current_state(session: Session):
    meter = ContextMeter(session)
    session.ask("Survey the project.")
    snapshot = meter.snapshot()
    assert set(snapshot) == {"text/html", "text/plain"}  # no widget view: shows without a kernel
    assert snapshot["text/html"] == meter._view.value
    assert f"{len(session.messages)} messages" in snapshot["text/html"]
    assert "layer 2 (auto)" in snapshot["text/html"]
    session.compact("the notes file")
    assert "the notes file" not in snapshot["text/html"]  # a value: later work leaves it alone
    assert "the notes file" in meter.snapshot()["text/html"]


def test_live_option_belongs_to_agent_context_only():
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "evo_magic")
    try:
        with pytest.raises(UsageError, match="--live is for %agent context only"):
            shell.run_line_magic("agent", "history --live")
    finally:
        shell.run_line_magic("unload_ext", "evo_magic")
