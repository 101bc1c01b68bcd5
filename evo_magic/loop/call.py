"""One model call: the strategies that are due, the request, the streamed reply, and what the
call cost and told us (the server's clearing and compaction, the prompt cache, the size anchor).

Nothing the model sent is appended here, except the text of a stream the user interrupted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from evo_magic.compact.server import compaction_index, entering, named_in
from evo_magic.events import ModelCalled, ModelResponded, Notice, TextDelta
from evo_magic.loop.parts import LoopParts
from evo_magic.measure import ContextSize
from evo_magic.models.base import (
    MID_SYSTEM_BETA,
    ModelError,
    ModelReply,
    ModelRequest,
    note_chars,
)
from evo_magic.secrets import StreamRedactor
from evo_magic.usage import Usage

INTERRUPTED_TEXT = "\n\n[interrupted by the user]"
CACHE_DIAGNOSIS_BETA = "cache-diagnosis-2026-04-07"
"""The beta of `diagnostics.previous_message_id` and the reply's `cache_miss_reason`."""


def call_model(parts: LoopParts) -> tuple[ModelReply, ContextSize]:
    """The strategies that are due, then one streamed model call. Nothing is appended here.
    Returns the reply and the size of the history it was sent."""
    before = parts.history.size()
    parts.compactor.before_call()
    sent = parts.history.size()
    parts.totals.calls += 1
    call = parts.totals.calls
    parts.emit(ModelCalled(call, sent))
    request = _with_server_params(parts, _request(parts, sent))
    call_started = time.perf_counter()
    reply = _streamed(parts, request)
    duration = time.perf_counter() - call_started
    parts.totals.last_reply_id = reply.id or parts.totals.last_reply_id
    parts.totals.usage = parts.totals.usage + reply.usage
    _anchor(parts, reply, sent)
    cost = _account(parts, reply, request)
    _report(parts, call, reply, duration, before, cost)
    return reply, sent


def _request(parts: LoopParts, sent: ContextSize) -> ModelRequest:
    """The request for the history as it is now (`sent` is its size), before the server
    strategies' part. It holds a snapshot of the history, not a copy: building it costs the
    same at any length (an adapter that must change a message copies what it sends)."""
    history = parts.history
    note = parts.compactor.turn_note
    return ModelRequest(
        messages=history.snapshot(),
        max_tokens=parts.max_tokens,
        system=parts.system,
        tools=[tool.definition() for tool in parts.tools],
        prompt_chars=sent.chars + history.overhead_chars + note_chars(note),
        cache=parts.cache,
        edited_from=parts.prefix.edited_from if parts.prefix is not None else None,
        diagnostics=(
            {"previous_message_id": parts.totals.last_reply_id} if parts.cache_diagnosis else None
        ),
        turn_note=note,
    )


def _streamed(parts: LoopParts, request: ModelRequest) -> ModelReply:
    """The model's reply to `request`, its text shown as it streams. An interrupt keeps the
    text already streamed in the history; a model object's own failure is a ModelError, the
    same promise as the API's."""
    streamed: list[str] = []
    # Streamed text is shown as it comes, minus any credential: a key split across deltas is
    # held back until it is known not to be one.
    redactor = StreamRedactor()

    def on_text(delta: str) -> None:
        streamed.append(delta)
        if shown := redactor.feed(delta):
            parts.emit(TextDelta(shown))

    def flush() -> None:
        if held := redactor.flush():
            parts.emit(TextDelta(held))

    try:
        reply = _respond(parts, request, on_text)
    except KeyboardInterrupt:
        flush()
        _keep_partial_text(parts, parts.redact("".join(streamed)))
        raise
    except ModelError:
        flush()
        raise
    except Exception as exc:  # a model object's own failure: the same promise as the API's
        flush()
        failure = f"{type(exc).__name__}: {exc}"
        raise ModelError(f"the model {parts.model.name!r} failed: {failure}") from exc
    flush()
    return reply


def _anchor(parts: LoopParts, reply: ModelReply, sent: ContextSize) -> None:
    """Tie the history's size estimate to the prompt tokens the server counted for what was
    sent, unless the server compacted the prompt (then it counted another one)."""
    if reply.usage.context_tokens > 0 and compaction_index(reply.content) is None:
        # The server's clearing edits counted the prompt without what they cleared.
        cleared = sum(int(edit.get("cleared_input_tokens") or 0) for edit in reply.applied_edits)
        # A turn note was in the prompt, not in the history the anchor measures.
        note = parts.history.tokens_of_chars(note_chars(parts.compactor.turn_note))
        parts.history.anchor(sent.chars, reply.usage.context_tokens + cleared - note)


