"""The `calls` frame's `turn_note` column: the note for the model's turn a strategy sent with a
call (`token-budget`'s, as a mid-conversation system message or appended to the newest
message), read from evo_magic transcripts, the same in memory and over a lake; checked against
the requests the loopback fake received through the real SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from support.fake_api import FakeAnthropic
from support.responders import offline_responder

from evo_magic import load_transcripts
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import REMINDER_PREFIX
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import MicroCompact, Summarise, TokenBudget


def _sent_notes(body: dict[str, Any]) -> str | None:
    """The note a request carried for its turn, read from the request: the system message
    after the newest message, or the note blocks of the newest message."""
    last = body["messages"][-1]
    if last["role"] == "system":
        return last["content"]
    content = last["content"] if isinstance(last["content"], list) else []
    notes = [b["text"] for b in content if b.get("type") == "text"]
    notes = [n for n in notes if n.startswith(REMINDER_PREFIX)]
    return " ".join(notes) or None


def _session(workspace: Path, as_system: bool) -> tuple[Path, list[str | None]]:
    budget = TokenBudget(window_tokens=6_000, before_compaction=False, as_system=as_system)
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(
            workspace,
            model=model,
            policy=CompactPolicy(context_limit=16_000),
            strategies=[MicroCompact(), budget, Summarise()],
        ) as session:
            session.ask("Survey the project.")
            session.ask("Survey it again.")
        server.assert_no_rejections()
        sent = [_sent_notes(body) for body in server.accepted if body.get("tools")]
    return session.directory, sent


def test_each_call_names_the_note_it_carried_in_memory_and_over_a_lake(
    workspace: Path, tmp_path: Path
):
    expected = {}
    for as_system in (True, False):
        directory, sent = _session(workspace, as_system)
        assert sum(note is not None for note in sent) >= 2, "too few notes to check"
        expected[directory.name] = sent
    root = directory.parent
    whole = load_transcripts(root)
    calls = whole.calls.sort_values(["session_id", "call"])
    for session_id, sent in expected.items():
        mine = calls[calls["session_id"] == session_id]
        found = [None if pd.isna(v) else v for v in mine["turn_note"]]
        assert found == sent
    lake = load_transcripts(root, lake=tmp_path / "lake")
    again = load_transcripts(root, lake=tmp_path / "lake")  # read back from the lake's files
    for frame in (lake.calls, again.calls):
        left = frame.sort_values(["session_id", "call"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(
            left.astype(object), calls.reset_index(drop=True).astype(object), check_dtype=False
        )
