"""DedupeReads: a file read again unchanged leaves one copy of its text in the context.

Source: Claude Code's Read tool (a re-read of an unchanged file answers "File unchanged since
last read" instead of the text), Cline's duplicate file read removal (done before it truncates
anything), and pydantic-ai's `DeduplicateFileReads` history processor.

Before every call, a read result whose call (same tool, same input: path, offset, limit) is
repeated later with the same content (a SHA-256 of its text) is replaced by a pointer to the
newer result, which stays whole: the model keeps the text once, where it last read it (a
third read makes the second a pointer to it; the first keeps pointing to the second, so no
pointer is written twice). A read
that returned something else (the file changed), an error, or a result already edited by
another strategy stays as it is. The history's originals stay on disk, as for every edit.

Replacing an old result breaks the prompt cache from its message on; as MicroCompact and
cache-aware masking do, a pass replaces the duplicates due only when that pays
(`Context.clearing_pays`): the tokens freed, read `calls_ahead` more times, must cost more than
the cache write it causes; over the limit, when it brings the history under it. Duplicates
that wait are replaced together later.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.compact.base import Context, Edited, Message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.blocks import (
    block_at,
    json_chars,
    result_text,
    rewrite_blocks,
    tool_use_of,
)
from evo_magic.strategies.params import calls_ahead_parameter

POINTER = (
    "[Unchanged: {path} was read again later with the same content (tool use {newer}); "
    "that result is the one to use.]"
)
READ_TOOLS = frozenset({"read_file", "Read"})
"""evo_magic's file tool and Claude Code's."""


@dataclass(frozen=True)
class DedupeReads:
    """Replace a file read repeated later with the same content by a pointer to the newer
    read; see the module."""

    tools: frozenset[str] = setting(READ_TOOLS, "Tools whose results are file reads.")
    cache_aware: bool = setting(
        True,
        "Replace only when that saves more than the prompt-cache write it causes; False: "
        "whenever a duplicate appears.",
    )
    calls_ahead: int = calls_ahead_parameter()

    name = "dedupe-reads"
    when = "every_call"
    source = (
        "Claude Code's Read (unchanged file), Cline's duplicate file reads, pydantic-ai's "
        "DeduplicateFileReads"
    )

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> Edited | None:
        memo = ctx.memo
        refs = ctx.tool_results(messages)
        due: list[tuple[Any, str, str, str]] = memo.setdefault("due", [])
        last: dict[str, tuple[Any, str]] = memo.setdefault("last", {})
        for ref in refs[memo.get("scanned", 0) :]:  # each result is looked at once
            read = self._read(messages, ref)
            if read is None:
                continue
            key, digest, path = read
            if key in last and last[key][1] == digest:
                due.append((last[key][0], digest, path, ref.tool_use_id))
            last[key] = (ref, digest)
        memo["scanned"] = len(refs)
        replacements, freed = [], 0
        for ref, digest, path, newer in due:
            block = block_at(messages, ref)
            if _digest(block) != digest:
                continue  # edited since (by another strategy): not a copy any more
            pointer = POINTER.format(path=path, newer=newer)
            freed += json_chars(block.get("content", "")) - json_chars(pointer)
            replacements.append((ref.index, ref.block_index, {**block, "content": pointer}))
        if not replacements or freed <= 0:
            memo["due"] = []
            return None
        first = min(index for index, _, _ in replacements)
        if self.cache_aware and not ctx.clearing_pays(first, freed, self.calls_ahead):
            return None  # the cache write it causes costs more than it saves: wait
        memo["due"] = []
        return rewrite_blocks(messages, replacements)

    def _read(self, messages: Sequence[Message], ref: Any) -> tuple[str, str, str] | None:
        """(the call's key, the result's digest, the path shown) of a read result; None for
        any other result, an error, or a result without its call."""
        block = block_at(messages, ref)
        use = tool_use_of(messages, ref)
        if use is None or use.get("name") not in self.tools or block.get("is_error"):
            return None
        given = use.get("input") or {}
        key = json.dumps([use.get("name"), given], sort_keys=True, default=str)
        path = given.get("path") or given.get("file_path") if isinstance(given, dict) else None
        return key, _digest(block), str(path or key)


def _digest(block: dict[str, Any]) -> str:
    return hashlib.sha256(result_text(block).encode("utf-8", "surrogatepass")).hexdigest()
