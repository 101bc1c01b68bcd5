"""The ReAct loop itself: call the model, run the tools it asks for, repeat until the model
answers the request; compact when the context does not fit the model's window."""

from __future__ import annotations

import time

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


def run_ask(parts: LoopParts, text: str) -> AskFinished:
    """Run one user request to the end; see Session.ask."""
    started = time.perf_counter()
    history = parts.history
    answer_left_over(history, "an earlier turn was stopped")
    text = parts.redact(text)  # a key pasted into a request never reaches the model
    parts.emit(AskStarted(text, history.size()))
    spent_before = parts.ledger.spent
    history.begin_request(text)
    usage = Usage()
    stop_reason = "end_turn"
    final_text = ""
    turns = 0
    refilled = False  # a window-exceeded stop was answered by a compaction in this ask
    why = "it was interrupted"
    try:
        while True:
            if turns >= parts.max_turns:
                stop_reason = "max_turns"
                parts.emit(
                    Notice(
                        "max_turns",
                        f"Stopped after {plural(turns, 'model call')} "
                        f"(max_turns={parts.max_turns}); "
                        "the next request continues this conversation.",
                    )
                )
                break
            turns += 1
            reply, sent = _call_reactively(parts)
            usage = usage + reply.usage
            stop_reason = reply.stop_reason or "end_turn"
            tool_uses, bad_inputs, content = append_reply(parts, reply)
            server_results(parts, reply, sent)
            final_text = text_of(content) or final_text
            if stop_reason == WINDOW_EXCEEDED:
                if refilled:
                    raise ModelError(CONTEXT_EXCEEDED.format(model=reply.model))
                refilled = True
                why = "the model stopped: its context window is full"
                if _compact_reactively(parts, why):
                    raise ModelError(CONTEXT_EXCEEDED.format(model=reply.model))
                continue
            if not tool_uses:
                if history.answered(stop_reason):
                    break
                continue  # cut off, or paused after a server compaction: the ask goes on
            requested = run_tools(parts, tool_uses, bad_inputs)
            if requested is not None:
                compact_for_model(parts, requested or None)
    except ModelError as exc:
        why = "the model call failed"
        parts.emit(ErrorOccurred("ModelError", str(exc)))
        raise
    except KeyboardInterrupt:
        parts.emit(Notice("interrupted", "Interrupted by the user; the history is kept."))
        raise
    except BaseException as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        # Whatever stopped the turn, every call gets a result, so the next request is valid.
        answer_left_over(history, why)
        parts.sync()
    spent = parts.ledger.spent - spent_before
    finished = AskFinished(
        final_text,
        turns,
        stop_reason,
        usage,
        time.perf_counter() - started,
        history.size(),
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
