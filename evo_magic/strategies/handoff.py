"""Handoff: the model writes the state the next context needs, and the conversation restarts
from it, with no summariser call.

Source: the OpenHands SDK's `AgentResetCondenser` (the model calls `new_context(handoff=...)`,
reminded when the context is 80% full; the system and user messages and the latest batch are
kept) and Cline's `new_task` tool. A public benchmark scores such a handoff below a summary:
the figures in the docs measure it rather than assume it.

The strategy offers the model a `handoff(state)` tool. Before each call:

- When the newest batch holds a `handoff` call not yet acted on, the history becomes one user
  message (a header; the user's messages verbatim, newest first up to `user_chars`, the
  pending request always, in their order; the handoff text, marked as the agent's) and then
  that batch (the call and its results), so every tool use keeps its result. No model call.
- Else, once per fill, when the context passes `remind_at` of the session's limit, a note at
  the end of the newest message (the one the model has not seen, so the prompt cache holds)
  asks the model to hand off.
- Else, over the limit with no handoff (the model never handed off), it summarises as
  `summarise` does (`fallback`), so the context stays bounded.

The handoff is read from the history itself (the tool call's input, recorded like any), so
replay finds it where the live session did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.compact.base import Context, Edited, Message
from evo_magic.compacted import COMPACTED_HEADER, REMINDER_PREFIX, is_pin_text
from evo_magic.declared import check_fields, setting
from evo_magic.messages import as_blocks, with_blocks
from evo_magic.strategies.budget import share_of_limit
from evo_magic.strategies.params import share
from evo_magic.strategies.summarise import Summarise
from evo_magic.strategies.todo import TODO_PREFIX
from evo_magic.tools.base import Tool, ToolContext, ToolError

HANDOFF_TOOL = "handoff"
HANDOFF_HEADER = (
    "This conversation was restarted from a handoff the agent wrote to continue the work: "
    "the user's messages verbatim, then the handoff."
)
USER_PREFIX = "[the user's message, verbatim] "
STATE_PREFIX = "[handoff written by the agent for this new context]\n"


@dataclass(frozen=True)
class Handoff:
    """Offer the model a `handoff(state)` tool and restart the context from what it writes
    (see the module)."""

    remind_at: float = setting(
        0.8, "Share of the session's limit at which the model is asked to hand off.",
        check=share, rule="between 0 and 1",
    )  # fmt: skip
    user_chars: int = setting(
        20_000, "Characters of the user's messages carried verbatim (newest first).", minimum=0
    )
    max_state_chars: int = setting(
        20_000, "Longest handoff text the tool accepts, in characters.", minimum=1
    )
    fallback: bool = setting(
        True, "Summarise (as summarise does) when over the limit and the model never handed off."
    )

    name = "handoff"
    when = "every_call"
    source = "OpenHands' AgentResetCondenser (new_context(handoff=...)), Cline's new_task"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def tools(self) -> tuple[Tool, ...]:
        """The `handoff` tool."""
        return (
            Tool(
                name=HANDOFF_TOOL,
                description=(
                    "Restart your context from a handoff you write: when the context is "
                    "nearly full (you are told), write everything the work still needs (the "
                    "goal, what is done, what was found, files and decisions, the next steps). "
                    "Before your next step the conversation is replaced by the user's messages "
                    "and this text; nothing else of it stays."
                ),
                input_schema={
                    "type": "object",
                    "properties": {"state": {"type": "string", "description": "The handoff text."}},
                    "required": ["state"],
                },
                run=self._run,
                main_argument="state",
            ),
        )

    def _run(self, tool_input: dict[str, Any], ctx: ToolContext) -> str:
        self.state_of(tool_input)  # refused here when it cannot be acted on
        return "Handoff noted: the next step starts a new context from it."

    def state_of(self, tool_input: Any) -> str:
        """The handoff text of a `handoff` call's input; ToolError saying why it is refused."""
        state = tool_input.get("state") if isinstance(tool_input, dict) else None
        if not isinstance(state, str) or not state.strip():
            raise ToolError("handoff: `state` must be the handoff as non-empty text")
        if len(state) > self.max_state_chars:
            raise ToolError(
                f"handoff: {len(state):,} characters, over the {self.max_state_chars:,} it "
                "may hold: keep what the work needs"
            )
        return state

    def compact(self, messages: Sequence[Message], ctx: Context) -> Sequence[Message] | None:
        if len(messages) < 2 or messages[-1].get("role") != "user":
            return None
        state = self._fresh_handoff(messages)
        if state is not None:
            return self._restart(messages, state, ctx)
        if ctx.over_limit:
            return Summarise().compact(messages, ctx) if self.fallback else None
        if ctx.memo.get("reminded") or share_of_limit(ctx) < self.remind_at:
            return None
        ctx.memo["reminded"] = True
        note = (
            f"{REMINDER_PREFIX}The context is at {share_of_limit(ctx):.0%} of its limit. Call "
            "handoff(state) now with everything the work still needs: the conversation will "
            "restart from it and the user's messages."
        )
        last = len(messages) - 1
        return Edited(messages, {last: with_blocks(messages[-1], [{"type": "text", "text": note}])})

    def _fresh_handoff(self, messages: Sequence[Message]) -> str | None:
        """The text of a valid `handoff` call in the newest batch not yet acted on."""
        batch = messages[-2]
        if batch.get("role") != "assistant":
            return None
        for block in as_blocks(batch.get("content")):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                if block.get("name") != HANDOFF_TOOL:
                    continue
                try:
                    state = self.state_of(block.get("input"))
                except ToolError:
                    continue  # refused live: nothing to act on
                opening = messages[0].get("content") if messages else None
                done = any(
                    isinstance(b, dict) and b.get("text") == STATE_PREFIX + state
                    for b in as_blocks(opening)
                )
                return None if done else state
        return None

    def _restart(self, messages: Sequence[Message], state: str, ctx: Context) -> list[Message]:
        """The header, the user's messages, the handoff; then the newest batch."""
        texts = _user_texts(messages[:-2])
        pending = ctx.pending_request
        kept: list[str] = []
        budget = self.user_chars
        for text in reversed(texts):
            if text == pending or len(text) <= budget:
                kept.append(text)
                budget -= min(len(text), budget)
        if pending and pending not in kept:
            kept.append(pending)
        blocks = [{"type": "text", "text": HANDOFF_HEADER}]
        blocks += [{"type": "text", "text": USER_PREFIX + text} for text in reversed(kept)]
        blocks.append({"type": "text", "text": STATE_PREFIX + state})
        opening = {"role": "user", "content": blocks}
        ctx.details["handoff_chars"] = len(state)
        ctx.details["user_messages_kept"] = len(kept)
        return ctx.with_pins([opening, messages[-2], messages[-1]])


def _user_texts(messages: Sequence[Message]) -> list[str]:
    """The user's own words in `messages`, oldest first: text blocks of user messages, without
    the project's (pins, reminders, a compacted or handed-off header); a message carried by an
    earlier handoff counts as the user's."""
    texts: list[str] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in as_blocks(message.get("content")):
            text = block.get("text") if isinstance(block, dict) else None
            if not isinstance(text, str) or not text.strip():
                continue
            if text.startswith(USER_PREFIX):
                texts.append(text[len(USER_PREFIX) :])
            elif not _project_text(text):
                texts.append(text)
    return texts


def _project_text(text: str) -> bool:
    return is_pin_text(text) or text.startswith(
        (REMINDER_PREFIX, STATE_PREFIX, HANDOFF_HEADER, COMPACTED_HEADER, TODO_PREFIX)
    )
