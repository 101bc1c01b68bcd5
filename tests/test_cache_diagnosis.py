"""`Session(cache_diagnosis=True)`: every request asks the API why its prompt missed the cache
(beta `cache-diagnosis-2026-04-07`, the shape of the SDK 2.17 types), naming the previous reply;
the reason is recorded per call (`calls.cache_miss_reason`, `cache_missed_tokens`) and agrees
with replay's modelled prompt cache. Through the real SDK against the loopback fake, which
answers the diagnosis and rejects what the API rejects."""

from __future__ import annotations

import anthropic
import pandas as pd
import pytest
from support.fake_api import FakeAnthropic, reply, text, tool_use
from test_replay_fidelity import agent_requests, scripted_agent

from evo_magic import load_transcripts, replay
from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies import MicroCompact, Recall

BETA = "cache-diagnosis-2026-04-07"


def test_each_call_says_why_it_missed_the_cache_and_replay_models_the_same_misses(workspace):
    reads = [
        reply(tool_use("read_file", {"path": p}, id=f"toolu_{i}"))
        for i, p in enumerate(["inventory.py", "samples.csv", "README.md", "inventory.py"])
    ]
    strategies = [MicroCompact(keep_recent=2, cache_aware=False)]
    with FakeAnthropic(scripted_agent(*reads, reply(text("Read.")))) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, strategies=strategies, cache_diagnosis=True) as s:
            s.ask("Read the project files.")
            s.configure(strategies=[*strategies, Recall()])
            s.ask("Anything else?")
        server.assert_no_rejections()
    bodies = agent_requests(server)
    assert bodies[0]["diagnostics"] == {"previous_message_id": None}  # opted in, nothing yet
    assert all(b["diagnostics"]["previous_message_id"].startswith("msg_") for b in bodies[1:])
    assert all(BETA in h.get("anthropic-beta", "") for h in server.headers)
    calls = load_transcripts(s.directory).calls.sort_values("call")
    reasons = [None if pd.isna(v) else v for v in calls["cache_miss_reason"].astype(object)]
    assert reasons[0] is None  # nothing to compare with
    assert "messages_changed" in reasons  # micro replaced an older result: the prefix changed
    assert reasons[-1] == "tools_changed"  # recall was added: its tool joined the request
    changed = calls[calls["cache_miss_reason"] == "messages_changed"]
    assert (changed["cache_missed_tokens"] > 0).all()
    # Replay's modelled cache misses where the API said it missed, and nowhere else.
    r = replay(load_transcripts(s.directory), {"recorded": "recorded"}).calls.sort_values("call")
    held = (r["cache_read_tokens"] + r["cache_write_tokens"]).shift(1)
    modelled_miss = (r["cache_read_tokens"] < held).tolist()[1:]
    assert modelled_miss == [reason is not None for reason in reasons[1:]]


def test_diagnostics_without_the_beta_is_rejected_as_the_api_rejects_it():
    with FakeAnthropic() as server:
        client = server.client(max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="diagnostics: Extra inputs"):
            client.messages.create(
                model="claude-sonnet-5-5", max_tokens=10,
                messages=[{"role": "user", "content": "Hi"}],
                extra_body={"diagnostics": {"previous_message_id": None}},
            )  # fmt: skip
        beta = client.beta.messages.create(
            model="claude-sonnet-5-5", max_tokens=10, betas=[BETA],
            messages=[{"role": "user", "content": "Hi"}],
            diagnostics={"previous_message_id": "msg_unknown"},
        )  # fmt: skip
        assert beta.diagnostics.cache_miss_reason.type == "previous_message_not_found"