def _report(
    parts: LoopParts,
    call: int,
    reply: ModelReply,
    duration: float,
    before: ContextSize,
    cost: float | None,
) -> None:
    """Say what the call did (ModelResponded), and, the first time, that its model has no
    price."""
    history = parts.history
    parts.emit(
        ModelResponded(
            call,
            history.turn,
            reply.model,
            reply.stop_reason,
            reply.usage,
            duration,
            before,
            history.size(),
            cost_usd=cost,
            session_cost_usd=parts.ledger.spent.total_usd,
            applied_edits=reply.applied_edits,
            cache_miss_reason=reply.cache_miss_reason,
            turn_note=parts.compactor.turn_note,
        )
    )
    if cost is None and (note := parts.ledger.unpriced_notice(reply.model)):
        parts.emit(Notice("unpriced_model", note))


def _with_server_params(parts: LoopParts, request: ModelRequest) -> ModelRequest:
    """The request with the server strategies' edits and betas (those the model lacks have
    given way to their fallbacks)."""
    try:
        offline = bool(getattr(parts.model, "offline", False))
        params = parts.compactor.server.params(parts.model.name, offline=offline)
    except ValueError as exc:
        raise ModelError(str(exc)) from exc
    betas = params.betas + ((CACHE_DIAGNOSIS_BETA,) if request.diagnostics is not None else ())
    betas += (MID_SYSTEM_BETA,) if request.turn_note else ()
    return replace(request, context_management=params.context_management, betas=betas)


def _respond(parts: LoopParts, request: ModelRequest, on_text: Callable[[str], None]) -> ModelReply:
    """One call; when the API rejects a server strategy's feature (a 400 naming it), its
    fallback takes over and the call is made again, once."""
    try:
        return parts.model.respond(request, on_text)
    except ModelError as exc:
        named = named_in(str(exc), parts.compactor.strategies) if exc.status == 400 else []
        if not named:
            raise
        names = ", ".join(s.name for s in named)
        if not parts.compactor.server.fall_back(named, f"the API rejected {names}: {exc}"):
            raise ModelError(
                f"{exc} ({names} is not offered here and has no fallback: configure "
                "fallback=... or another strategy; the history is unchanged)",
                status=exc.status,
                error_type=exc.error_type,
            ) from exc
    return parts.model.respond(_with_server_params(parts, request), on_text)


def server_results(parts: LoopParts, reply: ModelReply, sent: ContextSize) -> None:
    """What the server's strategies did on this call: clearing edits as events, a compaction
    block as a compaction (its own tokens priced as a summary)."""
    if reply.applied_edits:
        parts.compactor.server.cleared(reply.applied_edits, sent)
    index = compaction_index(reply.content)
    last = parts.history.view()[-1] if len(parts.history) else None
    if index is None or last is None or last.get("role") != "assistant":
        return
    compactions = [i for i in reply.iterations if i.get("type") == "compaction"]
    usage = sum((Usage.from_api(i) for i in compactions), Usage())
    cost = parts.ledger.charge(usage, reply.model, summary=True) if compactions else None
    messages = [i for i in reply.iterations if i.get("type") == "message"]
    after = Usage.from_api(messages[-1]).context_tokens if messages else None
    summary = entering(reply.content[index], parts.redact)  # as the history let it in
    text = summary.get("content") if summary.get("type") == "compaction" else summary["text"]
    parts.compactor.server.compacted(sent, text, usage, cost, after)


def _account(parts: LoopParts, reply: ModelReply, request: ModelRequest) -> float | None:
    """Price the call and note what the prompt cache now holds; returns the call's cost."""
    ledger = parts.ledger
    if parts.prefix is not None:
        price = ledger.prices.lookup(reply.model)
        parts.prefix.after_call(reply.usage, len(request.messages), parts.cache, price)
    return ledger.charge(reply.usage, reply.model)


def _keep_partial_text(parts: LoopParts, text: str) -> None:
    """An interrupted stream: keep what the model already said, as a valid assistant message."""
    if text.strip():
        content = [{"type": "text", "text": text + INTERRUPTED_TEXT}]
        parts.history.append({"role": "assistant", "content": content})
