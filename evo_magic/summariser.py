"""The summariser: one model call, no tools, that turns a conversation into a summary.

The summariser sees the conversation's beginning AND its newest turns when it is longer than
`input_limit`; the focus reaches it word for word; a reply that is empty, not text, or cut off
at `max_tokens` is an error, never a summary. It may be another model than the session's own,
with another prompt (`Session(summariser=Summariser(model=..., instructions=...))`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.measure import to_json
from evo_magic.models.base import Model, ModelReply, ModelRequest
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
class Summariser:
    """How summaries are made. `model=None` uses the session's own model."""

    model: Model | None = None
    instructions: str = SUMMARY_INSTRUCTIONS
    input_limit: int = 80_000
    """At most this many characters of conversation are sent (head and tail kept)."""
    max_tokens: int = 2_000

    def request(self, messages: Sequence[dict[str, Any]], focus: str | None) -> ModelRequest:
        """One request, no tools, asking for a summary of `messages`."""
        prompt = self.instructions
        if focus:
            prompt += FOCUS_INSTRUCTION.format(focus=focus)
        prompt += "\n\n<conversation>\n"
        prompt += conversation_text(messages, self.input_limit)
        prompt += "\n</conversation>"
        return ModelRequest(
            messages=[{"role": "user", "content": [{"type": "text", "text": prompt}]}],
            max_tokens=self.max_tokens,
        )

    def summarise(
        self, messages: Sequence[dict[str, Any]], focus: str | None, default_model: Model
    ) -> Summary:
        """Call the model; raises SummaryError (or ModelError) when there is no usable summary."""
        model = self.model or default_model
        reply = model.respond(self.request(messages, focus))
        return Summary(summary_from_reply(reply, self.max_tokens), reply.usage, reply.model)


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
