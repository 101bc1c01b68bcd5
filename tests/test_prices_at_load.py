"""Prices at load: every loaded call of a model with a price has its cost, computed by the rule
live sessions and replay use; the sessions' totals are right in memory and in a lake; a model
without a price is NA with one warning saying how to price it.

The expected costs are computed here from the files with the standard library's JSON decoder
and the rates as the price pages print them (USD per million tokens)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from evo_magic import load_transcripts
from evo_magic.analysis import TranscriptWarning

REAL = Path(__file__).parent / "fixtures" / "real"
CLAUDE = REAL / "claude-code-2.1"
CODEX = REAL / "codex-0.104"
# input, output, cache write (5 minutes), cache write (1 hour), cache read
RATES = {
    "claude-sonnet-4-5-20250929": (3, 15, 3.75, 6, 0.30),
    "claude-haiku-4-5-20251001": (1, 5, 1.25, 2, 0.10),
    "claude-opus-4-5-20251101": (5, 25, 6.25, 10, 0.50),
}
GPT_5_3_CODEX = (1.75, 14, 0.175)  # input, output, cached input


def claude_code_costs(path: Path) -> dict[str, float]:
    """Each reply's cost, by message id, from the last record written for it."""
    last: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        message = record.get("message") or {}
        if record.get("type") == "assistant" and message.get("usage"):
            last[message["id"]] = message
    costs = {}
    for key, message in last.items():
        u = message["usage"]
        rate_in, rate_out, rate_5m, rate_1h, rate_read = RATES[message["model"]]
        split = u.get("cache_creation") or {}
        write_1h = split.get("ephemeral_1h_input_tokens", 0)
        write_5m = u.get("cache_creation_input_tokens", 0) - write_1h
        costs[key] = (
            u["input_tokens"] * rate_in
            + u["output_tokens"] * rate_out
            + write_5m * rate_5m
            + write_1h * rate_1h
            + u.get("cache_read_input_tokens", 0) * rate_read
        ) / 1e6
    return costs


def codex_cost(path: Path) -> float:
    """A rollout's cost from its last cumulative `token_count` (OpenAI counts cached input
    inside input_tokens and reasoning inside output_tokens)."""
    total = None
    for line in path.read_text().splitlines():
        payload = json.loads(line).get("payload") or {}
        if payload.get("type") == "token_count" and payload.get("info"):
            total = payload["info"]["total_token_usage"]
    assert total is not None
    rate_in, rate_out, rate_cached = GPT_5_3_CODEX
    uncached = total["input_tokens"] - total["cached_input_tokens"]
    return (
        uncached * rate_in
        + total["cached_input_tokens"] * rate_cached
        + total["output_tokens"] * rate_out
    ) / 1e6


def test_every_real_claude_code_call_is_priced_at_load_as_its_price_page_says():
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "No price", TranscriptWarning)  # none unpriced
        t = load_transcripts(CLAUDE)
    calls = t.calls
    assert len(calls) > 0 and calls["cost_usd"].notna().all()
    for path in sorted(CLAUDE.glob("*.jsonl")):
        expected = claude_code_costs(path)
        mine = calls[calls["session_id"].astype(str) == path.stem]
        assert len(mine) == len(expected)
        assert float(mine["cost_usd"].sum()) == pytest.approx(sum(expected.values()), rel=1e-9)
        session = t.sessions.set_index("session_id").loc[path.stem]
        assert session["cost_usd"] == pytest.approx(sum(expected.values()), rel=1e-9)
        assert session["calls"] == len(expected) and session["unpriced_calls"] == 0


def test_a_real_codex_rollout_is_priced_at_load_to_its_own_cumulative_totals():
    path = next(CODEX.glob("*.jsonl"))
    t = load_transcripts(path)
    assert t.calls["cost_usd"].notna().all()
    assert float(t.calls["cost_usd"].sum()) == pytest.approx(codex_cost(path), rel=1e-9)
    assert t.sessions["cost_usd"].iloc[0] == pytest.approx(codex_cost(path), rel=1e-9)


def test_a_lakes_sessions_show_the_same_costs_as_a_load_in_memory(tmp_path: Path):
    folder = tmp_path / "runs"
    shutil.copytree(CLAUDE, folder / "claude")
    shutil.copytree(CODEX, folder / "codex")
    memory = load_transcripts(folder).sessions.set_index("session_id").sort_index()
    lake = load_transcripts(folder, lake=tmp_path / "lake").sessions
    lake = lake.set_index("session_id").sort_index()
    assert (memory["cost_usd"] > 0).all()
    assert lake["cost_usd"].tolist() == pytest.approx(memory["cost_usd"].tolist(), rel=1e-12)
    assert lake["calls"].tolist() == memory["calls"].tolist()
    # read again from the lake: the same
    again = load_transcripts(folder, lake=tmp_path / "lake")
    assert again.update.read == 0
    assert float(again.calls["cost_usd"].sum()) == pytest.approx(float(memory["cost_usd"].sum()))


def renamed(tmp_path: Path, model: str) -> Path:
    """The real Claude Code file with every reply's model renamed to ``model``."""
    source = CLAUDE / "88f04c6a-d128-40bf-96b3-6b2aa787f62c.jsonl"
    target = tmp_path / "renamed" / source.name
    target.parent.mkdir(parents=True)
    lines = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "assistant":
            record["message"]["model"] = model
        lines.append(json.dumps(record))
    target.write_text("\n".join(lines) + "\n")
    return target


def test_a_model_without_a_price_is_na_with_one_warning_that_says_how_to_price_it(tmp_path):
    path = renamed(tmp_path, "acme-coder-7")
    with pytest.warns(TranscriptWarning) as caught:
        t = load_transcripts(path)
    notices = [str(w.message) for w in caught if "No price" in str(w.message)]
    assert len(notices) == 1
    assert "'acme-coder-7'" in notices[0] and "prices=" in notices[0]
    assert t.calls["cost_usd"].isna().all()
    session = t.sessions.iloc[0]
    assert session["unpriced_calls"] == len(t.calls) and session["cost_usd"] is pd.NA

    priced = load_transcripts(path, prices={"acme-coder-7": {"input": 2, "output": 8}})
    u = priced.calls
    expected = (
        u["input_tokens"].sum() * 2
        + u["output_tokens"].sum() * 8
        + u["cache_creation_input_tokens"].sum() * 2 * 1.25
        + u["cache_read_input_tokens"].sum() * 2 * 0.1
    ) / 1e6
    assert float(u["cost_usd"].sum()) == pytest.approx(float(expected))


@pytest.mark.parametrize(
    "model",
    [
        "converse/jp.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "openrouter/anthropic/claude-sonnet-4.5",
        "claude-sonnet-4-5@20250929",
    ],
)
def test_a_gateways_id_of_a_model_is_priced_as_the_model(tmp_path: Path, model: str):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "No price", TranscriptWarning)
        t = load_transcripts(renamed(tmp_path, model))
    plain = load_transcripts(renamed(tmp_path / "plain", "claude-sonnet-4-5-20250929"))
    assert t.calls["cost_usd"].tolist() == plain.calls["cost_usd"].tolist()


def test_a_bad_price_is_refused_before_anything_is_read(tmp_path: Path):
    # (a folder that does not exist: the rates are checked first)
    bad = {"acme-coder-7": {"input": -1, "output": 8}}
    with pytest.raises(ValueError, match=r"acme-coder-7.*-1"):
        load_transcripts(tmp_path / "no such folder", prices=bad)
