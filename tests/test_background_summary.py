"""summarise(background_at=0.6): the summary is prepared by the compactor's worker once the
context passes 60% of the limit, with the same summariser call as a foreground summary, and
swapped in at the limit while it still covers the history; its cost is recorded either way; a
failure in the background loses nothing; replay prepares it at the same call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.fake_api import FakeAnthropic, server_error
from support.responders import offline_responder

from evo_magic import load_transcripts, replay
from evo_magic.compact.policy import CompactPolicy
from evo_magic.compacted import COMPACTED_HEADER
from evo_magic.events import CompactionFinished, ModelCalled
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import Summarise
from evo_magic.strategies.registry import make_strategy

LIMIT = 16_000


def _run(workspace: Path, fail_summary: bool = False) -> tuple[Session, list[Any], list[dict]]:
    answer = offline_responder()
    failed: list[dict] = []

    def respond(body: dict) -> Any:
        if fail_summary and not body.get("tools") and not failed:
            failed.append(body)  # the first summary request (the background one) fails
            return server_error()
        return answer(body)

    with FakeAnthropic(respond) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        session = Session(
            workspace,
            model=model,
            policy=CompactPolicy(context_limit=LIMIT),
            strategies=[Summarise(background_at=0.6)],
        )
        events: list[Any] = []
        session.subscribe(events.append)
        session.ask("Survey the project.")
        session.ask("Survey it again.")
        server.assert_no_rejections()
        accepted = list(server.accepted)
    return session, events, accepted


def test_the_setting_is_checked():
    assert make_strategy("summarise(background_at=0.6)").background_at == 0.6
    with pytest.raises(ValueError, match="background_at"):
        Summarise(background_at=1.5)
    with pytest.raises(ValueError, match="background_at"):
        Summarise(background_at=0.6, keep_user_tokens=100)


def test_the_prepared_summary_is_swapped_in_at_the_limit(workspace: Path):
    session, events, accepted = _run(workspace)
    done = [e for e in events if isinstance(e, CompactionFinished) and e.success]
    assert done, "the conversation never reached the limit"
    swapped = [e for e in done if e.details.get("background") == "swapped"]
    assert swapped
    for event in swapped:
        assert event.summary_usage.input_tokens > 0  # the background summary's cost is recorded
        assert event.details["background_covered"] > 0
        assert event.after.chars < event.before.chars
    # One summariser call per compaction: nothing was summarised twice.
    summaries = [b for b in accepted if not b.get("tools")]
    assert len(summaries) == len(done)
    # The summary was asked for before the call that crossed the limit: at some call the
    # context was under the limit (>= 60%) when the summariser request went out.
    sizes = [e.context.chars for e in events if isinstance(e, ModelCalled)]
    assert any(0.6 * LIMIT <= size < LIMIT for size in sizes)
    history = session.history.view()
    assert history[0]["content"][0]["text"].startswith(COMPACTED_HEADER)
    session.close()
    # Replayed with the same strategy: the same compactions, and the same on a second run.
    t = load_transcripts(session.directory)
    seen: list[Any] = []

    def observe(call: Any) -> None:
        seen.extend(e for e in call.changes if isinstance(e, CompactionFinished))

    strategies = {"bg": [Summarise(background_at=0.6)]}
    first = replay(t, strategies, policy=CompactPolicy(LIMIT), on_call=observe)
    again = replay(t, strategies, policy=CompactPolicy(LIMIT))
    assert first.calls["context_chars"].tolist() == again.calls["context_chars"].tolist()
    replayed = [e for e in seen if e.success]
    # Prepared at the same call as live: swapped, or recomputed, where live did.
    assert [e.details for e in replayed] == [e.details for e in done]
    assert [e.before.chars for e in replayed] == [e.before.chars for e in done]


def test_a_failed_background_summary_loses_nothing_and_is_recomputed(workspace: Path):
    session, events, accepted = _run(workspace, fail_summary=True)
    done = [e for e in events if isinstance(e, CompactionFinished) and e.success]
    assert done and done[0].details.get("background") == "recomputed"
    summaries = [b for b in accepted if not b.get("tools")]
    # The failed one, then one per compaction (and one prepared for a limit never reached).
    assert len(summaries) >= len(done) + 1
    assert session.history.view()[0]["content"][0]["text"].startswith(COMPACTED_HEADER)
    session.close()
