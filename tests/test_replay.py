"""Trace-driven replay: recorded sessions under other strategies, without a model."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.claude_code_session import write_session
from support.fake_api import FakeAnthropic
from support.responders import offline_responder

from evo_magic import load_transcripts, replay
from evo_magic.compact.policy import CompactPolicy
from evo_magic.models import AnthropicModel, FunctionModel, ModelRequest
from evo_magic.session import Session
from evo_magic.strategies import (
    ClearToolUses,
    LargeOutputs,
    MicroCompact,
    ObservationMasking,
    Summarise,
)

ASKS = (
    "Survey this project: what does it do, and where are the TODOs?",
    "Now look again, then compact the context yourself.",
    "And once more, carefully.",
)
SWEEP = {
    "recorded": "recorded",
    "none": [],
    "seed": None,
    "clear-3": [ClearToolUses(keep=3, trigger_tokens=1_500)],
    "masking-10": [ObservationMasking(10)],
}


@pytest.fixture(scope="module")
def evo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An evo_magic session through the real SDK and the fake: micro-compaction, automatic
    compactions, the model's compact tool and a manual compaction with a focus."""
    from evo_magic.demo import make_demo_workspace

    workspace = make_demo_workspace(tmp_path_factory.mktemp("replay") / "work")
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        policy = CompactPolicy(context_limit=9_000)
        with Session(workspace, model=model, policy=policy) as session:
            for ask in ASKS:
                session.ask(ask)
            assert session.compact("the TODOs").success
            session.ask("Finish up.")
        server.assert_no_rejections()
    return session.directory.parent


@pytest.fixture(scope="module")
def claude_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_session(tmp_path_factory.mktemp("claude"), calls=70)


def test_the_contract_on_an_evo_magic_transcript_root(evo_root: Path):
    r = replay(
        evo_root, SWEEP, model="claude-sonnet-4-5", policy=CompactPolicy(context_limit=9_000)
    )
    columns = {
        "context_chars",
        "context_tokens",
        "input_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "output_tokens",
        "cost_usd",
        "cleared_tokens",
        "compactions_so_far",
    }
    assert columns <= set(r.calls.columns)
    assert list(r.totals["strategy"]) == list(SWEEP)
    assert {
        "calls",
        "input_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "output_tokens",
        "cost_usd",
        "peak_context_tokens",
        "compactions",
        "tokens_cleared",
    } <= set(r.totals.columns)
    totals = r.totals.set_index("strategy")
    recorded_calls = len(load_transcripts(evo_root).calls)
    assert (totals["calls"] == recorded_calls).all()  # the agent's actions are held fixed
    assert totals.loc["none", "compactions"] == 0 and totals.loc["none", "tokens_cleared"] == 0
    assert totals.loc["none", "summary_cost_usd"] == 0 < totals.loc["seed", "summary_cost_usd"]
    assert totals.loc["recorded", "compactions"] >= 3
    assert totals.loc["none", "peak_context_tokens"] > totals.loc["seed", "peak_context_tokens"]
    # Output tokens are the recorded ones whatever the strategy.
    assert totals["output_tokens"].nunique() == 1
    # The cost is the price table applied to each call's modelled usage.
    row = r.calls.iloc[5]
    from evo_magic.cost import call_cost

    usage = {
        "input_tokens": int(row.input_tokens),
        "output_tokens": int(row.output_tokens),
        "cache_read_input_tokens": int(row.cache_read_tokens),
        "cache_creation_input_tokens": int(row.cache_write_tokens),
    }
    assert row.cost_usd == pytest.approx(call_cost(usage, "claude-sonnet-4-5").total, rel=1e-3)


