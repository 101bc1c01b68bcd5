"""The ReAct loop itself: call the model, run the tools it asks for, repeat until the model
answers the request; compact when the context does not fit the model's window."""

from __future__ import annotations

import time
from dataclasses import dataclass

from evo_magic.cost import Spending
from evo_magic.events import AskFinished, AskStarted, ErrorOccurred, Notice
from evo_magic.loop.call import call_model, server_results
from evo_magic.loop.parts import LoopParts
from evo_magic.loop.reply import WINDOW_EXCEEDED, append_reply, text_of
from evo_magic.loop.tool_calls import answer_left_over, compact_for_model, run_tools
from evo_magic.measure import ContextSize
from evo_magic.models.base import ModelError, ModelReply, prompt_too_long
from evo_magic.render import plural
from evo_magic.usage import Usage

CONTEXT_EXCEEDED = (
    "The prompt reached the context window of {model} (stop_reason "
    "model_context_window_exceeded), and compacting did not make room; the history is kept. "
    "Compact it (%compact, Session.compact) or configure a strategy that keeps it smaller, "
    "then ask again."
)
STILL_TOO_LONG = (
    "The history is kept and valid; compact by hand (%compact) with a strategy that keeps "
    "less, unpin large pins, or start afresh."
)


@dataclass
class _Ask:
    """One ask as it goes: what it has counted so far, and why it stopped if it stops now."""

    started: float
    """When the ask began (perf_counter)."""
    spent_before: Spending
    """What the session had spent when the ask began."""
    usage: Usage = Usage()
    stop_reason: str = "end_turn"
    final_text: str = ""
    turns: int = 0
    refilled: bool = False
    """A window-exceeded stop was answered by a compaction in this ask."""
    why: str = "it was interrupted"
    """Said in the result of every call left without one when the ask stops."""


def run_ask(parts: LoopParts, text: str) -> AskFinished:
    """Run one user request to the end; see Session.ask."""
    ask = _begin(parts, text)
    try:
        _converse(parts, ask)
    except ModelError as exc:
        ask.why = "the model call failed"
        parts.emit(ErrorOccurred("ModelError", str(exc)))
        raise
    except KeyboardInterrupt:
        parts.emit(Notice("interrupted", "Interrupted by the user; the history is kept."))
        raise
    except BaseException as exc:
        ask.why = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        # Whatever stopped the turn, every call gets a result, so the next request is valid.
        answer_left_over(parts.history, ask.why)
        parts.sync()
    return _finish(parts, ask)


def _begin(parts: LoopParts, text: str) -> _Ask:
    """Answer what an earlier, stopped turn left unanswered, then make `text` the pending
    request."""
    started = time.perf_counter()
    answer_left_over(parts.history, "an earlier turn was stopped")
    text = parts.redact(text)  # a key pasted into a request never reaches the model
    parts.emit(AskStarted(text, parts.history.size()))
    ask = _Ask(started, parts.ledger.spent)
    parts.history.begin_request(text)
    return ask


def _converse(parts: LoopParts, ask: _Ask) -> None:
    """Model calls, each followed by the tools it asked for, until the model answers the
    request or the ask reaches max_turns."""
    while ask.turns < parts.max_turns:
        ask.turns += 1
        if _turn(parts, ask):
            return
    ask.stop_reason = "max_turns"
    parts.emit(
        Notice(
            "max_turns",
            f"Stopped after {plural(ask.turns, 'model call')} "
            f"(max_turns={parts.max_turns}); "
            "the next request continues this conversation.",
        )
    )


def _turn(parts: LoopParts, ask: _Ask) -> bool:
    """One model call and its tool calls. Returns True when the reply answered the request
    (the history's rule, which replay shares)."""
    reply, sent = _call_reactively(parts)
    ask.usage = ask.usage + reply.usage
    ask.stop_reason = reply.stop_reason or "end_turn"
    tool_uses, bad_inputs, content = append_reply(parts, reply)
    server_results(parts, reply, sent)
    ask.final_text = text_of(content) or ask.final_text
    if ask.stop_reason == WINDOW_EXCEEDED:
        _make_room(parts, ask, reply.model)
        return False
    if not tool_uses:
        # Not answered when cut off, or paused after a server compaction: the ask goes on.
        return parts.history.answered(ask.stop_reason)
    requested = run_tools(parts, tool_uses, bad_inputs)
    if requested is not None:
        compact_for_model(parts, requested or None)
    return False


def _make_room(parts: LoopParts, ask: _Ask, model: str) -> None:
    """The model stopped because its context window is full: compact, once in an ask, so the
    next call has room. A second full window, or a compaction that cannot be made, is a
    ModelError."""
    if ask.refilled:
        raise ModelError(CONTEXT_EXCEEDED.format(model=model))
    ask.refilled = True
    ask.why = "the model stopped: its context window is full"
    if _compact_reactively(parts, ask.why):
        raise ModelError(CONTEXT_EXCEEDED.format(model=model))


def _finish(parts: LoopParts, ask: _Ask) -> AskFinished:
    """Say what the ask did and spent (the event, also returned)."""
    spent = parts.ledger.spent - ask.spent_before
    finished = AskFinished(
        ask.final_text,
        ask.turns,
        ask.stop_reason,
        ask.usage,
        time.perf_counter() - ask.started,
        parts.history.size(),
        cost_usd=spent.calls_cost_usd,
        summary_cost_usd=spent.summaries_cost_usd,
        session_cost_usd=parts.ledger.spent.total_usd,
    )
    parts.emit(finished)
    return finished


def _call_reactively(parts: LoopParts) -> tuple[ModelReply, ContextSize]:
    """One model call; when the API refuses the prompt as too long, compact (the over-limit
    strategies) and call once more. A compaction that cannot be made, or a second refusal,
    is a ModelError saying so (the history, compacted or not, stays valid)."""
    try:
        return call_model(parts)
    except ModelError as exc:
        if not prompt_too_long(exc):
            raise
        failure = _compact_reactively(parts, f"the API refused the prompt as too long ({exc})")
        if failure:
            raise ModelError(
                f"The API refused the prompt as too long ({exc}) and {failure}. " + STILL_TOO_LONG,
                status=exc.status,
                error_type=exc.error_type,
            ) from exc
    try:
        return call_model(parts)
    except ModelError as again:
        if not prompt_too_long(again):
            raise
        raise ModelError(
            f"The prompt is still too long after a compaction ({again}). " + STILL_TOO_LONG,
            status=again.status,
            error_type=again.error_type,
        ) from again


def _compact_reactively(parts: LoopParts, why: str) -> str | None:
    """Compact now because the context does not fit the model's window, and say so. Returns
    why nothing was compacted (None when it was: the call goes once more)."""
    event = parts.compactor.reactive()
    failure = None
    if event is None:
        failure = outcome = "no over-limit strategy is configured, so nothing could be compacted"
    elif not event.success:
        failure = outcome = f"the compaction failed ({event.error})"
    else:
        outcome = f"compacted with {event.strategy}; trying once more"
    parts.emit(Notice("reactive_compaction", f"{why[0].upper()}{why[1:]}: {outcome}."))
    return failure
