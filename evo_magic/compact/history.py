"""Layer 2 (automatic) and layer 3 (on request): replace the history by a summary.

Order matters and is the point of this module: the full history is durably on disk first, then
one summarisation call; only a usable summary replaces the history. A failure leaves the history
byte-identical, says why once, and backs off instead of retrying on every call.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from evo_magic.compact.measure import message_chars
from evo_magic.compact.summary import (
    SummaryError,
    compacted_message,
    summary_from_reply,
    summary_request,
)
from evo_magic.events import CompactionFinished, CompactionStarted, ContextSize, Notice
from evo_magic.models.base import ModelError
from evo_magic.state import Usage

if TYPE_CHECKING:
    from evo_magic.session import Session

# After a failure, automatic compaction waits until the context grew by this share of the limit.
RETRY_GROWTH = 0.1


def over_limit(session: Session, size: ContextSize) -> bool:
    policy = session.policy
    over_tokens = policy.token_limit is not None and size.tokens > policy.token_limit
    return size.chars > policy.context_limit or over_tokens


def should_auto_compact(session: Session, size: ContextSize) -> bool:
    """True when layer 2 should run now: over the limit, not paused, not backing off."""
    state = session.state
    if not over_limit(session, size):
        return False
    if state.consecutive_failures >= session.policy.max_failures:
        return False
    return size.chars >= state.retry_after_chars


def compact_history(session: Session, *, trigger: str, focus: str | None) -> CompactionFinished:
    """Summarise and replace the history; see the module docstring. Returns the event emitted."""
    started = time.perf_counter()
    before = session.context()
    session.emit(CompactionStarted(trigger, focus, before))
    refusal = _refusal(session)
    if refusal:
        return _fail(session, trigger, focus, before, started, refusal, snapshot=None)
    snapshot = str(session.transcript.snapshot(session.messages))
    usage = Usage()
    try:
        reply = session.model.respond(summary_request(session.messages, session.policy, focus))
        usage = reply.usage
        summary = summary_from_reply(reply)
        message = compacted_message(
            summary, focus, list(session.state.recent_files), session.active_request
        )
        compacted_chars = message_chars([message])
        if compacted_chars >= before.chars:
            raise SummaryError(
                f"the compacted history ({compacted_chars:,} characters, summary "
                f"{len(summary):,}) would not be smaller than the history ({before.chars:,})"
            )
    except (ModelError, SummaryError) as exc:
        return _fail(session, trigger, focus, before, started, str(exc), snapshot, usage)
    state = session.state
    state.has_compacted = True
    state.last_summary = summary
    state.compact_count += 1
    state.consecutive_failures = 0
    state.retry_after_chars = 0
    session.replace_history([message])
    after = session.context()
    if over_limit(session, after):
        # Still too big (a huge request carried verbatim): do not compact again right away.
        state.retry_after_chars = _retry_threshold(session, after)
    event = CompactionFinished(
        trigger,
        focus,
        before,
        after,
        True,
        time.perf_counter() - started,
        summary,
        None,
        snapshot,
        usage,
    )
    session.emit(event)
    session.transcript.sync()
    return event


def _refusal(session: Session) -> str | None:
    messages = session.messages
    if not messages:
        return "nothing to compact: the history is empty"
    last = messages[-1]
    if last["role"] == "assistant" and any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in last.get("content", [])
    ):
        return "cannot compact while a tool call is unanswered"
    return None


def _fail(
    session: Session,
    trigger: str,
    focus: str | None,
    before: ContextSize,
    started: float,
    reason: str,
    snapshot: str | None,
    usage: Usage | None = None,
) -> CompactionFinished:
    state = session.state
    if trigger != "user":
        state.consecutive_failures += 1
        state.retry_after_chars = _retry_threshold(session, before)
    event = CompactionFinished(
        trigger,
        focus,
        before,
        before,
        False,
        time.perf_counter() - started,
        "",
        reason,
        snapshot,
        usage or Usage(),
    )
    session.emit(event)
    if trigger != "user" and state.consecutive_failures == session.policy.max_failures:
        session.emit(
            Notice(
                "auto_compaction_paused",
                f"Automatic compaction failed {state.consecutive_failures} times in a row and is "
                "paused; compact by hand (Session.compact / %compact) or reset the session.",
            )
        )
    return event


def _retry_threshold(session: Session, size: ContextSize) -> int:
    return size.chars + max(1, int(session.policy.context_limit * RETRY_GROWTH))
