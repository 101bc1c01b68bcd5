"""TokenBudget: tell the model how much of its context window is used.

Source: Codex's TokenBudget (openai/codex): the model is told the tokens left when the prompt
crosses 25, 50 and 75% of the window, and once before an automatic compaction; Inspect AI
likewise warns the model to save what matters before it compacts.

Before each model call, when the prompt has crossed a mark (a share of the window) it had not
crossed yet, a short text block goes at the end of the newest message, the one the model has
not seen: it says the tokens used, the share of the window and the tokens left. A prompt that
jumps over several marks at once gets one note. Once, when the context first reaches
`warn_share` of the session's compaction limit (and an automatic compaction can follow), the
note also says that the conversation will soon be replaced by a summary, so that the model
writes down what must survive. Nothing is told before a call that a full compaction precedes
(the note would be summarised at once).

The note joins the history like any message (replay runs the same strategy, so it counts its
tokens) and is recorded as an every-call edit (`MicroCompacted`, strategy "token-budget"). It
never breaks the prompt cache: the newest message is past the cached prefix. The marks start
again after a full compaction (the context is small again). The window is `window_tokens`, or
the model's (`evo_magic.models.catalog.context_window`); unknown, only the compaction warning
is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.compact.base import Context, Edited, Message
from evo_magic.compacted import REMINDER_PREFIX
from evo_magic.models.catalog import context_window


@dataclass
class TokenBudget:
    """Tell the model the share of its context window used at each mark, and once before an
    automatic compaction (see the module)."""

    window_tokens: int | None = None
    """The window in tokens; None: the model's, from the model table."""
    marks: Sequence[float] = (0.25, 0.5, 0.75)
    """Shares of the window at which the model is told (each once per fill)."""
    before_compaction: bool = True
    """Also warn once when the context nears the session's compaction limit."""
    warn_share: float = 0.9
    """That warning comes at this share of the compaction limit (characters, or tokens when
    the session has a token limit)."""

    name = "token-budget"
    when = "every_call"

    def __post_init__(self) -> None:
        self.marks = tuple(sorted(float(m) for m in self.marks))
        if any(not 0 < m < 1 for m in self.marks):
            raise ValueError(f"TokenBudget.marks must be shares between 0 and 1, got {self.marks}")
        if self.window_tokens is not None and (
            isinstance(self.window_tokens, bool)
            or not isinstance(self.window_tokens, int)
            or self.window_tokens <= 0
        ):
            raise ValueError(f"TokenBudget.window_tokens must be > 0, got {self.window_tokens!r}")
        if not 0 < self.warn_share < 1:
            raise ValueError(
                f"TokenBudget.warn_share must be between 0 and 1, got {self.warn_share}"
            )

    def window(self, ctx: Context) -> int | None:
        """The window the shares are of: `window_tokens`, else the model's (None: unknown)."""
        if self.window_tokens is not None:
            return self.window_tokens
        return context_window(ctx.model) if ctx.model else None

    def compact(self, messages: Sequence[Message], ctx: Context) -> Edited | None:
        if not messages or messages[-1].get("role") != "user" or ctx.compaction_due:
            return None  # (when a compaction is due, a summary replaces the history right after)
        memo = ctx.memo
        window = self.window(ctx)
        if memo.get("key") != (self.marks, window):
            memo.clear()
            memo.update(key=(self.marks, window), told=0.0, warned=False)
        notes = []
        used = ctx.size.tokens
        if window:
            crossed = [m for m in self.marks if used >= m * window and m > memo["told"]]
            if crossed:
                memo["told"] = crossed[-1]
                notes.append(
                    f"{used:,} of the {window:,}-token context window are used "
                    f"({used / window:.0%}); {max(window - used, 0):,} tokens are left."
                )
        share = self._share_of_limit(ctx)
        warn = self.before_compaction and ctx.auto_compaction and not memo["warned"]
        if warn and share >= self.warn_share:
            memo["warned"] = True
            notes.append(
                f"The context is at {share:.0%} of the size at which it is compacted "
                "automatically: soon the conversation will be replaced by a summary. Write "
                "down now (in a file) what must survive it."
            )
        if not notes:
            return None
        return ctx.edit(messages, {len(messages) - 1: _with_note(messages[-1], " ".join(notes))})

    @staticmethod
    def _share_of_limit(ctx: Context) -> float:
        shares = [ctx.size.chars / ctx.context_limit] if ctx.context_limit else []
        if ctx.token_limit:
            shares.append(ctx.size.tokens / ctx.token_limit)
        return max(shares, default=0.0)


def _with_note(message: Message, note: str) -> dict[str, Any]:
    """`message` with a text block holding `note` after its blocks (after any tool results,
    as the API requires)."""
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    return {**message, "content": [*blocks, {"type": "text", "text": REMINDER_PREFIX + note}]}
