"""The layout of what the project writes into a history: the one user message that replaces
what was summarised, the budget note, and the block of a pinned text.

The seed's layout: a line saying the conversation was compacted, the summary, the focus, the
recent files to reopen, and the user's unanswered request verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

COMPACTED_HEADER = (
    "This conversation was compacted to save context. "
    "Continue the work from the summary below; nothing needs to be redone."
)
FOCUS_PREFIX = "Focus to preserve next: "
FILES_HEADER = "Recent files to reopen if needed:"
REQUEST_HEADER = "The user's latest request, verbatim (not yet fully answered):"
REREAD_HEADER = "A recent file, read again after the compaction (its whole text as it is now): "
"""Starts a text block of a compacted history that holds a recent file, re-read."""
REMINDER_PREFIX = "[context budget] "
"""Starts a note the session adds for the model about its context window (TokenBudget): never
a person's words."""


PIN_PREFIX = "[pinned by the user: always in the context] "
"""Starts the text block of a pinned text (never a person's request)."""
FILE_PIN_PREFIX = "[pinned file {path}: read again after each compaction]\n"
"""Starts the text block of a pinned workspace file."""


def is_pin_text(text: str) -> bool:
    """True when a text block is a pin's (the project's, not a person's words)."""
    return text.startswith(PIN_PREFIX) or (
        text.startswith("[pinned file ") and "]\n" in text[:1_000]
    )


def compacted_message(
    summary: str,
    focus: str | None,
    recent_files: Sequence[str],
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
