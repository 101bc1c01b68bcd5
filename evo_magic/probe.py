"""Retention probes: how a question about a conversation is asked, and the literal reading the
offline stand-in gives it.

A probe is the conversation followed by one user turn: `PROBE_HEADER`, an instruction to answer
from the conversation only, and one question. A cloze question holds the fact's text with one
token replaced by `BLANK` between `<cloze>` tags. What a reader sees of a block is `block_text`
(the text of text, tool result and thinking blocks; the string values of a tool call's input),
the same text retention searches when it decides whether a fact is kept.

`answer_from_context` is a keyword search, not recall: it fills the blank with every span of
the conversation that fits the cloze's surroundings (or, for a free question, returns the lines
holding the question's distinctive terms), else "I don't know". So the offline stand-in's
accuracy on cloze probes is the share of facts literally present: the keyword-search baseline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evo_magic.messages import content_blocks

PROBE_HEADER = "[retention probe]"
BLANK = "____"
INSTRUCTION = (
    "Answer the question below from the conversation above only: do not guess, do not use "
    'tools. If the conversation does not say, answer "I don\'t know". Answer briefly.'
)
UNKNOWN = "I don't know."
TOKEN = r"\w+(?:[-.]\w+)*"
"""A maskable token: a word, or words joined by '-' or '.' (BLUE-HERON-7, config.py, 0xBEEF)."""
_CLOZE = re.compile(r"<cloze>\n(.*)\n</cloze>", re.DOTALL)
_TERM = re.compile(TOKEN)


def block_text(block: Mapping[str, Any]) -> str:
    """The text a reader sees in a content block ("" for images and unknown blocks)."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
        return ""
    if kind == "tool_use":
        return "\n".join(_strings(block.get("input")))
    if kind == "thinking":
        return str(block.get("thinking") or "")
    for key in ("content", "text"):  # compaction blocks and the like
        if isinstance(block.get(key), str):
            return block[key]
    return ""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def normalise(text: str) -> str:
    """Whitespace collapsed to single spaces (how facts other than instructions are matched)."""
    return " ".join(text.split())


def cloze_question(cloze: str) -> str:
    """The question of a cloze probe: `cloze` holds `BLANK` once."""
    return (
        f"In the conversation, what exactly stands where the blank ({BLANK}) is in this "
        f"text?\n<cloze>\n{cloze}\n</cloze>"
    )


def probe_turn(question: str) -> str:
    """The text of the user turn that asks one probe."""
    return f"{PROBE_HEADER} {INSTRUCTION}\n\nQuestion: {question}"


def probe_question(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The question when the last user turn of `messages` is a probe, else None."""
    if not messages or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content")
    last = content if isinstance(content, str) else None
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = content[-1].get("text") if content[-1].get("type") == "text" else None
    if not isinstance(last, str) or not last.startswith(PROBE_HEADER):
        return None
    return last.split("\n\nQuestion: ", 1)[-1]


def answer_from_context(messages: Sequence[Mapping[str, Any]], question: str) -> str:
    """The offline reading of a probe (see the module docstring); the probe turn itself is not
    read."""
    texts = _texts_before_probe(messages)
    found = _CLOZE.search(question)
    spans = fill_blank(found.group(1), texts) if found else _lines_about(question, texts)
    return "; ".join(spans) if spans else UNKNOWN


def _texts_before_probe(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    texts = []
    for position, message in enumerate(messages):
        blocks = content_blocks(message)
        if position == len(messages) - 1 and blocks:
            blocks = blocks[:-1]  # the probe turn
        texts += [block_text(b) for b in blocks]
    return texts


def fill_blank(cloze: str, texts: list[str]) -> list[str]:
    """Every distinct span that stands where the blank is, in order of first appearance."""
    before, _, after = normalise(cloze).partition(BLANK)
    pattern = re.compile(
        ("" if before else r"(?<![\w.-])")
        + re.escape(before)
        + f"({TOKEN})"
        + re.escape(after)
        + ("" if after else r"(?![\w-])")
    )
    spans: dict[str, None] = {}
    for text in map(normalise, texts):
        if (before and before not in text) or (after and after not in text):
            continue
        for match in pattern.finditer(text):
            spans.setdefault(match.group(1), None)
    return list(spans)


def _lines_about(question: str, texts: list[str]) -> list[str]:
    """Lines holding every distinctive term of the question (names, numbers, paths)."""
    terms = [t for t in _TERM.findall(question) if _distinctive(t)]
    if not terms:
        return []
    lines: dict[str, None] = {}
    for text in texts:
        if all(term in text for term in terms):
            for line in text.splitlines():
                if all(term in line for term in terms):
                    lines.setdefault(line.strip(), None)
    return list(lines)[:5]


def _distinctive(term: str) -> bool:
    return (
        any(c.isdigit() or c in "_-." for c in term)
        or any(c.isupper() for c in term[1:])
        or len(term) >= 10
    )
