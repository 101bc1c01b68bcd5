"""Real Claude Code and Codex files (tests/fixtures/real/, see its README) read right.

Each expected figure is counted here from the file itself with the standard library's JSON
decoder, independently of the project's reader.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from evo_magic import load_transcripts
from evo_magic.analysis import Call, Message, TranscriptWarning, changes, conversation
from evo_magic.analysis.replay import replay

REAL = Path(__file__).parent / "fixtures" / "real"
CLAUDE_PARALLEL = REAL / "claude-code-2.1" / "88f04c6a-d128-40bf-96b3-6b2aa787f62c.jsonl"
CLAUDE_IMAGES = REAL / "claude-code-2.1" / "47bf5f5c-9e11-4f51-8a29-7ad38ecdf17c.jsonl"
ROLLOUT = "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
CODEX = REAL / "codex-0.104" / ROLLOUT
CODEX_058 = REAL / "codex-0.58-order" / ROLLOUT
CODEX_2025 = (
    REAL
    / "codex-2025-legacy"
    / ("rollout-2025-09-05T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl")
)
NO_MESSAGES = REAL / "no-messages"


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TranscriptWarning)
        return load_transcripts(path)


# -- Claude Code 2.1: parallel tool calls --------------------------------------------------------


def test_claude_code_parallel_tool_calls_are_one_response_and_one_call():
    lines = records(CLAUDE_PARALLEL)
    responses: dict[str, dict] = {}  # message id -> the usage of its last record
    for r in lines:
        if r.get("type") == "assistant" and r["message"].get("usage"):
            responses[r["message"]["id"]] = r["message"]["usage"]
    blocks = [
        b
        for r in lines
        if r.get("type") in ("user", "assistant") and isinstance(r["message"]["content"], list)
        for b in r["message"]["content"]
    ]
    # The file really has the shape: a later tool_use of a response hangs beside the chain
    # (its parent is not on the path from the last record back to the root).
    by_uuid = {r["uuid"]: r for r in lines if r.get("uuid")}
    chain, at = set(), [r for r in lines if r.get("type") in ("user", "assistant")][-1]
    while at is not None:
        chain.add(at["uuid"])
        at = by_uuid.get(at.get("parentUuid"))
    beside = [r for r in lines if r.get("type") == "assistant" and r["uuid"] not in chain]
    assert beside, "the fixture must hold tool_use records off the parent chain"

    t = load(CLAUDE_PARALLEL)
    assert len(t.calls) == len(responses) == 9
    assert not t.calls["abandoned"].any() and not t.blocks["abandoned"].any()
    for kind in ("tool_use", "tool_result"):
        assert (t.blocks["block_type"] == kind).sum() == sum(b["type"] == kind for b in blocks)
    assert t.calls["output_tokens"].sum() == sum(u["output_tokens"] for u in responses.values())
    assert t.calls["cache_read_input_tokens"].sum() == sum(
        u["cache_read_input_tokens"] for u in responses.values()
    )
    # One response is one assistant message; its results are the next message, one per call.
    uses = t.blocks[t.blocks["block_type"] == "tool_use"].groupby("message_index").size()
    results = t.blocks[t.blocks["block_type"] == "tool_result"].groupby("message_index").size()
    assert uses.tolist() == results.tolist()
    assert (results.index == uses.index + 1).all()


# -- Codex ---------------------------------------------------------------------------------------


def _codex_counts(path: Path) -> dict:
    lines = records(path)
    payloads = [(r.get("type"), r.get("payload") or {}) for r in lines]
    totals = []
    for kind, p in payloads:
        info = p.get("info") if p.get("type") == "token_count" else None
        if kind == "event_msg" and info and info.get("last_token_usage"):
            key = json.dumps(info.get("total_token_usage"), sort_keys=True)
            if not totals or totals[-1] != key:
                totals.append(key)
    return {
        "calls": len(totals),
        "typed": sum(k == "event_msg" and p.get("type") == "user_message" for k, p in payloads),
        "searches": sum(p.get("type") == "web_search_call" for _, p in payloads),
    }


def test_codex_turns_calls_and_web_searches():
    counts = _codex_counts(CODEX)
    t = load(CODEX)
    assert counts == {"calls": 81, "typed": 5, "searches": 1}
    assert len(t.calls) == counts["calls"]
    assert t.calls["message_index"].notna().all()
    assert t.blocks["turn"].max() == counts["typed"]
    prompts = t.blocks[t.blocks["message_kind"] == "prompt"]
    assert prompts.drop_duplicates(["epoch", "message_index"]).shape[0] == counts["typed"]
    searches = t.blocks[t.blocks["block_type"] == "server_tool_use"]
    assert len(searches) == counts["searches"]
    assert searches["tool_name"].tolist() == ["web_search"]
    assert searches["tool_use_id"].notna().all() and (searches["tool_use_id"] != "").all()
    # Each call's response is an assistant message, and no two calls claim one response.
    assistant = t.blocks[t.blocks["role"] == "assistant"]
    answered = set(zip(assistant["epoch"], assistant["message_index"], strict=True))
    claimed = list(zip(t.calls["epoch"], t.calls["message_index"], strict=True))
    assert set(claimed) <= answered and len(set(claimed)) == len(claimed)


def test_codex_058_token_counts_before_their_items_attach_to_their_response():
    # The same turn with each token_count written before its response (as Codex 0.58 does):
    # the calls land on the same responses, with the same usage.
    counts = _codex_counts(CODEX_058)
    assert counts["calls"] == 21
    early, late = load(CODEX_058), load(CODEX)
    assert len(early.calls) == counts["calls"]
    assert early.calls["message_index"].notna().all()
    columns = ["message_index", "input_tokens", "cache_read_input_tokens", "output_tokens"]
    same = late.calls[late.calls["turn"] <= 1][columns].reset_index(drop=True)
    assert early.calls[columns].reset_index(drop=True).equals(same)


def test_codex_before_session_meta_reads_like_its_later_format():
    lines = records(CODEX_2025)
    assert "type" not in lines[0] and {"id", "timestamp"} <= set(lines[0])
    t, later = load(CODEX_2025), load(CODEX)
    assert set(t.blocks["session_id"]) == {lines[0]["id"]}
    columns = ["role", "message_index", "block_type", "tool_name", "text"]
    first_turn = later.blocks[later.blocks["turn"] <= 1][columns].astype(str)
    assert t.blocks[columns].astype(str).values.tolist() == first_turn.values.tolist()
    items = [r for r in lines if r.get("type")]
    assert len(t.blocks) == sum(len(r["content"]) if r["type"] == "message" else 1 for r in items)


def test_replay_of_real_rollouts_and_sessions_runs():
    for path in (CODEX, CLAUDE_PARALLEL, CLAUDE_IMAGES):
        result = replay(path, {"none": [], "recorded": "recorded"})
        assert len(result.calls) == 2 * len(load(path).calls)
        assert (result.totals["cache_hit_rate"] <= 1).all()


# -- files without messages ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("empty.jsonl", "empty file"),
        ("e6804af6-fe01-478c-9e10-75e94f3e93cb.jsonl", "claude_code: file without messages"),
        (ROLLOUT, "codex: file without messages"),
    ],
)
def test_empty_title_only_and_meta_only_files_are_treated_alike(name: str, reason: str):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = load_transcripts(NO_MESSAGES / name)
    ours = [w for w in caught if issubclass(w.category, TranscriptWarning)]
    assert len(ours) == 1 and name in str(ours[0].message)
    assert t.skipped == {reason: 1}
    assert len(t.blocks) == len(t.calls) == len(t.compactions) == 0


def test_a_folder_of_files_without_messages_gives_one_warning(tmp_path: Path):
    folder = tmp_path / "mixed"
    shutil.copytree(NO_MESSAGES, folder)
    shutil.copy(CLAUDE_IMAGES, folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = load_transcripts(folder)
    ours = [w for w in caught if issubclass(w.category, TranscriptWarning)]
    # (the file with messages also says its usage is partial: tests/test_usage_partial.py)
    ours = [w for w in ours if "usage_partial" not in str(w.message)]
    assert len(ours) == 1 and "3 files without messages" in str(ours[0].message)
    assert t.skipped == {
        "empty file": 1,
        "claude_code: file without messages": 1,
        "codex: file without messages": 1,
    }
    assert set(t.blocks["session_id"]) == {CLAUDE_IMAGES.stem}


# -- conversation(): a valid request -------------------------------------------------------------


def test_the_rebuilt_conversation_is_a_request_the_api_accepts(fake):
    lines = records(CLAUDE_IMAGES)
    blocks = [
        b
        for r in lines
        if r.get("type") in ("user", "assistant") and isinstance(r["message"]["content"], list)
        for b in r["message"]["content"]
    ]
    images = sum(b["type"] == "image" for b in blocks)
    thinking = sum(b["type"] == "thinking" for b in blocks)
    assert (images, thinking) == (2, 4)
    t = load(CLAUDE_IMAGES)
    items = list(conversation(t, CLAUDE_IMAGES.stem))
    assert changes(items) == {"media without data": images, "unsigned thinking": thinking}
    placeholders = [
        b["text"]
        for m in items
        if isinstance(m, Message)
        for b in m.content
        if b["type"] == "text" and b["text"].startswith("[image")
    ]
    assert len(placeholders) == images and all("image/" in p for p in placeholders)
    # Every call's request (the messages before it) goes through the real client.
    client, sent = fake.client(), []
    for item in items:
        if isinstance(item, Call):
            client.messages.create(model="claude-sonnet-5-5", max_tokens=64, messages=sent)
        elif isinstance(item, Message):
            sent = [*sent, item.as_api()]
    assert len(fake.requests) == sum(isinstance(item, Call) for item in items) == 3


def test_replay_priced_with_the_gpt_5_rows_and_one_notice_for_an_unpriced_model():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        priced = replay(CODEX, {"none": []})
    assert not [w for w in caught if "No price" in str(w.message)]
    assert priced.calls["cost_usd"].notna().all() and priced.totals["cost_usd"].iloc[0] > 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        unpriced = replay(CODEX, {"none": [], "recorded": "recorded"}, model="gpt-9-preview")
    notices = [str(w.message) for w in caught if "No price" in str(w.message)]
    assert len(notices) == 1 and "'gpt-9-preview'" in notices[0]
    assert unpriced.calls["cost_usd"].isna().all()
    assert unpriced.totals["cost_usd"].isna().all()
