"""LargeOutputs: the seed's hidden layer 0. A tool output too large for the context is saved to
a file; the context keeps its path and a preview.

Source: evo-agent's large-output handling (outputs over 30,000 bytes go to
`tool-results/<id>.txt`, the context keeps a 2,000-byte preview).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Edited, Message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.blocks import block_at, result_text, rewrite_blocks

MARKER = (
    "[Output too large for the context: {chars:,} characters, saved to {path}. Read it with "
    "read_file (offset/limit) if you need more. The first {shown:,} characters:]\n"
)
_MARKER = re.compile(
    r"\[Output too large for the context: [\d,]+ characters, saved to .+?\. Read it with "
    r"read_file \(offset/limit\) if you need more\. The first (?P<shown>[\d,]+) characters:\]\n"
)


def is_preview(text: str) -> bool:
    """Whether `text` is a preview this strategy wrote: its marker, then exactly as many
    characters as the marker says. Such a result was moved already; its file is what the
    context points to, and neither is ever rewritten."""
    match = _MARKER.match(text)
    return match is not None and len(text) - match.end() == int(match["shown"].replace(",", ""))


@dataclass(frozen=True)
class LargeOutputs:
    """Save each tool result longer than `limit` characters to a file and keep a preview of
    its first `preview_chars` characters in the context. Runs before every model call and
    looks only at results it has not seen; a result already moved (a preview) is never moved
    again, whatever the limit, so the file it points to is never overwritten."""

    limit: int = setting(
        30_000, "Tool outputs longer than this many characters go to a file.", minimum=1
    )
    preview_chars: int = setting(
        2_000, "Characters of such an output kept in the context.", minimum=0
    )

    name = "large-outputs"
    when = "every_call"
    source = "evo-agent's layer 0 (large outputs to files)"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> Edited | None:
        refs = ctx.tool_results(messages)
        start = min(ctx.memo.get("done", 0), len(refs))  # the results seen in earlier passes
        chosen = []
        for ref in refs[start:]:
            block = block_at(messages, ref)
            text = result_text(block)
            if len(text) <= self.limit or is_preview(text):
                continue
            path = ctx.save_output(ref.tool_use_id, text)
            preview = text[: self.preview_chars]
            marker = MARKER.format(chars=len(text), path=path, shown=len(preview))
            chosen.append((ref.index, ref.block_index, {**block, "content": marker + preview}))
        ctx.memo["done"] = len(refs)
        return rewrite_blocks(messages, chosen) if chosen else None
