"""A Codex turn's reasoning in replay's rebuild: the reasoning items the client sends back
with a turn's later calls are counted (at the reasoning tokens their calls reported), each real
unredacted rollout is estimated within 5% at p90, and a rollout whose encrypted reasoning was
redacted by its publisher says so."""

from __future__ import annotations

import json
import random
import string
import warnings
from pathlib import Path

import pandas as pd
import pytest

from evo_magic import load_transcripts, replay
from evo_magic.strategies.clear_tool_uses import ClearToolUses

REAL = Path(__file__).parent / "fixtures" / "real"
ROLLOUTS = sorted(REAL.glob("codex-*/*.jsonl"))
UNREDACTED = [path for path in ROLLOUTS if "REDACTED" not in path.read_text()]

FIXED = 6_000
"""Tokens of the written rollout's fixed part (instructions, tools)."""
REASONING = 2_500
"""Reasoning tokens of each written call."""


def p90_error(calls: pd.DataFrame) -> float:
    """The 90th percentile of |estimated - recorded| / recorded over the calls with both."""
    both = calls[calls["recorded_tokens"].notna() & calls["estimated_tokens"].notna()]
    assert len(both) > 0
    recorded = both["recorded_tokens"].astype(float)
    error = (both["estimated_tokens"].astype(float) - recorded).abs() / recorded
    return float(error.quantile(0.9))


def _line(kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": "2026-03-20T10:00:00.000Z", "type": kind, "payload": payload})


def write_rollout(folder: Path, turns: int = 4, calls: int = 6, reasoning: int = REASONING) -> Path:
    """A rollout in Codex 0.104's layout whose recorded prompts count what the server counts:
    the fixed part, the history's text at 4 characters a token, and the reasoning of the
    turn's earlier calls (sent back, encrypted), dropped when the next turn begins."""
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "-_"
    lines = [_line("session_meta", {"id": "r1", "cwd": "/w", "cli_version": "0.104.0"})]
    lines.append(_line("turn_context", {"model": "gpt-5.3-codex"}))
    text, total, n = 0, 0, 0
    for turn in range(turns):
        prompt = f"Task {turn}: " + "fix the failing test " * 5
        lines.append(
            _line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": prompt}],
                },
            )
        )
        lines.append(_line("event_msg", {"type": "user_message", "message": prompt}))
        text += len(prompt)
        for k in range(calls):
            n += 1
            sent = FIXED + text // 4 + k * reasoning
            total += sent
            summary = f"**Step {n}**"
            args = json.dumps({"cmd": "pytest -x " + "tests/test_a.py " * (5 + k)})
            sealed = "gAAAAAB" + "".join(rng.choice(alphabet) for _ in range(1_600))
            lines.append(
                _line(
                    "response_item",
                    {
                        "type": "reasoning",
                        "content": None,
                        "summary": [{"type": "summary_text", "text": summary}],
                        "encrypted_content": sealed,
                    },
                )
            )
            lines.append(
                _line(
                    "response_item",
                    {
                        "type": "function_call",
                        "name": "shell",
                        "arguments": args,
                        "call_id": f"c{n}",
                    },
                )
            )
            usage = {
                "input_tokens": sent,
                "cached_input_tokens": 0,
                "output_tokens": reasoning + 40,
                "reasoning_output_tokens": reasoning,
            }
            totals = {**usage, "input_tokens": total}
            lines.append(
                _line(
                    "event_msg",
                    {
                        "type": "token_count",
                        "info": {"total_token_usage": totals, "last_token_usage": usage},
                    },
                )
            )
            letters = string.ascii_lowercase + " \n"
            output = "".join(rng.choice(letters) for _ in range(1_500 + 300 * k))
            lines.append(
                _line(
                    "response_item",
                    {"type": "function_call_output", "call_id": f"c{n}", "output": output},
                )
            )
            text += len(summary) + len(args) + len(output)
    path = folder / "rollout-2026-03-20T10-00-00-r1.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_turns_reasoning_sent_back_is_counted_in_the_estimate(tmp_path):
    """Each call's prompt holds the reasoning of its turn's earlier calls (thousands of tokens
    its characters do not show): the estimate counts it, each call within 5% at p90, and a
    rebuild that dropped it would be off by far more."""
    t = load_transcripts(write_rollout(tmp_path))
    calls = replay(t, {"recorded": "recorded"}).calls
    assert len(calls) == 24
    assert p90_error(calls) <= 0.05
    # What dropping the reasoning would give: the same rollout with no reasoning counted
    # (the recorded prompts unchanged) is estimated far off.
    t.calls["reasoning_output_tokens"] = pd.array([pd.NA] * len(t.calls), dtype="Int64")
    dropped = replay(t, {"recorded": "recorded"}).calls
    assert p90_error(dropped) > 0.10


