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

With `as_system=True` the note is no edit: it goes with the next call only, as a
mid-conversation system message after the newest message (`{"role": "system", "content": ...,
"clear_at": "next_user_message"}`, beta `mid-conversation-system-clear-at-2026-08-21`), past the
cache breakpoints, and is recorded on the call's record (`turn_note`); the history never holds
it, so nothing is rewritten and a later compaction never summarises it. Replay adds its tokens
to the call that carried it.

Otherwise the note joins the history like any message (replay runs the same strategy, so it
counts its tokens) and is recorded as an every-call edit (`MicroCompacted`, strategy
"token-budget"). It never breaks the prompt cache: the newest message is past the cached
prefix. The marks start again after a full compaction (the context is small again). The window
is `window_tokens`, or the model's (`evo_magic.catalog.context_window`); unknown, only the
compaction warning is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evo_magic.catalog import context_window
from evo_magic.compact.base import Context, Edited, Message
from evo_magic.compacted import REMINDER_PREFIX
from evo_magic.declared import check_fields, setting
from evo_magic.messages import with_blocks
from evo_magic.strategies.params import share, shares


@dataclass(frozen=True)
class TokenBudget:
    """Tell the model the share of its context window used at each mark, and once before an
    automatic compaction (see the module)."""

    window_tokens: int | None = setting(
        None, "The window in tokens (None: the model's, from the model table).", minimum=1
    )
    marks: tuple[float, ...] = setting(
        (0.25, 0.5, 0.75),
        "Shares of the window at which the model is told (each once per fill).",
        check=shares,
        rule="shares between 0 and 1",
    )
    before_compaction: bool = setting(
        True, "Also warn once when the context nears the session's compaction limit."
    )
    warn_share: float = setting(
        0.9,
        "That warning comes at this share of the compaction limit.",
        check=share,
        rule="between 0 and 1",
    )

    as_system: bool = setting(
        False,
        "Send the note as a mid-conversation system message for the turn only (no history "
        "rewrite; the API's beta mid-conversation-system-clear-at-2026-08-21).",
    )

    name = "token-budget"
    when = "every_call"
    source = "Codex's TokenBudget (a note to the model, not a compaction)"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

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
        if "window" not in memo or memo["window"] != window:  # a new window: its marks afresh
            memo.clear()
            memo.update(window=window, told=0.0, warned=False)
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
        share = share_of_limit(ctx)
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
        if self.as_system:  # for this call only, after the newest message: no rewrite
            ctx.turn_notes.append(REMINDER_PREFIX + " ".join(notes))
            return None
        return ctx.edit(messages, {len(messages) - 1: _with_note(messages[-1], " ".join(notes))})


def share_of_limit(ctx: Context) -> float:
    """How full the context is against the session's compaction limit (the fuller of
    characters and, when set, tokens); 0 when there is no limit."""
    shares = [ctx.size.chars / ctx.context_limit] if ctx.context_limit else []
    if ctx.token_limit:
        shares.append(ctx.size.tokens / ctx.token_limit)
    return max(shares, default=0.0)


def _with_note(message: Message, note: str) -> Message:
    """`message` with a text block holding `note` after its blocks (after any tool results,
    as the API requires)."""
    return with_blocks(message, [{"type": "text", "text": REMINDER_PREFIX + note}])
