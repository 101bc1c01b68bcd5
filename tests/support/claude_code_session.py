"""Writes realistic Claude Code sessions, for replay's tests and benchmark.

A session of the real format's shape: prompts, assistant turns with tool calls (one record per
turn), tool results, streamed-style usage with prompt caching, an automatic compaction
(`compact_boundary` and the summary message), a rewind (an abandoned branch), an API-error
placeholder, and a subagent in `<session>/subagents/agent-*.jsonl`. The usage of every call is
what a tokenizer would count for the request really sent (the active branch, from the last
compaction on): a fixed part for the system prompt and tools, plus the messages at a rate of
characters per token that is not the replay's own, with a little noise, so replay's
calibration has real work to do.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SID = "7e57a000-0000-4000-8000-0000000000aa"
FIXED_TOKENS = 14_200  # system prompt and tools, as Claude Code sends them
CHARS_PER_TOKEN = 3.6
WORDS = (
    *("def", "class", "return", "import", "self", "sample", "freezer", "expires", "kind"),
    *("date", "path", "open", "read", "line", "count", "total", "TODO", "error", "result"),
    *("csv", "row", "column", "group", "report", "render", "today", "value", "list", "dict"),
)


@dataclass
class _Writer:
    sid: str
    rng: random.Random
    agent_id: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    active: list[dict[str, Any]] = field(default_factory=list)
    """The messages of the active branch since the last compaction (what a request sends)."""
    last: str | None = None
    n: int = 0
    fixed: int = FIXED_TOKENS
    """The prompt's fixed part in tokens (system prompt, tools, attachments)."""
    seconds: float = 0.0
    calls: int = 0
    thinking_rate: float | None = None
    """Tokens per character of thinking blocks (None: no thinking): the transcript keeps a
    summary of what the model thought, the server counts all of it."""

    def add(self, kind: str, parent: Any = "last", **fields: Any) -> str:
        self.n += 1
        self.seconds += self.rng.uniform(2, 40)
        uuid = f"{self.sid[:8]}-{self.agent_id or 'main'}-{self.n:05d}"
        minutes, seconds = divmod(int(self.seconds), 60)
        hours, minutes = divmod(minutes, 60)
        record = {
            "parentUuid": self.last if parent == "last" else parent,
            "isSidechain": self.agent_id is not None,
            "sessionId": self.sid,
            "type": kind,
            "uuid": uuid,
            "timestamp": f"2026-03-01T{hours:02d}:{minutes:02d}:{seconds:02d}.000Z",
            "version": "2.1.16",
            **({"agentId": self.agent_id} if self.agent_id else {}),
            **fields,
        }
        self.records.append(record)
        self.last = uuid
        return uuid

    def words(self, low: int, high: int) -> str:
        target = self.rng.randint(low, high)
        out: list[str] = []
        while sum(len(w) + 1 for w in out) < target:
            out.append(self.rng.choice(WORDS))
        return " ".join(out)

    def user(self, content: Any, **fields: Any) -> str:
        message = {"role": "user", "content": content}
        self.active.append(message)
        return self.add("user", message=message, **fields)

    def assistant(self, *blocks: dict[str, Any], stop: str | None) -> str:
        """A model call: usage as a tokenizer counts the request sent, cached as Claude Code's
        prompt caching reads the previous prompt and writes the rest."""
        self.calls += 1
        prompt = self.prompt_tokens()
        previous = getattr(self, "_previous", 0)
        read = min(previous, prompt - 1) if previous else 0
        usage = {
            "input_tokens": 3,
            "cache_creation_input_tokens": max(prompt - read - 3, 0),
            "cache_read_input_tokens": read,
            "output_tokens": max(len(json.dumps(list(blocks))) // 4, 1),
        }
        self._previous = prompt
        message = {
            "id": f"msg_{self.agent_id or 'main'}_{self.calls:05d}",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": list(blocks),
            "stop_reason": stop,
            "usage": usage,
        }
        self.active.append({"role": "assistant", "content": list(blocks)})
        return self.add("assistant", message=message, requestId=f"req_{self.calls:05d}")

    def prompt_tokens(self) -> int:
        chars = len(json.dumps(self.active))
        thinking = sum(
            len(json.dumps(block))
            for message in self.active
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "thinking"
        )
        noise = self.rng.uniform(0.99, 1.01)
        thought = thinking * (self.thinking_rate or 0.0)
        return round(self.fixed + (chars - thinking) / CHARS_PER_TOKEN * noise + thought)

    def tool_round(self, index: int) -> None:
        tool_id = f"toolu_{self.agent_id or 'main'}_{index:05d}"
        if self.rng.random() < 0.5:
            call = {
                "type": "tool_use",
                "id": tool_id,
                "name": "Bash",
                "input": {"command": f"grep -n {self.rng.choice(WORDS)} src/m{index % 30}.py"},
            }
        else:
            call = {
                "type": "tool_use",
                "id": tool_id,
                "name": "Read",
                "input": {"file_path": f"/project/src/m{index % 30}.py"},
            }
        blocks: list[dict[str, Any]] = [{"type": "text", "text": self.words(20, 200)}, call]
        if self.thinking_rate is not None and self.rng.random() < 0.3:
            thought = {"type": "thinking", "thinking": self.words(100, 6000), "signature": "s"}
            blocks.insert(0, thought)
        self.assistant(*blocks, stop="tool_use")
        output = self.words(200, 5000)
        self.user([{"type": "tool_result", "tool_use_id": tool_id, "content": output}])

    def compact(self, summary: str) -> None:
        boundary = self.add(
            "system",
            parent=None,
            subtype="compact_boundary",
            logicalParentUuid=self.last,
            compactMetadata={"trigger": "auto", "preTokens": self.prompt_tokens()},
        )
        self.active = []
        self.user([{"type": "text", "text": summary}], parent=boundary, isCompactSummary=True)
        self._previous = 0  # a compaction rewrites the cache


def write_session(
    root: Path,
    calls: int = 60,
    *,
    seed: int = 0,
    fixed_after: int | None = None,
    thinking_rate: float | None = None,
) -> Path:
    """A project folder holding one Claude Code session of about `calls` model calls, with a
    compaction near the middle, a rewind, an API-error placeholder and one subagent; with
    `fixed_after`, the prompt's fixed part after the compaction (as Claude Code's changes when
    it attaches files read again); with `thinking_rate`, thinking blocks in some turns, counted
    at that many tokens per character. Returns the folder."""
    rng = random.Random(seed)
    main = _Writer(SID, rng, thinking_rate=thinking_rate)
    index = 0
    compacted = False
    while main.calls < calls:
        main.user(f"Task {index}: " + main.words(30, 200))
        for _ in range(rng.randint(3, 8)):
            index += 1
            main.tool_round(index)
        if index > 8 and rng.random() < 0.25:  # a rewind: work the user went back over
            fork, kept = main.last, len(main.active)
            main.assistant({"type": "text", "text": "A first answer."}, stop="end_turn")
            main.user("No, not like that: look at the whole module.")
            index += 1
            main.tool_round(index)
            main.assistant({"type": "text", "text": main.words(200, 400)}, stop="end_turn")
            del main.active[kept:]
            main.last = fork
        main.assistant({"type": "text", "text": main.words(100, 600)}, stop="end_turn")
        if not compacted and main.calls >= calls // 2:
            main.compact(
                "This session is being continued from a previous conversation. "
                "Summary: " + main.words(800, 1600)
            )
            compacted = True
            main.fixed = fixed_after if fixed_after is not None else main.fixed
    _api_error(main)
    helper = _Writer(SID, rng, agent_id="a1b2c3")
    helper.user("Look around the project and report.")
    for n in range(3):
        helper.tool_round(10_000 + n)
    helper.assistant({"type": "text", "text": "Found three modules."}, stop="end_turn")
    project = root / "project"
    _write(project / f"{SID}.jsonl", main.records)
    _write(project / SID / "subagents" / "agent-a1b2c3.jsonl", helper.records)
    return project


def _api_error(writer: _Writer) -> None:
    """Claude Code's placeholder for a failed request: not a model call."""
    writer.add(
        "assistant",
        isApiErrorMessage=True,
        message={
            "id": "msg_error",
            "role": "assistant",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": "API Error: Request timed out."}],
            "stop_reason": "stop_sequence",
            "usage": {"input_tokens": 0, "output_tokens": 0},
        },
    )


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def copy_session(project: Path, root: Path, new_id: str) -> None:
    """The session files of `project` (a `write_session` folder) under `root`, the same
    layout, with its session id replaced by `new_id` throughout (names and contents)."""
    for path in project.rglob("*.jsonl"):
        target = root / str(path.relative_to(project)).replace(SID, new_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text().replace(SID, new_id))
