"""`Session.undo_compaction()` and `%compact --undo`: the last full compaction's history and
compaction state put back byte for byte, recorded as a compaction of its own, which replay
honours (as recorded, and under the session's strategies: the run undoes its own)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from support.fake_api import FakeAnthropic, reply, text, tool_use, unmarked
from test_replay_fidelity import agent_requests, assert_reproduced, scripted_agent

from evo_magic import load_transcripts, replay
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import default_pipeline


def reads(*paths: str) -> list:
    calls = [
        reply(tool_use("read_file", {"path": p}, id=f"toolu_{i}")) for i, p in enumerate(paths)
    ]
    return [*calls, reply(text("Read."))]


def test_undo_restores_the_history_and_state_byte_for_byte_and_replay_honours_it(
    workspace: Path,
):
    script = reads("inventory.py", "README.md", "samples.csv")
    with FakeAnthropic(scripted_agent(*script)) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model) as s:
            s.ask("Read the project files.")
            before = json.dumps(s.messages)
            state_before = (s.state.compact_count, s.state.has_compacted, s.state.last_summary)
            assert s.compact().success and json.dumps(s.messages) != before
            undone = s.undo_compaction()
            assert undone.success and undone.strategy == "undo"
            assert json.dumps(s.messages) == before
            state = (s.state.compact_count, s.state.has_compacted, s.state.last_summary)
            assert state == state_before
            with pytest.raises(ValueError, match="no compaction to undo"):
                s.undo_compaction()  # only the last one, once
            s.ask("And the samples?")
        server.assert_no_rejections()
    last = unmarked(agent_requests(server)[-1]["messages"])
    assert json.dumps(last[: len(json.loads(before))]) == before  # sent as it was before
    records = [json.loads(line) for line in (s.directory / "session.jsonl").open()]
    done = [r["strategy"] for r in records if r["kind"] == "compaction"]
    assert done == ["summarise", "undo"]
    r = replay(load_transcripts(s.directory), {"recorded": "recorded", "own": None})
    assert_reproduced(r, "recorded", server)
    assert_reproduced(r, "own", server)


def test_undo_with_nothing_to_undo_changes_nothing(workspace: Path):
    with Session(workspace, model="offline", strategies=default_pipeline()) as s:
        s.ask("Look around.")
        before = json.dumps(s.messages)
        with pytest.raises(ValueError, match="no compaction to undo"):
            s.undo_compaction()
        assert json.dumps(s.messages) == before
        s.compact()
        s.reset()
        with pytest.raises(ValueError, match="no compaction to undo"):
            s.undo_compaction()  # a reset forgets it


def test_the_magic_undoes_and_says_so_in_one_line_when_it_cannot(ip, api):
    with capture_output():
        ip.run_cell_magic("agent", "--max-turns 3", "Look around.")
    session = ip.find_magic("compact").__self__.sessions["default"]
    before = json.dumps(session.messages)
    with pytest.raises(UsageError, match="no compaction to undo"):
        ip.run_line_magic("compact", "--undo")
    with capture_output():
        ip.run_line_magic("compact", "")
        ip.run_line_magic("compact", "--undo")
    assert json.dumps(session.messages) == before
    with pytest.raises(UsageError, match="takes no focus"):
        ip.run_line_magic("compact", "--undo focus=the notes")
