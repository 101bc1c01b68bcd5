"""FoldFiles: after a full compaction, the signatures of the Python files the model read.

Source: Roo Code's folded file context: after it condenses a conversation, the tree-sitter
signatures of the files read are put back (capped), so the model keeps the shape of the code
without the bodies. Here the signatures come from Python's own `ast` (no tree-sitter grammar is
a dependency of the project), so only `.py` files are folded; other files stay listed by path
as the seed's summary lists recent files.

The summary is the seed's (`Summarise`'s compacted message); after it, one text block lists,
newest read first, each Python file's classes and functions with their parameters, read from
the newest result of that file in the history being compacted (what the model saw, so a replay
folds the same text; no file is read again). A file whose text does not parse (a partial read)
is skipped. The block holds at most `max_tokens` tokens and `max_files` files.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.blocks import block_at, result_text, tool_use_of
from evo_magic.strategies.dedupe import READ_TOOLS
from evo_magic.strategies.params import when_parameter

FOLD_HEADER = "Signatures of the Python files read before this compaction (bodies folded):"
_NUMBERED = re.compile(r"^\s*\d+(?:\t|\u2192)")
"""Claude Code's Read shows each line after its number and a tab (`cat -n`) or an arrow."""


@dataclass(frozen=True)
class FoldFiles:
    """Summarise, then list the signatures of the Python files read (see the module)."""

    max_tokens: int = setting(2_000, "Tokens the signatures may take at most.", minimum=1)
    max_files: int = setting(5, "Files folded at most, newest read first.", minimum=1)
    when: str = when_parameter()

    name = "fold-files"
    source = "Roo Code's folded file context (tree-sitter there; Python's ast here)"

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
        """The signatures block ("" when no Python file read parses)."""
        parts: list[str] = [FOLD_HEADER]
        budget = self.max_tokens - ctx.tokens_of_chars(len(FOLD_HEADER))
        files = 0
        for path, text in _newest_reads(messages, ctx):
            if files == self.max_files:
                break
            lines = list(signatures(text))
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
    """(path, text) of the newest whole read of each `.py` file, newest first."""
    seen: set[str] = set()
    for ref in reversed(ctx.tool_results(messages)):
        use = tool_use_of(messages, ref)
        block = block_at(messages, ref)
        if use is None or use.get("name") not in READ_TOOLS or block.get("is_error"):
            continue
        given = use.get("input") if isinstance(use.get("input"), dict) else {}
        path = str(given.get("path") or given.get("file_path") or "")
        if not path.endswith(".py") or path in seen:
            continue
        seen.add(path)
        yield path, result_text(block)


def signatures(text: str) -> Iterator[str]:
    """The class and function signatures of Python source `text`, nested ones indented;
    nothing when it does not parse."""
    lines = text.splitlines()
    if lines and _NUMBERED.match(lines[0]):  # numbered: the code is the numbered lines only
        text = "\n".join(
            _NUMBERED.sub("", line, count=1) for line in lines if _NUMBERED.match(line)
        )
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return
    yield from _walk(tree.body, "")


def _walk(body: Sequence[ast.stmt], indent: str) -> Iterator[str]:
    for node in body:
        if isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            yield f"{indent}class {node.name}({bases}):" if bases else f"{indent}class {node.name}:"
            yield from _walk(node.body, indent + "    ")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
            returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
            yield f"{indent}{kind} {node.name}({ast.unparse(node.args)}){returns}: ..."