def test_the_rate_of_characters_does_not_absorb_the_reasoning(tmp_path):
    """A request changed by a strategy is the recorded count plus the change in characters at
    the conversation's rate: the same texts give the same change whether or not the turns
    reasoned (the reasoning is counted apart, not spread over the characters)."""
    clear = {"clear": [ClearToolUses(trigger_tokens=1_000, keep=1)]}
    removed = []
    for reasoning in (REASONING, 0):
        (folder := tmp_path / str(reasoning)).mkdir()
        t = load_transcripts(write_rollout(folder, reasoning=reasoning))
        calls = replay(t, clear).calls
        assert (calls["cleared_tokens"] > 0).any()
        removed.append((calls["recorded_tokens"] - calls["sent_tokens"]).tolist())
    assert max(abs(a - b) for a, b in zip(*removed, strict=True)) <= 1


def _redacted_items(path: Path) -> int:
    """Reasoning items whose encrypted content is a publisher's marker, counted with json."""
    count = 0
    for line in path.read_text().splitlines():
        record = json.loads(line)
        item = record.get("payload", record) if isinstance(record, dict) else {}
        if isinstance(item, dict) and item.get("type") == "reasoning":
            sealed = item.get("encrypted_content")
            count += isinstance(sealed, str) and sealed.startswith("[REDACTED")
    return count


@pytest.mark.parametrize("path", UNREDACTED, ids=lambda p: p.parent.name)
def test_each_real_unredacted_rollout_is_estimated_within_five_percent_at_p90(path: Path):
    """A real turn of gpt-5.4 whose calls reason thousands of tokens: within 5% at p90, and
    closer than the same rollout replayed as if no reasoning were sent back."""
    t = load_transcripts(path)
    calls = replay(t, {"recorded": "recorded"}).calls
    assert len(calls) == len(t.calls) >= 10
    with_reasoning = p90_error(calls)
    assert with_reasoning <= 0.05
    t.calls["reasoning_output_tokens"] = pd.array([pd.NA] * len(t.calls), dtype="Int64")
    without = p90_error(replay(t, {"recorded": "recorded"}).calls)
    assert with_reasoning < without / 2


@pytest.mark.parametrize("path", ROLLOUTS, ids=lambda p: p.parent.name)
def test_redacted_reasoning_is_recognised_and_said(path: Path):
    """Where a publisher replaced the encrypted reasoning by markers, each such item's thinking
    block is flagged `redacted`, one warning names the file, and the marker is never taken for
    what was sent (the block holds the summary only); a rollout with its encrypted content
    is neither flagged nor warned about."""
    expected = _redacted_items(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = load_transcripts(path)
    said = [str(w.message) for w in caught if "redacted by the file's publisher" in str(w.message)]
    thinking = t.blocks[t.blocks["block_type"] == "thinking"]
    flagged = thinking[thinking["status"] == "redacted"]
    assert len(flagged) == expected
    if expected:
        assert len(said) == 1 and path.name in said[0] and f"({expected})" in said[0]
        assert not flagged["text"].str.contains("REDACTED_ENCRYPTED").any()
    else:
        assert said == [] and len(thinking) > 0


def test_the_fixtures_hold_both_kinds():
    assert len(UNREDACTED) >= 1 and len(ROLLOUTS) > len(UNREDACTED)
