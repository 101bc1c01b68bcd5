"""Probes: each fact asked of a reader after a strategy's final context, one question a request.

The request is the context the strategy would send at the conversation's last call, then one
user turn with the probe (`evo_magic.probe.probe_turn`). The answer is graded by normalised
containment of the expected answer (case and whitespace folded, on word boundaries), or by a
judge model asked yes or no. Every reader and judge call is priced and cached on disk by
(context hash, question, reader, replicate), so a rerun pays nothing twice; the offline stand-in
is free and deterministic and is not cached.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo_magic.analysis.cached import read_entry, write_entry
from evo_magic.cost import PriceTable, call_cost
from evo_magic.measure import to_json
from evo_magic.messages import without_unsigned_thinking
from evo_magic.models.base import Model, ModelRequest
from evo_magic.probe import probe_turn
from evo_magic.usage import Usage

MAX_ANSWER_TOKENS = 256
JUDGE_PROMPT = (
    "A reader was asked a question about a conversation it had seen.\n\nQuestion: {question}\n"
    "Expected answer: {answer}\nThe reader's answer: {reply}\n\nDoes the reader's answer give "
    "the expected answer (in any words)? Reply with one word: yes or no."
)


@dataclass(frozen=True)
class Asked:
    """One answer to one probe."""

    reply: str
    correct: bool
    cost_usd: float | None


def default_cache_dir() -> Path:
    """Where probe answers are cached when no `cache_dir` is given."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evo_magic"


class Prober:
    """Asks probes of a reader (and a judge), priced and cached."""

    def __init__(
        self,
        reader: Model,
        judge: Model | None,
        prices: PriceTable,
        cache_dir: Path | None,
    ):
        self.reader = reader
        self.judge = judge
        self.prices = prices
        self.cache_dir = cache_dir / "probes" if cache_dir is not None else None

    def ask(
        self,
        context: Sequence[Mapping[str, Any]],
        digest: str,
        question: str,
        answer: str,
        replicate: int,
    ) -> Asked:
        """Ask `question` after `context` (whose hash is `digest`) and grade the reply."""
        request = probe_request(context, question)
        reply, cost = self._call(self.reader, request, [digest, question, replicate])
        if self.judge is None:
            return Asked(reply, contains(reply, answer), cost)
        prompt = JUDGE_PROMPT.format(question=question, answer=answer, reply=reply)
        judged = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
        verdict, judge_cost = self._call(
            self.judge, ModelRequest(judged, MAX_ANSWER_TOKENS), [prompt, replicate]
        )
        correct = verdict.strip().lower().lstrip("*\"' ").startswith("yes")
        total = None if cost is None or judge_cost is None else cost + judge_cost
        return Asked(reply, correct, total)

    def _call(
        self, model: Model, request: ModelRequest, key: list[Any]
    ) -> tuple[str, float | None]:
        cached = self._path(model, key)
        entry = read_entry(cached, ("reply",)) if cached is not None else None
        if entry is not None:  # a damaged entry is a miss: asked again, and rewritten
            return entry[0]["reply"], self._price(model, entry[1])
        reply = model.respond(request)
        text = "\n".join(b.get("text", "") for b in reply.content if b.get("type") == "text")
        if cached is not None:
            record = {"reply": text, "usage": reply.usage.as_dict(), "model": reply.model}
            write_entry(cached, record)
        return text, self._price(model, reply.usage)

    def _path(self, model: Model, key: list[Any]) -> Path | None:
        if self.cache_dir is None or getattr(model, "offline", False):
            return None
        name = hashlib.blake2b(to_json([*key, model.name]).encode(), digest_size=16).hexdigest()
        return self.cache_dir / f"{name}.json"

    def _price(self, model: Model, usage: Usage) -> float | None:
        if getattr(model, "offline", False):
            return 0.0
        priced = call_cost(usage, model.name, self.prices)
        return None if priced is None else priced.total


def context_digest(messages: Sequence[Mapping[str, Any]]) -> str:
    return hashlib.blake2b(to_json(list(messages)).encode(), digest_size=16).hexdigest()


def probe_request(context: Sequence[Mapping[str, Any]], question: str) -> ModelRequest:
    """The probe as a request: `probe_messages`, the tools the context called defined (the API
    wants them for tool blocks) and none allowed (`tool_choice` none)."""
    messages = probe_messages(context, question)
    names = {
        b["name"]
        for m in messages
        for b in m["content"]
        if b.get("type") == "tool_use" and isinstance(b.get("name"), str)
    }
    tools = [
        {
            "name": name,
            "description": "A tool of the conversation (not available now).",
            "input_schema": {"type": "object"},
        }
        for name in sorted(names)
    ]
    choice = {"type": "none"} if tools else None
    return ModelRequest(messages, MAX_ANSWER_TOKENS, tools=tools, tool_choice=choice)


def probe_messages(context: Sequence[Mapping[str, Any]], question: str) -> list[dict[str, Any]]:
    """The context as the API takes it (thinking without a signature and image stand-ins,
    which a rebuilt transcript cannot send, become short text), then the probe turn."""
    messages = [_sendable(m) for m in context]
    turn = {"type": "text", "text": probe_turn(question)}
    if messages and messages[-1]["role"] == "user":
        messages[-1] = {**messages[-1], "content": [*messages[-1]["content"], turn]}
    else:
        messages.append({"role": "user", "content": [turn]})
    return messages


def _sendable(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {"role": message["role"], "content": [{"type": "text", "text": content}]}
    # Unsigned thinking: the one rule every request builder shares (the API refuses it).
    (message,) = without_unsigned_thinking([message])
    blocks = []
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "redacted_thinking":
            # Probes' own rule, on top: redacted thinking is encrypted for the model that wrote
            # it and never carries a signature, while a probe's reader is usually another
            # model (or the offline stand-in); the reader learns nothing from it, so it stays out.
            continue
        if kind == "image" and "data" not in (block.get("source") or {}):
            blocks.append({"type": "text", "text": "[image]"})
        elif kind == "tool_result" and isinstance(block.get("content"), list):
            parts = [
                p if p.get("type") == "text" else {"type": "text", "text": "[image]"}
                for p in block["content"]
                if isinstance(p, dict)
            ]
            blocks.append({**block, "content": parts})
        else:
            blocks.append(block)
    if not blocks:
        blocks = [{"type": "text", "text": "[thinking]"}]
    return {"role": message["role"], "content": blocks}


def _folded(text: str) -> str:
    return " ".join(text.casefold().split()).strip("`'\" ")


def contains(reply: str, answer: str) -> bool:
    """True when `reply` holds `answer` (case and whitespace folded; not inside a longer word)."""
    expected = _folded(answer)
    if not expected:
        return False
    pattern = (r"(?<!\w)" if expected[0].isalnum() or expected[0] == "_" else "") + re.escape(
        expected
    )
    pattern += r"(?!\w)" if expected[-1].isalnum() or expected[-1] == "_" else ""
    return re.search(pattern, " ".join(reply.casefold().split())) is not None