def test_replaying_a_session_under_its_own_strategies_reproduces_every_request(evo_root: Path):
    t = load_transcripts(evo_root)
    (session_id,) = set(t.calls["session_id"])
    start = json.loads((evo_root / session_id / "session.jsonl").read_text().splitlines()[0])
    assert [s["name"] for s in start["strategies"]] == ["large-outputs", "micro", "summarise"]
    r = replay(t, {"own": None, "recorded": "recorded"}, policy=CompactPolicy(context_limit=9_000))
    recorded = t.calls.sort_values("call")["context_sent_chars"].tolist()
    for label in ("own", "recorded"):
        replayed = r.calls[r.calls["strategy"] == label]["context_chars"].tolist()
        assert replayed == recorded, label
    # Where it compacted as the session did, it used the session's own summaries.
    assert r.summaries.set_index("strategy").loc["own", "stand-in"] == 0
    # Their calls are priced as the session paid for them (estimated from what they read and
    # wrote), and the totals include them.
    paid = t.compactions["summary_cost_usd"].sum()
    totals = r.totals.set_index("strategy")
    for label in ("own", "recorded"):
        assert totals.loc[label, "summary_cost_usd"] == pytest.approx(paid, rel=0.05), label
        calls = r.calls[r.calls["strategy"] == label]
        whole = calls["cost_usd"].sum() + calls["summary_cost_usd"].sum()
        assert totals.loc[label, "cost_usd"] == pytest.approx(whole)


def test_a_session_recorded_before_cache_aware_clearing_replays_as_it_ran(tmp_path: Path):
    """Older evo_magic recorded no `cache_aware`: its micro-compaction cleared eagerly, and
    replay rebuilds it so (not with today's cache-aware default)."""
    from evo_magic.demo import make_demo_workspace

    workspace = make_demo_workspace(tmp_path / "work")
    with FakeAnthropic(offline_responder()) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        policy = CompactPolicy(context_limit=9_000)
        eager = [LargeOutputs(), MicroCompact(cache_aware=False), Summarise()]
        with Session(workspace, model=model, policy=policy, strategies=eager) as session:
            for ask in ASKS:
                session.ask(ask)
    log = session.directory / "session.jsonl"
    lines = log.read_text().splitlines()
    start = json.loads(lines[0])
    for described in start["strategies"]:
        described["params"].pop("cache_aware", None)
    log.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    t = load_transcripts(log)
    assert t.blocks["compacted"].sum() > 0  # it did clear old results
    # Today's default pipeline is cache-aware.
    r = replay(t, {"recorded": "recorded", "today's default": None})
    recorded = t.calls.sort_values("call")["context_sent_chars"].tolist()
    assert r.calls[r.calls["strategy"] == "recorded"]["context_chars"].tolist() == recorded
    default = r.calls[r.calls["strategy"] == "today's default"]["context_chars"].tolist()
    assert default != recorded  # the same session, cache-aware, clears less


