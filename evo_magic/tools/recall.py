"""What `recall` reads: the originals of a session (its transcript's message records and the
snapshots every replaced history leaves), indexed for a literal and a ranked search, and read
back a page at a time.

The transcript is append-only, so the index reads only what was appended since its last look
(complete lines; a torn last line waits for the next). An original is a tool result (its id is
the tool use's, as the placeholders name it: a `tool_result` record, written as soon as the
tool returns), or the text of a message (`msg-<seq>`, the record's number). The first record
of an id is the original: a later one (a message rewritten by a strategy) never replaces it.
Everything read is data: a line that is not a record of the expected shape is skipped, and
only regular files inside the folder are read, never through a link.

Ranked search is BM25 (k1 1.2, b 0.75) over lower-cased word tokens, computed here: DuckDB's
`fts` extension is not in its wheel (it is downloaded on first use), and a session holds a few
thousand originals at most.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo_magic.tools.base import ToolError

SESSION_FILE = "session.jsonl"
SNAPSHOTS = "snapshots"
_WORD = re.compile(r"\w+")
K1, B = 1.2, 0.75


@dataclass(frozen=True)
class Original:
    """One original: its id, what it is ("tool_result", "user", "assistant"), a label (the
    tool and its main input), and its whole text."""

    id: str
    kind: str
    label: str
    text: str


@dataclass(frozen=True)
class Hit:
    """One search result: the original, and a snippet of its text around the match."""

    original: Original
    snippet: str
    score: float


@dataclass
class Originals:
    """The originals of one session folder, read incrementally (see the module)."""

    folder: Path
    found: dict[str, Original] = field(default_factory=dict)
    _offset: int = 0
    _snapshots: set[str] = field(default_factory=set)
    _calls: dict[str, tuple[str, Any]] = field(default_factory=dict)
    _texts: set[str] = field(default_factory=set)
    """The message texts found: a snapshot repeats the transcript's, one copy is enough."""

    def refresh(self) -> None:
        """Read what the transcript and the snapshots gained since the last refresh."""
        data = _read_regular(self.folder / SESSION_FILE, self._offset)
        end = data.rfind(b"\n") + 1  # a torn last line waits for the next refresh
        for line in data[:end].splitlines():
            record = _json(line)
            kind = record.get("kind")
            if kind == "message" and isinstance(record.get("message"), dict):
                self._add(record["message"], f"msg-{record.get('seq')}")
            elif kind == "tool_result" and isinstance(record.get("block"), dict):
                self._add_result(record["block"])
        self._offset += end
        snapshots = self.folder / SNAPSHOTS
        if snapshots.is_dir() and not snapshots.is_symlink():
            for path in sorted(snapshots.glob("compaction-*.jsonl")):
                if path.name not in self._snapshots:
                    self._snapshots.add(path.name)
                    for number, line in enumerate(_read_regular(path, 0).splitlines()):
                        self._add(_json(line), f"{path.stem}-{number}")

    def _add(self, message: dict[str, Any], text_id: str) -> None:
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if role not in ("user", "assistant") or not isinstance(content, list):
            return
        texts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_use" and isinstance(block.get("id"), str):
                self._calls.setdefault(block["id"], (str(block.get("name")), block.get("input")))
            elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                self._add_result(block)
        text = "\n".join(texts)
        if texts and text_id not in self.found and text not in self._texts:
            self._texts.add(text)
            self.found[text_id] = Original(text_id, str(role), role, text)

    def _add_result(self, block: dict[str, Any]) -> None:
        tool_use_id = block.get("tool_use_id")
        if not isinstance(tool_use_id, str) or tool_use_id in self.found:
            return  # the first is the original
        name, tool_input = self._calls.get(tool_use_id, ("tool", None))
        label = name if not tool_input else f"{name} {json.dumps(tool_input)[:120]}"
        self.found[tool_use_id] = Original(tool_use_id, "tool_result", label, block_text(block))

    def literal(self, query: str, limit: int, snippet: int) -> tuple[list[Hit], int]:
        """The originals that contain `query` (case-insensitive), newest first, at most
        `limit`; and how many contain it in all."""
        needle = query.lower()
        matched = [o for o in reversed(self.found.values()) if needle in o.text.lower()]
        hits = [
            Hit(o, _snippet(o.text, o.text.lower().find(needle), len(query), snippet), 1.0)
            for o in matched[:limit]
        ]
        return hits, len(matched)

    def ranked(self, query: str, limit: int, snippet: int) -> tuple[list[Hit], int]:
        """The originals ranked by BM25 for the words of `query`, best first, at most `limit`;
        and how many hold at least one of the words."""
        terms = set(_words(query))
        if not terms:
            return [], 0
        originals = list(self.found.values())
        counts = [Counter(_words(o.text)) for o in originals]
        average = sum(sum(c.values()) for c in counts) / max(len(counts), 1) or 1.0
        frequency = {t: sum(1 for c in counts if t in c) for t in terms}
        scored = []
        for original, count in zip(originals, counts, strict=True):
            length = sum(count.values())
            score = 0.0
            for term in terms:
                tf = count.get(term, 0)
                if tf:
                    n = frequency[term]
                    idf = math.log(1 + (len(originals) - n + 0.5) / (n + 0.5))
                    score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
            if score > 0:
                scored.append((score, original))
        scored.sort(key=lambda pair: -pair[0])
        hits = []
        for score, original in scored[:limit]:
            lower = original.text.lower()
            at = min((i for t in terms if (i := _word_at(lower, t)) >= 0), default=0)
            hits.append(Hit(original, _snippet(original.text, at, 0, snippet), score))
        return hits, len(scored)


def _read_regular(path: Path, offset: int) -> bytes:
    """The bytes of `path` from `offset`: a regular file, never through a link (b"" when
    there is none)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise ToolError(f"recall: cannot read the session's originals ({exc.strerror})") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        os.lseek(fd, offset, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _json(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def block_text(block: Any) -> str:
    """The text of a tool_result block (its string, or its text parts joined)."""
    if not isinstance(block, dict):
        return ""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _word_at(lower: str, term: str) -> int:
    match = re.search(rf"\b{re.escape(term)}\b", lower)
    return match.start() if match else -1


def _snippet(text: str, at: int, length: int, width: int) -> str:
    """About `width` characters of `text` around position `at`, on one line."""
    start = max(at - width // 3, 0)
    piece = text[start : start + width].replace("\n", " ")
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")
