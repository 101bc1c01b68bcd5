"""FoldFiles: after a full compaction, the signatures of the source files the model read.

Source: Roo Code's folded file context: after it condenses a conversation, the tree-sitter
signatures of the files read are put back (capped), so the model keeps the shape of the code
without the bodies. Python's signatures come from its own `ast`; JavaScript, TypeScript, Go
and Rust from tree-sitter with the grammars of the `fold` extra
(`evo_magic.strategies.signatures`). A file of such a language read without its grammar is left
out, and the user is told at the compaction, in one line (a `Notice`), which extra folds it;
other files stay listed by path as the seed's summary lists recent files.

The summary is the seed's (`Summarise`'s compacted message); after it, one text block lists,
newest read first, each source file's classes, functions and types with their parameters, read
from the newest result of that file in the history being compacted (what the model saw, so a
replay folds the same text; no file is read again). A file whose text gives no signature (a
partial Python read that does not parse) is skipped. The block holds at most `max_tokens`
tokens and `max_files` files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.blocks import block_at, result_text, tool_use_of
from evo_magic.strategies.dedupe import READ_TOOLS
from evo_magic.strategies.params import when_parameter
from evo_magic.strategies.signatures import MissingGrammar, folds
from evo_magic.strategies.signatures import signatures as source_signatures

FOLD_HEADER = "Signatures of the source files read before this compaction (bodies folded):"
_NUMBERED = re.compile(r"^\s*\d+(?:\t|\u2192)")
"""Claude Code's Read shows each line after its number and a tab (`cat -n`) or an arrow."""


@dataclass(frozen=True)
class FoldFiles:
    """Summarise, then list the signatures of the source files read (see the module)."""

    max_tokens: int = setting(2_000, "Tokens the signatures may take at most.", minimum=1)
    max_files: int = setting(5, "Files folded at most, newest read first.", minimum=1)
    when: str = when_parameter()

    name = "fold-files"
    source = "Roo Code's folded file context (tree-sitter; Python's own ast)"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> list[Message] | None:
        summary = ctx.summarise(messages, ctx.focus)
        head = ctx.compacted_message(summary)
        folded = self.folded(messages, ctx)
        if folded:
            block = {"type": "text", "text": folded}
            head = {**head, "content": [*head["content"], block]}
            ctx.details["folded_files"] = folded.count("\n## ")
        return [head]

    def folded(self, messages: Sequence[Message], ctx: Context) -> str:
        """The signatures block ("" when no source file read gives a signature)."""
        parts: list[str] = [FOLD_HEADER]
        budget = self.max_tokens - ctx.tokens_of_chars(len(FOLD_HEADER))
        files = 0
        for path, text in _newest_reads(messages, ctx):
            if files == self.max_files:
                break
            try:
                lines = list(signatures(text, path))
            except MissingGrammar as missing:
                _note_once(ctx, str(missing))
                continue
            if not lines:
                continue
            section = "\n".join([f"## {path}", *lines])
            cost = ctx.tokens_of_chars(len(section) + 1)
            if cost > budget:
                continue
            parts.append(section)
            budget -= cost
            files += 1
        return "\n".join(parts) if files else ""


def _newest_reads(messages: Sequence[Message], ctx: Context) -> Iterator[tuple[str, str]]:
    """(path, text) of the newest whole read of each source file folded, newest first."""
    seen: set[str] = set()
    for ref in reversed(ctx.tool_results(messages)):
        use = tool_use_of(messages, ref)
        block = block_at(messages, ref)
        if use is None or use.get("name") not in READ_TOOLS or block.get("is_error"):
            continue
        given = use.get("input") if isinstance(use.get("input"), dict) else {}
        path = str(given.get("path") or given.get("file_path") or "")
        if not folds(path) or path in seen:
            continue
        seen.add(path)
        yield path, result_text(block)


def signatures(text: str, path: str = "source.py") -> list[str]:
    """The signatures of source `text` of the file `path` (Python by default), nested ones
    indented; Claude Code's numbered lines are read as the code they number. Raises
    `MissingGrammar` when the language's grammar is not installed."""
    lines = text.splitlines()
    if lines and _NUMBERED.match(lines[0]):  # numbered: the code is the numbered lines only
        text = "\n".join(
            _NUMBERED.sub("", line, count=1) for line in lines if _NUMBERED.match(line)
        )
    return source_signatures(path, text)


def _note_once(ctx: Context, note: str) -> None:
    """Tell the user `note` (a grammar missing) once per language and compaction."""
    if note not in ctx.notes:
        ctx.notes.append(note)
