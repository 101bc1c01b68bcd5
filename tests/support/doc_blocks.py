"""The ```python blocks of a Markdown page, to run as the docs tests do.

A small runner of our own rather than pytest-markdown-docs: a page's blocks must run in order in
one namespace (a later block uses what an earlier one made), in a folder prepared with copies of
the repository's fixtures, and a failure must name the page and the line in it. That plugin runs
each fence as its own test unless every later fence is marked as a continuation, and has no
place to prepare the folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^```(\S*)(.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (the first line of code, 1-based), its info string's
    language and words, and its code."""

    page: Path
    line: int
    language: str
    words: tuple[str, ...]
    code: str

    @property
    def runs(self) -> bool:
        """A ```python block runs unless it says `notest`."""
        return self.language == "python" and "notest" not in self.words

    def compiled(self):
        """The code compiled so that a traceback names the page and the page's own line."""
        padded = "\n" * (self.line - 1) + self.code
        return compile(padded, str(self.page), "exec")


def blocks(page: Path) -> list[Block]:
    """Every fenced block of `page`, in order (fences inside fences are not a thing in the
    pages: a fence opens at ``` with an info string and closes at a bare ```)."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").split("\n")
    opened: tuple[int, str, tuple[str, ...]] | None = None
    body: list[str] = []
    for number, line in enumerate(lines, start=1):
        match = FENCE.match(line)
        if opened is None and match:
            opened = (number + 1, match.group(1), tuple(match.group(2).split()))
            body = []
        elif opened is not None and line.rstrip() == "```":
            start, language, words = opened
            found.append(Block(page, start, language, words, "\n".join(body) + "\n"))
            opened = None
        elif opened is not None:
            body.append(line)
    if opened is not None:
        raise ValueError(f"{page}:{opened[0] - 1}: a code fence that is never closed")
    return found
