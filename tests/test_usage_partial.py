"""`calls.usage_partial` on real Claude Code files: a reply whose records carry only the usage
of the start of its stream is flagged (and said), never passed on as final; a reply with a
record written at its end is priced from that record.

What each file shows is counted here with the standard library's JSON decoder: per message id,
whether a record has a stop reason (written with the final usage), the largest output count
written, and the characters of its text, thinking and tool inputs."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evo_magic import load_transcripts

REAL = Path(__file__).parent / "fixtures" / "real"
V1_0 = REAL / "claude-code-1.0" / "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl"
V2_0 = REAL / "claude-code-2.0" / "7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl"
V2_1 = sorted((REAL / "claude-code-2.1").glob("*.jsonl"))


@dataclass
class Reply:
    stop_output: int | None = None
    """The output count of its last record with a stop reason (None: no such record)."""
    outputs: list[int] = field(default_factory=list)
    chars: int = 0


def replies(path: Path) -> dict[str, Reply]:
    found: dict[str, Reply] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        message = record.get("message") or {}
        if record.get("type") != "assistant" or record.get("isApiErrorMessage"):
            continue
        reply = found.setdefault(message["id"], Reply())
        output = (message.get("usage") or {}).get("output_tokens", 0)
        reply.outputs.append(output)
        if message.get("stop_reason"):
            reply.stop_output = output
        for block in message.get("content") or []:
            if block.get("type") == "tool_use":
                reply.chars += len(json.dumps(block.get("input"), separators=(",", ":")))
            else:
                reply.chars += len(block.get("text") or block.get("thinking") or "")
    return found


def loaded(path: Path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calls = load_transcripts(path).calls
    said = [str(w.message) for w in caught if "usage_partial" in str(w.message)]
    return calls, said


@pytest.mark.parametrize("path", V2_1, ids=lambda p: p.name[:8])
def test_claude_code_2_1_replies_carry_only_the_start_of_their_stream_and_are_flagged(path):
    expected = replies(path)
    # what the file shows: no record ends a reply, and a few output tokens for long replies
    assert all(r.stop_output is None for r in expected.values())
    assert all(max(r.outputs) <= 8 and r.chars > 16 * max(r.outputs) for r in expected.values())
    calls, said = loaded(path)
    assert len(calls) == len(expected) and calls["usage_partial"].all()
    assert said == [
        f"{len(calls)} calls carry the usage Claude Code wrote at the start of a streamed reply, "
        "not its final usage (usage_partial): their output_tokens and cost_usd are understated"
    ]
    assert calls["cost_usd"].notna().all()  # priced as recorded, and said so


def test_claude_code_2_0_writes_each_replys_final_usage_and_nothing_is_flagged():
    expected = replies(V2_0)
    assert all(r.stop_output is not None for r in expected.values())
    calls, said = loaded(V2_0)
    assert len(calls) == len(expected)
    assert not calls["usage_partial"].any() and said == []
    assert sorted(calls["output_tokens"].tolist()) == sorted(
        r.stop_output for r in expected.values()
    )


def test_a_reply_is_priced_from_its_final_record_and_flagged_only_without_one():
    expected = replies(V1_0)
    calls, said = loaded(V1_0)
    assert len(calls) == len(expected)
    final = [r for r in expected.values() if r.stop_output is not None]
    unfinished = [r for r in expected.values() if r.stop_output is None]
    # some replies of this file end with a record of their final usage, some do not
    assert final and unfinished
    partial = [r for r in unfinished if 16 * r.outputs[-1] < r.chars]
    assert int(calls["usage_partial"].sum()) == len(partial) > 0
    assert said and said[0].startswith(f"{len(partial)} calls carry")
    # every call's output is its final record's where there is one, else its last record's
    assert sorted(calls["output_tokens"].tolist()) == sorted(
        r.stop_output if r.stop_output is not None else r.outputs[-1] for r in expected.values()
    )
    # a reply whose first record says 1 token and whose final record says hundreds
    grown = [r for r in final if r.outputs[0] < 10 <= r.stop_output]
    assert grown and all(r.stop_output in calls["output_tokens"].tolist() for r in grown)
