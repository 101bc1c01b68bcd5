"""Layer 2, CompactHistory: the pieces of a full compaction that are pure functions.

The summariser sees the conversation's beginning AND its newest turns when it is longer than
`summary_input_limit`; the focus reaches both the summariser and the new history; the user's
unanswered request is carried over verbatim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evo_magic.compact.measure import to_json
from evo_magic.compact.policy import CompactPolicy

if TYPE_CHECKING:
    # Not at run time: evo_magic.models imports the offline model, which imports this module.
    from evo_magic.models.base import ModelReply, ModelRequest

COMPACTED_HEADER = (
    "This conversation was compacted to save context. "
    "Continue the work from the summary below; nothing needs to be redone."
)
FOCUS_PREFIX = "Focus to preserve next: "
FILES_HEADER = "Recent files to reopen if needed:"
REQUEST_HEADER = "The user's latest request, verbatim (not yet fully answered):"
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
OMITTED = "\n[... {n} characters from the middle of the conversation omitted ...]\n"
HEAD_SHARE = 0.25


class SummaryError(Exception):
    """The summariser's reply cannot replace the history (empty, not text, or too large)."""


def conversation_text(messages: list[dict[str, Any]], limit: int) -> str:
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


def summary_request(
    messages: list[dict[str, Any]], policy: CompactPolicy, focus: str | None
) -> ModelRequest:
    """One request, no tools, asking for a summary of `messages`."""
    from evo_magic.models.base import ModelRequest

    prompt = SUMMARY_INSTRUCTIONS
    if focus:
        prompt += f"\n\nThe user asked that the summary preserve, above all: {focus}"
    prompt += "\n\n<conversation>\n"
    prompt += conversation_text(messages, policy.summary_input_limit)
    prompt += "\n</conversation>"
    return ModelRequest(
        messages=[{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        max_tokens=policy.summary_max_tokens,
    )


def summary_from_reply(reply: ModelReply) -> str:
    """The summary text of the reply; SummaryError when there is none."""
    texts = [b.get("text", "") for b in reply.content if b.get("type") == "text"]
    summary = "\n".join(t for t in texts if t.strip()).strip()
    if not summary:
        kinds = ", ".join(b.get("type", "?") for b in reply.content) or "no content"
        raise SummaryError(f"the summariser returned no text ({kinds})")
    return summary


def compacted_message(
    summary: str,
    focus: str | None,
    recent_files: list[str],
    pending_request: str | None,
) -> dict[str, Any]:
    """The single user message that replaces the history."""
    parts = [COMPACTED_HEADER, summary]
    if focus:
        parts.append(FOCUS_PREFIX + focus)
    if recent_files:
        parts.append("\n".join([FILES_HEADER, *(f"- {path}" for path in recent_files)]))
    if pending_request and pending_request.strip():
        parts.append(f"{REQUEST_HEADER}\n{pending_request}")
    return {"role": "user", "content": [{"type": "text", "text": "\n\n".join(parts)}]}
