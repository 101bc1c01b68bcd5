"""Summarise: the seed's layer 2 (and, on request, layer 3). The whole history becomes one
user message holding a summary.

Source: the evo-agent article's full compaction: one summarisation call (no tools, 2,000
max tokens) that keeps the goal, findings and decisions, files, remaining work and user
constraints, plus the focus; the new history is a line saying it was compacted, the summary,
`Focus to preserve next: ...`, the recent files to reopen, and (evo_magic's addition) the
user's unanswered request verbatim. The summariser sees the head and the newest turns of a
conversation longer than its input limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Message


@dataclass
class Summarise:
    """Replace the whole history by the seed's compacted message. `when` may be
    "on_request" to summarise only when asked (the model's compact tool, `%compact`)."""

    when: str = "over_limit"

    name = "summarise"

    def compact(self, messages: Sequence[Message], ctx: Context) -> list[Message]:
        summary = ctx.summarise(messages, ctx.focus)
        return [ctx.compacted_message(summary)]
