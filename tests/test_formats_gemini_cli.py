"""Gemini CLI chats. No public chat file was found: this one is made to the layout Gemini CLI
writes (session fields, then `messages` of type user / gemini / info, a gemini message with
`thoughts`, `toolCalls` whose `result` holds the function response, and `tokens`), and the
frames are checked against counts made here with `json`. Likewise for the JSON-lines chats of
Gemini CLI 0.39 on (no public one found either): a log written to its source's record shapes."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from evo_magic import load_transcripts, replay
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning

CHAT = {
    "sessionId": "f86f5318-f47b-4433-85f8-ec9d9a417f8e",
    "projectHash": "79b6fa86e3c0d31765c7e3c6de511a7b96342a2e947135d5db396e49e27020cd",
    "startTime": "2025-10-18T14:57:28.974Z",
    "lastUpdated": "2025-10-18T14:58:07.161Z",
    "messages": [
        {
            "id": "u1",
            "timestamp": "2025-10-18T14:57:28.974Z",
            "type": "user",
            "content": "List the files in the current directory",
        },
        {
            "id": "g1",
            "timestamp": "2025-10-18T14:57:31.120Z",
            "type": "gemini",
            "content": "",
            "thoughts": [
                {
                    "subject": "Listing",
                    "description": "I will run ls.",
                    "timestamp": "2025-10-18T14:57:30.000Z",
                }
            ],
            "toolCalls": [
                {
                    "id": "run_shell_command-1",
                    "name": "run_shell_command",
                    "args": {"command": "ls"},
                    "status": "success",
                    "result": [
                        {
                            "functionResponse": {
                                "id": "run_shell_command-1",
                                "name": "run_shell_command",
                                "response": {"output": "README.md\nsrc\n"},
                            }
                        }
                    ],
                    "resultDisplay": "README.md\nsrc\n",
                }
            ],
            "tokens": {
                "input": 8123,
                "output": 14,
                "cached": 6000,
                "thoughts": 40,
                "tool": 0,
                "total": 8177,
            },
            "model": "gemini-2.5-pro",
        },
        {
            "id": "g2",
            "timestamp": "2025-10-18T14:57:35.500Z",
            "type": "gemini",
            "content": "There are two entries: README.md and src.",
            "tokens": {
                "input": 8190,
                "output": 11,
                "cached": 8100,
                "thoughts": 0,
                "tool": 0,
                "total": 8201,
            },
            "model": "gemini-2.5-pro",
        },
        {
            "id": "i1",
            "timestamp": "2025-10-18T14:58:07.161Z",
            "type": "info",
            "content": "Session saved.",
        },
    ],
}


@pytest.fixture
def chat(tmp_path):
    folder = tmp_path / "chats"
    folder.mkdir()
    path = folder / "session-2025-10-18T14-57-f86f5318.json"
    path.write_text(json.dumps(CHAT, indent=2))
    return path


def test_a_chat_gives_a_call_per_gemini_message_with_its_tokens(chat):
    messages = json.loads(chat.read_text())["messages"]
    replies = [m for m in messages if m["type"] == "gemini"]
    t = load_transcripts(chat.parent)
    assert set(t.calls["session_id"]) == {CHAT["sessionId"]}
    assert set(t.calls["source"]) == {"gemini_cli"}
    assert len(t.calls) == len(replies)
    assert t.calls["input_tokens"].tolist() == [
        m["tokens"]["input"] - m["tokens"]["cached"] for m in replies
    ]
    assert t.calls["cache_read_input_tokens"].tolist() == [m["tokens"]["cached"] for m in replies]
    assert t.calls["output_tokens"].tolist() == [
        m["tokens"]["output"] + m["tokens"]["thoughts"] for m in replies
    ]
    assert t.calls["model"].tolist() == [m["model"] for m in replies]
    calls = [c for m in replies for c in m.get("toolCalls", [])]
    uses = t.blocks[t.blocks["block_type"] == "tool_use"]
    results = t.blocks[t.blocks["block_type"] == "tool_result"]
    assert uses["tool_use_id"].tolist() == [c["id"] for c in calls]
    assert results["text"].tolist() == [
        c["result"][0]["functionResponse"]["response"]["output"] for c in calls
    ]
    assert (t.blocks["block_type"] == "thinking").sum() == sum(
        bool(m.get("thoughts")) for m in replies
    )
    assert len(t.events) == len(messages)


def test_a_chat_replays_with_its_recorded_tokens(chat):
    t = load_transcripts(chat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = replay(t, {"none": []})
    assert r.calls["recorded_tokens"].tolist() == [
        m["tokens"]["input"] for m in CHAT["messages"] if m["type"] == "gemini"
    ]


def test_a_torn_chat_is_named(chat):
    data = chat.read_bytes()
    chat.write_bytes(data[: len(data) // 2])
    with (
        pytest.warns(TranscriptWarning, match=r"session-.*\.json: line \d+"),
        pytest.raises(TranscriptError),
    ):
        load_transcripts(chat)


# -- JSON lines (Gemini CLI 0.39 on) ----------------------------------------------------------

LINES = (
    Path(__file__).parent
    / "fixtures"
    / "real"
    / "gemini-cli-jsonl"
    / "session-2026-06-10T10-00-24e7203e.jsonl"
)


def expected_replies(path: Path) -> tuple[list[dict], set[str]]:
    """The chat's gemini messages (last version of each id, in the order first written) and
    the ids a rewind dropped, counted here with `json` as Gemini CLI's loader folds the log."""
    order: dict[str, dict] = {}
    dropped: set[str] = set()
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if "$rewindTo" in record:
            live = [i for i in order if i not in dropped]
            dropped.update(live[live.index(record["$rewindTo"]) :])
        elif "id" in record and "type" in record:
            order[record["id"]] = record  # a dict keeps the first place, takes the last value
    replies = [m for m in order.values() if m["type"] == "gemini"]
    return replies, dropped


