"""SummariseOlder: LangChain's SummarizationMiddleware shape.

Source: LangChain's `SummarizationMiddleware(trigger=..., keep=("messages", 20))`: everything
but the last `keep` messages (or the last `keep_tokens` tokens) is summarised into one message;
the cut moves back so that no AI message is separated from its tool results. The recent
messages stay verbatim, so the model keeps its newest observations exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Message
from evo_magic.compacted import compacted_message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.params import when_parameter
from evo_magic.strategies.window import safe_cut


@dataclass(frozen=True)
class SummariseOlder:
    """Summarise all but the last `keep` messages (or, when `keep_tokens` is set, all but the
    newest messages that fit in that many tokens); those stay verbatim."""

    keep: int = setting(20, "Newest messages kept verbatim.", minimum=0)
    keep_tokens: int | None = setting(
        None, "Instead of `keep`: the newest messages that fit in this many tokens.", minimum=1
    )
    when: str = when_parameter()

    name = "summarise-older"
    source = "LangChain's SummarizationMiddleware"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> list[Message] | None:
        cut = safe_cut(messages, self._cut(messages, ctx))
        if cut <= 0:
            return None
        summary = ctx.summarise(messages[:cut], ctx.focus)
        head = compacted_message(summary, ctx.focus, ctx.recent_files, ctx.pending_request)
        return ctx.with_pins([head, *messages[cut:]])  # a pin kept in the tail is not repeated

    def _cut(self, messages: Sequence[Message], ctx: Context) -> int:
        if self.keep_tokens is None:
            return len(messages) - self.keep
        budget = self.keep_tokens
        cut = len(messages)
        while cut > 0:
            tokens = ctx.count_tokens([messages[cut - 1]])
            if tokens > budget:
                break
            budget -= tokens
            cut -= 1
        return cut
