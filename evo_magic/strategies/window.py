"""SlidingWindow: keep the first user message and the last N messages; drop the middle.

Source: the evo-agent article's section 3.1, the cheapest strategy and its known weakness (the
goal, stated early, is dropped; keeping the first user message is the usual remedy). Included
for comparison. The cut moves back to a point where no tool_use is separated from its result,
and the user's pending request is kept when the window would drop it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.compact.base import Context, Message
from evo_magic.declared import check_fields, setting
from evo_magic.strategies.params import when_parameter


def safe_cut(messages: Sequence[Message], cut: int) -> int:
    """The nearest cut at or before `cut` where `messages[cut:]` does not start with tool
    results whose calls were cut off (an assistant message, or a user message of text)."""
    while cut > 0 and _starts_with_results(messages[cut]):
        cut -= 1
    return cut


def _starts_with_results(message: Message) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and bool(content)
        and isinstance(content[0], dict)
        and content[0].get("type") == "tool_result"
    )


@dataclass(frozen=True)
class SlidingWindow:
    """Keep the first user message and the last `keep` messages (a few more when a tool call
    and its result would be split)."""

    keep: int = setting(20, "Newest messages kept (after the first user message).", minimum=1)
    when: str = when_parameter()

    name = "sliding-window"
    source = "evo-agent article, section 3.1"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> list[Message] | None:
        cut = safe_cut(messages, len(messages) - self.keep)
        if cut <= 1:
            return None  # the window already holds everything after the first message
        kept = [messages[0]]
        request = _pending_message(messages, ctx.pending_request, cut)
        if request is not None:
            kept.append(messages[request])
        return ctx.with_pins([*kept, *messages[cut:]])


def _pending_message(messages: Sequence[Message], pending: str | None, cut: int) -> int | None:
    """The index of the user message holding the pending request, when the window drops it."""
    if not pending:
        return None
    for index in range(cut - 1, 0, -1):
        message = messages[index]
        content = message.get("content")
        is_user = message.get("role") == "user" and isinstance(content, list)
        if is_user and any(isinstance(b, dict) and b.get("text") == pending for b in content):
            return index
    return None
