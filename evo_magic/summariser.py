"""The summariser: one model call, no tools, that turns a conversation into a summary.

The summariser sees the conversation's beginning AND its newest turns when it is longer than
`input_limit`; the focus reaches it word for word; a reply that is empty, not text, or cut off
at `max_tokens` is an error, never a summary. It may be another model than the session's own,
with another prompt (`Session(summariser=Summariser(model=..., instructions=...))`).

`Summariser(in_context=True)` asks in the conversation itself instead, as Claude Code does: the
agent's own system prompt, tools and messages, then the instructions in a user turn, with tools
turned off (`tool_choice: none`). That request repeats the prompt the agent's last call cached,
so the conversation is read from the cache (a tenth of the input price) instead of being sent
again as text; it needs the session's own model, a conversation that can be continued (no call
left unanswered) and one within `input_limit`, and falls back to the text request otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.declared import check_fields, setting
from evo_magic.measure import message_chars, to_json
from evo_magic.messages import blocks_of_type, content_blocks, without_unsigned_thinking
from evo_magic.models.base import Model, ModelReply, ModelRequest
from evo_magic.prompt_cache import CacheSettings
from evo_magic.usage import Usage

SUMMARY_INSTRUCTIONS = """\
You are compacting the conversation of a coding agent so that it can continue its work with a \
much smaller context. Summarise the conversation below. Preserve:
1. The current goal: what the user asked for, in their words where it matters.
2. Important findings and decisions, with the reasons.
3. Files read or changed: paths and what matters about them.
4. Remaining work: what is done, what is next.
5. User constraints and preferences.
Be compact but concrete: names, paths, numbers, commands, error messages. \
Answer with the summary only."""
FOCUS_INSTRUCTION = "\n\nThe user asked that the summary preserve, above all: {focus}"
IN_CONTEXT_NOTE = (
    "The conversation to summarise is everything above this message. Do not continue the "
    "work and do not call tools.\n\n"
)
OMITTED = "\n[... {n} characters from the middle of the conversation omitted ...]\n"
HEAD_SHARE = 0.25


class SummaryError(Exception):
    """The summariser's reply cannot replace the history (empty, not text, cut off, too large)."""


@dataclass(frozen=True)
class Summary:
    """A summary and what it cost."""

    text: str
    usage: Usage
    model: str
    cost_usd: float | None = None
    """USD, priced by the session (None: not priced, or the model has no price)."""


@dataclass(frozen=True)
class AgentPrompt:
    """What the agent's requests send besides the messages: an in-context summary request
    repeats it, so that it matches the prefix the agent's last call cached."""

    system: str
    tools: list[dict[str, Any]]
    cache: CacheSettings | None = None


