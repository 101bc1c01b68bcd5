"""A Codex rollout whose prompts exist only as `user_message` events (no message item of what
was typed) reads its prompts from the events: the same rows, turns and rebuilt requests as the
rollout that has both. Built from the real Codex Desktop 0.104 rollout of tests/fixtures/real
with its typed message items taken out."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from evo_magic import load_transcripts, replay

ROLLOUT = (
    Path(__file__).parent
    / "fixtures"
    / "real"
    / "codex-0.104"
    / "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
)


def typed_items(lines: list[str]) -> set[int]:
    """Indexes of the user message items each `user_message` event follows."""
    found, last = set(), None
    for i, line in enumerate(lines):
        record = json.loads(line)
        payload = record.get("payload", {})
        if record["type"] == "response_item" and payload.get("role") == "user":
            last = i
        elif payload.get("type") == "user_message":
            found.add(last)
            last = None
    return found - {None}


def test_prompts_only_in_events_are_read_from_them(tmp_path: Path):
    lines = ROLLOUT.read_text(encoding="utf-8").splitlines()
    dropped = typed_items(lines)
    assert len(dropped) == 5  # the fixture's five prompts, each also an event
    events_only = tmp_path / ROLLOUT.name
    kept = [line for i, line in enumerate(lines) if i not in dropped]
    events_only.write_text("\n".join(kept) + "\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both, alone = load_transcripts(ROLLOUT), load_transcripts(events_only)
        replayed = [replay(t, {"recorded": "recorded"}).calls for t in (both, alone)]

    # Its publisher redacted the same text as `[REDACTED_TEXT len=516 sha=05857781]` in the
    # message item and `[REDACTED_MESSAGE len=516 sha=05857781]` in the event: 3 characters more.
    def prompts(t):
        rows = t.blocks[t.blocks["message_kind"] == "prompt"]
        texts = rows["text"].str.replace("REDACTED_MESSAGE", "REDACTED_TEXT")
        return list(zip(rows["turn"], texts, rows["message_index"], strict=True))

    assert len(prompts(alone)) == 5 and prompts(alone) == prompts(both)
    assert alone.calls["turn"].tolist() == both.calls["turn"].tolist()
    assert alone.calls["message_index"].tolist() == both.calls["message_index"].tolist()
    with_items, from_events = (calls.reset_index(drop=True) for calls in replayed)
    assert len(with_items) == 81
    longer = from_events["context_chars"] - with_items["context_chars"]
    assert longer.tolist() == [3 * (turn) for turn in both.calls["turn"]]