def test_a_jsonl_chat_gives_a_call_per_gemini_message_with_its_last_tokens():
    replies, dropped = expected_replies(LINES)
    t = load_transcripts(LINES.parent)
    assert set(t.calls["source"]) == {"gemini_cli"}
    assert set(t.calls["session_id"]) == {"24e7203e-8840-4c58-91f1-5ab32f11e899"}
    assert len(t.calls) == len(replies)
    assert t.calls["input_tokens"].tolist() == [
        m["tokens"]["input"] - m["tokens"]["cached"] for m in replies
    ]
    assert t.calls["output_tokens"].tolist() == [
        m["tokens"]["output"] + m["tokens"]["thoughts"] for m in replies
    ]
    assert t.calls["model"].tolist() == [m["model"] for m in replies]
    assert t.calls["abandoned"].tolist() == [m["id"] in dropped for m in replies]
    results = t.blocks[t.blocks["block_type"] == "tool_result"]
    calls = [c for m in replies for c in m.get("toolCalls", [])]
    assert results["text"].tolist() == [
        c["result"][0]["functionResponse"]["response"]["output"] for c in calls
    ]
    assert t.calls["line"].notna().all()
    records = [json.loads(line) for line in LINES.read_text().splitlines()]
    assert len(t.events) == len(records)  # every line, rewinds and metadata updates too
    assert (t.events["kind"] == "rewind").sum() == sum("$rewindTo" in r for r in records)


def test_a_rewound_message_is_kept_abandoned_and_replay_leaves_it_out():
    t = load_transcripts(LINES)
    prompts = t.blocks[t.blocks["role"] == "user"]
    assert prompts[prompts["abandoned"]]["text"].tolist() == ["Delete src"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = replay(t, {"none": []})
    kept = [m for m in expected_replies(LINES)[0] if m["id"] not in expected_replies(LINES)[1]]
    assert r.calls["recorded_tokens"].tolist() == [m["tokens"]["input"] for m in kept]


def test_a_torn_last_line_is_named_and_the_rest_is_read(tmp_path):
    torn = tmp_path / LINES.name
    data = LINES.read_bytes()
    torn.write_bytes(data + b'{"id":"g5","timestamp":"2026-06-10T10:03:0')
    with pytest.warns(TranscriptWarning, match=rf"{LINES.name}: skipped 1 unreadable .*: 16"):
        t = load_transcripts(torn)
    assert len(t.calls) == len(expected_replies(LINES)[0])


def test_a_jsonl_chat_without_messages_is_said(tmp_path):
    empty = tmp_path / "session-2026-06-10T11-00-0badf00d.jsonl"
    empty.write_text(LINES.read_text().splitlines()[0] + "\n")
    with pytest.warns(TranscriptWarning, match="1 file without messages"):
        t = load_transcripts(empty)
    assert len(t.calls) == 0
    assert t.skipped == {"gemini_cli: file without messages": 1}


def test_a_pretty_printed_chat_holding_a_one_line_object_is_still_a_document(tmp_path):
    """A line inside an indented chat can be a whole small object (`{}`): the file is JSON
    lines only when its first line is a record."""
    chat = json.loads(json.dumps(CHAT))
    chat["messages"][1]["toolCalls"][0]["args"] = [{}]
    path = tmp_path / "session-2025-10-18T14-57-f86f5318.json"
    path.write_text(json.dumps(chat, indent=2))
    assert "{}" in [line.strip() for line in path.read_text().splitlines()]
    t = load_transcripts(path)
    assert len(t.calls) == sum(m["type"] == "gemini" for m in CHAT["messages"])
