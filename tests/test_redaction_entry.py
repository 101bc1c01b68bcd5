"""Texts that enter the session from outside the model's reply text are redacted where they
enter: the API's compaction block (the threshold form and on demand) and the texts a user
configures (the system prompt, the placeholder). Through the real SDK against the loopback
fake, and a real IPython shell for what the magics show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_api import FakeAnthropic, reply, text

from evo_magic.events import CompactionFinished
from evo_magic.models import AnthropicModel
from evo_magic.secrets import REDACTED
from evo_magic.session import Session
from evo_magic.strategies import MicroCompact, ServerCompact, ServerSummarise

MODEL = "claude-sonnet-5-5"
KEY = "sk-ant-api03-compactionblockkey-0123456789abcdef"
CHUNK = "The quick brown fox reports on the ledger. " * 1_400  # ~15k tokens


def _session(workspace: Path, fake: FakeAnthropic, strategies: list[Any], **options: Any):
    return Session(
        workspace, model=AnthropicModel(MODEL, client=fake.client()), strategies=strategies,
        **options,
    )  # fmt: skip


def _grow(s: Session, fake: FakeAnthropic, asks: int) -> list[Any]:
    events: list[Any] = []
    for n in range(asks):
        fake.queue(reply(text(f"noted {n}")))
        events += s.ask(f"Part {n}: {CHUNK}").events
    return events


def _on_disk(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("paused", [False, True])
def test_a_server_compaction_whose_summary_holds_a_key_enters_redacted(
    fake: FakeAnthropic, workspace: Path, monkeypatch: pytest.MonkeyPatch, paused: bool
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    fake.summary_note = f" The key in use is {KEY}."
    strategy = ServerCompact(trigger_tokens=50_000, pause_after_compaction=paused)
    s = _session(workspace, fake, [strategy])
    (done,) = [e for e in _grow(s, fake, 4) if isinstance(e, CompactionFinished)]
    assert done.success and done.summary.startswith("Summary of")
    assert KEY not in done.summary and REDACTED in done.summary  # the event
    assert KEY not in s.state.last_summary and REDACTED in s.state.last_summary  # the state
    assert KEY not in json.dumps(s.history.messages)  # the history
    assert s.history.messages[0]["role"] == "user"  # the summary, as our compacted message
    assert "Part 3: The quick brown fox" in s.history.messages[0]["content"][0]["text"]
    fake.queue(reply(text("still here")))
    assert s.ask("And now?").text == "still here"  # the API takes the history that follows
    assert KEY not in json.dumps(fake.accepted[-1])  # the next request
    assert KEY not in _on_disk(workspace / ".evo_magic")  # transcript and snapshots


def test_a_server_compaction_without_a_key_keeps_its_signed_block(
    fake: FakeAnthropic, workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    s = _session(workspace, fake, [ServerCompact(trigger_tokens=50_000)])
    _grow(s, fake, 4)
    assert s.history.messages[0]["content"][0]["type"] == "compaction"


def test_an_on_demand_server_summary_holding_a_key_enters_redacted(
    fake: FakeAnthropic, workspace: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    fake.summary_note = f" The key in use is {KEY}."
    s = _session(workspace, fake, [MicroCompact()])
    _grow(s, fake, 1)
    done = s.compact(focus="the open TODOs", strategy=ServerSummarise())
    assert done.success, done.error
    assert KEY not in done.summary and "Instructions followed: the open TODOs" in done.summary
    assert KEY not in json.dumps(s.history.messages)
    assert KEY not in s.state.last_summary
    fake.queue(reply(text("after")))
    assert s.ask("What next?").text == "after"
    assert KEY not in json.dumps(fake.accepted[-1])
    assert KEY not in _on_disk(workspace / ".evo_magic")


MAGICS_KEY = "sk-ant-test-magics-0000"  # the key the `api` fixture sets


def test_percent_compact_server_summarise_and_agent_context_show_no_key(
    ip: Any, api: FakeAnthropic
):
    from IPython.utils.capture import capture_output

    api.summary_note = f" The key in use is {MAGICS_KEY}."
    with capture_output() as captured:
        ip.run_cell_magic("agent", "", "Survey the project.")
        ip.run_line_magic("compact", "--strategy server-summarise")
        ip.run_line_magic("agent", "context")
        ip.run_cell_magic("agent", "", "What next?")
    assert "last summary:" in captured.stdout and REDACTED in captured.stdout
    assert MAGICS_KEY not in captured.stdout
    assert MAGICS_KEY not in json.dumps(api.accepted[-1])


PLACEHOLDER = "[output dropped; ask me, token "


def test_a_key_in_a_configured_text_reaches_no_request_and_no_display(ip: Any, api: FakeAnthropic):
    from IPython.utils.capture import capture_output

    ip.run_line_magic("config", f"AgentMagics.system_prompt = 'Be brief. Key: {MAGICS_KEY}'")
    spec = f"micro(keep_recent=0, min_chars=10, placeholder='{PLACEHOLDER}{MAGICS_KEY}]')"
    ip.run_line_magic("config", f"AgentMagics.strategies = [{spec!r}]")
    with capture_output():
        ip.run_cell_magic("agent", "", "Survey the project.")
        table = ip.run_line_magic("agent", "config")
    sent = json.dumps(api.accepted)
    assert "Be brief. Key: " + REDACTED in sent  # the system prompt, redacted where it entered
    assert PLACEHOLDER + REDACTED in sent  # the placeholder too
    assert MAGICS_KEY not in sent
    for shown in (repr(table), table._repr_html_()):  # as text and as HTML
        assert "system_prompt" in shown and "placeholder=" in shown
        assert MAGICS_KEY not in shown