@dataclass(frozen=True)
class Summariser:
    """How summaries are made. `model=None` uses the session's own model. A session without
    a summariser of its own makes one with its policy's `summary_*` settings, which are these
    fields' declarations (`CompactPolicy.summariser`)."""

    model: Model | None = None
    instructions: str = SUMMARY_INSTRUCTIONS
    input_limit: int = setting(
        80_000, "Characters of conversation the summariser sees (head and tail kept).", minimum=1
    )
    max_tokens: int = setting(2_000, "max_tokens of the summary request.", minimum=1)
    in_context: bool = setting(
        False,
        "Ask for summaries in the conversation itself (the agent's prompt, tools off), reading "
        "it from the prompt cache; False: the conversation as text, as the seed does.",
    )

    def __post_init__(self) -> None:
        check_fields(self)

    def request(
        self,
        messages: Sequence[dict[str, Any]],
        focus: str | None,
        prompt: AgentPrompt | None = None,
    ) -> ModelRequest:
        """One request asking for a summary of `messages`: in the conversation itself when
        `in_context` and the agent's `prompt` allow it, else the conversation as text, no
        tools."""
        messages = without_unsigned_thinking(messages)  # rebuilt from a transcript: refused
        instructions = self.instructions
        if focus:
            instructions += FOCUS_INSTRUCTION.format(focus=focus)
        if self.in_context and prompt is not None and self._continuable(messages):
            # The default instructions say where the conversation is; here it is above them.
            here = instructions.replace("the conversation below", "the conversation above")
            return ModelRequest(
                messages=_with_user_text(messages, IN_CONTEXT_NOTE + here),
                max_tokens=self.max_tokens,
                system=prompt.system,
                tools=prompt.tools,
                cache=prompt.cache,
                cache_newest=False,  # read what the agent's calls cached; write nothing
                tool_choice={"type": "none"},
            )
        text = instructions + "\n\n<conversation>\n"
        text += conversation_text(messages, self.input_limit)
        text += "\n</conversation>"
        return ModelRequest(
            messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
            max_tokens=self.max_tokens,
        )

    def summarise(
        self,
        messages: Sequence[dict[str, Any]],
        focus: str | None,
        default_model: Model,
        prompt: AgentPrompt | None = None,
    ) -> Summary:
        """Call the model; raises SummaryError (or ModelError) when there is no usable summary.
        `prompt` is the agent's own (for an in-context request with the agent's model)."""
        model = self.model or default_model
        if model is not default_model:
            prompt = None  # another model's cache does not hold the agent's conversation
        reply = model.respond(self.request(messages, focus, prompt))
        return Summary(summary_from_reply(reply, self.max_tokens), reply.usage, reply.model)

    def _continuable(self, messages: Sequence[dict[str, Any]]) -> bool:
        """True when `messages` can be continued by a user turn as they are: they start with
        the user, leave no tool call unanswered, and fit within `input_limit`."""
        if not messages or messages[0].get("role") != "user":
            return False
        last = messages[-1]
        if last.get("role") == "assistant" and blocks_of_type(last, "tool_use"):
            return False
        return message_chars(messages) <= self.input_limit


def _with_user_text(messages: Sequence[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """`messages` followed by `text` from the user: a text block after the last user message's
    own blocks (its tool results stay first, as the API requires), or a new user message."""
    block = {"type": "text", "text": text}
    last = messages[-1]
    if last.get("role") == "user":
        return [*messages[:-1], {**last, "content": [*content_blocks(last), block]}]
    return [*messages, {"role": "user", "content": [block]}]


def conversation_text(messages: Sequence[dict[str, Any]], limit: int) -> str:
    """The conversation as one JSON message per line, cut to `limit` characters by keeping the
    head (where the goal usually is) and the tail (the newest turns)."""
    text = "\n".join(to_json(message) for message in messages)
    if len(text) <= limit:
        return text
    # The marker is sized for the largest count it can state, so the result never exceeds limit.
    marker_room = len(OMITTED.format(n=len(text)))
    if limit < marker_room + 2:
        # No room for the marker and both ends: the ends alone, still within the limit.
        head, tail = _split(limit)
        return text[:head] + text[len(text) - tail :]
    head, tail = _split(limit - marker_room)
    omitted = len(text) - head - tail
    return text[:head] + OMITTED.format(n=omitted) + text[len(text) - tail :]


def _split(budget: int) -> tuple[int, int]:
    """Characters for the head and the tail: the tail (the newest turns) gets the larger share,
    and each end gets at least one character when there are two to give."""
    head = int(budget * HEAD_SHARE)
    if budget >= 2:
        head = max(head, 1)
    return head, budget - head


def summary_from_reply(reply: ModelReply, max_tokens: int | None = None) -> str:
    """The summary text of the reply; SummaryError when there is none or it was cut off."""
    if reply.stop_reason == "max_tokens":
        limit = f" ({max_tokens:,} tokens)" if max_tokens else ""
        raise SummaryError(
            f"the summary was cut off at max_tokens{limit}; a truncated summary would lose "
            "the end of the conversation"
        )
    texts = [b.get("text", "") for b in reply.content if b.get("type") == "text"]
    summary = "\n".join(t for t in texts if t.strip()).strip()
    if not summary:
        kinds = ", ".join(b.get("type", "?") for b in reply.content) or "no content"
        raise SummaryError(f"the summariser returned no text ({kinds})")
    return summary
