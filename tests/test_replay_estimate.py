"""Replay's per-call estimate (`estimated_tokens`: the conversation's fit alone, from the
characters rebuilt) against what each recorded call counted (`recorded_tokens`): within 5% at
the 90th percentile, on every real Claude Code file we have and on sessions whose prompt's
fixed part changes at a compaction (as Claude Code's does when it attaches files again)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
from support.claude_code_session import FIXED_TOKENS, write_session

from evo_magic import load_transcripts, replay

REAL = Path(__file__).parent / "fixtures" / "real"
CLAUDE_CODE = sorted(REAL.glob("claude-code-*/*.jsonl"))


def p90_error(calls: pd.DataFrame) -> float:
    """The 90th percentile of |estimated - recorded| / recorded over the calls with both."""
    both = calls[calls["recorded_tokens"].notna() & calls["estimated_tokens"].notna()]
    assert len(both) > 0
    recorded = both["recorded_tokens"].astype(float)
    error = (both["estimated_tokens"].astype(float) - recorded).abs() / recorded
    return float(error.quantile(0.9))


@pytest.mark.parametrize("path", CLAUDE_CODE, ids=lambda p: f"{p.parent.name}/{p.name[:8]}")
def test_each_real_claude_code_file_is_estimated_within_five_percent_at_p90(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # their usage is partly partial: said elsewhere
        t = load_transcripts(path)
        calls = replay(t, {"recorded": "recorded"}).calls
    assert len(calls) == int((~t.calls["abandoned"].astype(bool)).sum())
    assert p90_error(calls) <= 0.05


@pytest.mark.parametrize("change", [18_000, -10_000])
def test_a_fixed_part_that_changes_at_a_compaction_is_fitted_per_stretch(tmp_path, change):
    root = write_session(tmp_path, fixed_after=FIXED_TOKENS + change)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calls = replay(root, {"recorded": "recorded"}, model="claude-sonnet-4-5").calls
    main = calls[calls["agent_id"].isna()]
    before, after = main[main["compactions_so_far"] == 0], main[main["compactions_so_far"] > 0]
    assert len(before) > 5 and len(after) > 5
    # each side of the compaction, not only the whole, within 5%
    assert p90_error(before) <= 0.05 and p90_error(after) <= 0.05


@pytest.mark.parametrize("rate", [1.0, 0.0])
def test_thinking_counted_at_a_rate_of_its_own_is_fitted(tmp_path, rate):
    """The server counts a turn's thinking at about a token a character (the transcript keeps
    a summary of what the model thought), far above the rate of the rest of the prompt; a model
    that drops earlier thinking counts none of it: the thinking blocks are rebuilt and fitted at
    their own rate, each call within 5% at p90."""
    root = write_session(tmp_path, calls=80, thinking_rate=rate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calls = replay(root, {"recorded": "recorded"}, model="claude-sonnet-4-5").calls
    main = calls[calls["agent_id"].isna()]
    assert p90_error(main) <= 0.05


def test_thinking_is_part_of_the_rebuilt_request(tmp_path):
    """Each thinking block the file kept is in the rebuilt request, with its text; the
    characters replay measures include it."""
    from evo_magic.analysis import Message, conversation

    root = write_session(tmp_path, calls=40, thinking_rate=1.0)
    session = next(root.glob("*.jsonl"))
    kept = [
        block["thinking"]
        for line in session.read_text().splitlines()
        if (record := json.loads(line)).get("type") == "assistant"
        for block in record["message"]["content"]
        if block.get("type") == "thinking"
    ]
    t = load_transcripts(session)
    rebuilt = [
        block["thinking"]
        for item in conversation(t, t.sessions["session_id"].iloc[0])
        if isinstance(item, Message)
        for block in item.content
        if block["type"] == "thinking"
    ]
    assert kept and rebuilt == kept


def test_a_summary_asked_in_context_leaves_out_the_thinking_a_transcript_could_not_sign():
    """Rebuilt thinking has no signature, which the API refuses: a summary asked in the
    conversation itself sends the rest and keeps the thinking a live session signed."""
    from evo_magic.summariser import AgentPrompt, Summariser

    unsigned = {"type": "thinking", "thinking": "Let me look.", "signature": ""}
    signed = {"type": "thinking", "thinking": "Now the tests.", "signature": "EqQBCkYI"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]},
        {"role": "assistant", "content": [unsigned, {"type": "text", "text": "Looking."}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on."}]},
        {"role": "assistant", "content": [signed, {"type": "text", "text": "Testing."}]},
        {"role": "user", "content": [{"type": "text", "text": "And?"}]},
    ]
    request = Summariser(in_context=True).request(messages, None, AgentPrompt("system", []))
    sent = [block for m in request.messages for block in m["content"]]
    assert unsigned not in sent and signed in sent
    assert {"type": "text", "text": "Looking."} in sent  # the rest of that turn stays