def test_a_claude_code_session_is_rebuilt_within_ten_percent(claude_root: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fixture is clean: no torn line to warn about
        r = replay(claude_root, {"recorded": "recorded"}, model="claude-sonnet-4-5")
    calls = r.calls
    main = calls[calls["agent_id"].isna()]
    error = (main["estimated_tokens"] - main["recorded_tokens"]).abs() / main["recorded_tokens"]
    assert error.median() <= 0.10
    # The subagent is its own conversation; the rewind's calls and the API-error placeholder
    # are not calls; the recorded compaction happened.
    t = load_transcripts(claude_root)
    active = t.calls[~t.calls["abandoned"].astype(bool)]
    assert len(calls) == len(active) and t.calls["abandoned"].any()
    assert set(calls["agent_id"].dropna()) == {"a1b2c3"}
    assert main["compactions_so_far"].max() == 1


def relative_error(calls: pd.DataFrame) -> pd.Series:
    return (calls["estimated_tokens"] - calls["recorded_tokens"]).abs() / calls["recorded_tokens"]


def test_the_fidelity_check_catches_a_wrong_rebuild(claude_root: Path):
    """The check can fail: a rebuild that ignores the compaction, or that keeps the rewound
    branch (as a loader ignoring the parentUuid tree would), drifts from the recorded tokens."""
    r = replay(claude_root, {"recorded": "recorded", "no compaction": []})
    main = r.calls[r.calls["agent_id"].isna()]
    recorded = main[main["strategy"] == "recorded"]
    after = recorded["compactions_so_far"] > 0
    assert after.any() and relative_error(recorded[after]).median() < 0.01
    ignored = main[main["strategy"] == "no compaction"][after.to_numpy()]
    assert relative_error(ignored).median() > 0.10

    t = load_transcripts(claude_root)
    t.blocks["abandoned"] = False
    kept = replay(t, {"recorded": "recorded"}).calls
    kept = kept[kept["agent_id"].isna()]
    assert relative_error(kept).max() > 3 * relative_error(recorded).max()


def test_a_sweep_over_a_claude_code_folder(claude_root: Path):
    r = replay(
        claude_root,
        {"recorded": "recorded", "none": [], "seed": None, "masking-10": [ObservationMasking(10)]},
        model="claude-sonnet-4-5",
    )
    totals = r.totals.set_index("strategy")
    assert totals.loc["none", "peak_context_tokens"] > totals.loc["recorded", "peak_context_tokens"]
    # Masking old observations edits old messages every call: the cache writes it causes show.
    assert totals.loc["masking-10", "cache_write_tokens"] > totals.loc["none", "cache_write_tokens"]
    assert totals["cost_usd"].notna().all()


def test_summaries_are_recorded_stand_ins_or_real_and_cached(evo_root: Path, tmp_path: Path):
    asked: list[ModelRequest] = []

    def summarise(request: ModelRequest) -> list[dict[str, Any]]:
        asked.append(request)
        return [{"type": "text", "text": "A REAL SUMMARY of what happened."}]

    strategies = {"older": [MicroCompact(), Summarise()], "window": ["summarise-older(keep=4)"]}
    policy = CompactPolicy(context_limit=6_000)
    stand_in = replay(evo_root, strategies, policy=policy, summary_tokens=300)
    counts = stand_in.summaries.set_index("strategy")
    assert counts.loc["window", "stand-in"] > 0
    real = replay(
        evo_root,
        strategies,
        policy=policy,
        summariser=FunctionModel(summarise),
        cache_dir=tmp_path / "summaries",
    )
    made = len(asked)
    assert made > 0 and real.summaries["model"].sum() == made
    again = replay(
        evo_root,
        strategies,
        policy=policy,
        summariser=FunctionModel(summarise),
        cache_dir=tmp_path / "summaries",
    )
    assert len(asked) == made  # the second sweep paid nothing
    pd.testing.assert_frame_equal(real.calls, again.calls)


def test_replay_plots(evo_root: Path):
    import matplotlib

    matplotlib.use("Agg")
    r = replay(evo_root, {"recorded": "recorded", "none": []})
    figure = r.plot()
    left, right = figure.axes
    assert left.get_ylabel() == "Context sent (tokens, whole prompt)"
    assert len(left.get_lines()) == 2 and len(right.patches) == 2


def test_summaries_asked_in_context_are_priced_from_the_modelled_cache(evo_root: Path):
    """With the policy's summary_in_context, a summary of the whole history is priced as the
    agent's prompt read from the modelled cache plus the instructions: cheaper than the text
    request, and nothing else about the replay changes."""
    t = load_transcripts(evo_root)
    policy = CompactPolicy(context_limit=9_000)
    as_text = replay(t, {"default": None}, policy=policy)
    in_context = replay(t, {"default": None}, policy=policy.with_changes(summary_in_context=True))
    a, b = as_text.totals.iloc[0], in_context.totals.iloc[0]
    assert a.compactions == b.compactions > 0
    assert list(as_text.calls["context_tokens"]) == list(in_context.calls["context_tokens"])
    assert 0 < b.summary_cost_usd < 0.9 * a.summary_cost_usd  # the same output tokens in both
    assert b.cost_usd - b.summary_cost_usd == pytest.approx(a.cost_usd - a.summary_cost_usd)


def test_a_replay_that_cost_nothing_draws_no_cost_panel(tmp_path: Path):
    import matplotlib

    from evo_magic.demo import make_demo_workspace

    matplotlib.use("Agg")
    workspace = make_demo_workspace(tmp_path / "work")
    with Session(workspace, model="offline", transcripts_root=tmp_path / "transcripts") as s:
        s.ask(ASKS[0])
    r = replay(tmp_path / "transcripts", {"recorded": "recorded", "none": []})
    assert list(r.totals["cost_usd"]) == [0.0, 0.0]  # the offline model is free
    figure = r.plot()
    (left,) = figure.axes  # no panel of empty bars beside it
    assert left.get_xlabel() == "Model call (in recorded order; gaps between conversations)"
    assert left.get_ylabel() == "Context sent (tokens, whole prompt)"
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["recorded", "none"]
