"""The ReAct loop: call the model, run the tools it asks for, repeat; compact on the way.

Before every model call the compactor runs the strategies that are due. Whatever happens (a
failed call, an interrupt, an observer or a transcript that fails, a server that sends odd
replies) the history stays one the API accepts: what the model sent is normalised before it
joins the history, each tool result joins it as its tool returns, and every call left without
a result is answered with an error saying what happened.

The loop gets the narrow parts it needs (`LoopParts`), not the session.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evo_magic.compact.compactor import Compactor
from evo_magic.compact.server import compaction_index, named_in
from evo_magic.cost import Ledger
from evo_magic.events import (
    AskFinished,
    AskStarted,
    CompactionSkipped,
    ErrorOccurred,
    Event,
    ModelCalled,
    ModelResponded,
    Notice,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from evo_magic.history import History
from evo_magic.measure import ContextSize, to_json
from evo_magic.models.base import Model, ModelError, ModelReply, ModelRequest, prompt_too_long
from evo_magic.prompt_cache import CacheSettings, PrefixTracker
from evo_magic.render import plural
from evo_magic.secrets import StreamRedactor
from evo_magic.tools import Tool, ToolContext, ToolResult, run_tool
from evo_magic.usage import Usage

INTERRUPTED_TOOL = "Interrupted by the user while this tool was running; it may have partly run."
STOPPED_TOOL = (
    "Stopped by an error in evo_magic while this tool was running ({error}); it may have "
    "partly run."
)
NOT_RUN = "Not run: the turn stopped ({why}) before this tool started."
INTERRUPTED_TEXT = "\n\n[interrupted by the user]"
MAX_TOKENS_NOTE = (
    "[Your previous response was cut off at the max_tokens limit ({limit} tokens); tool calls "
    "in it were dropped. Continue from where you stopped, in smaller steps.]"
)
BAD_INPUT = (
    "Not run: the input of this {name} call was {kind}, not a JSON object. Send the arguments "
    'as an object, e.g. {{"{example}": ...}}.'
)
WINDOW_EXCEEDED = "model_context_window_exceeded"
WINDOW_NOTE = (
    "[Your previous response was cut off: the context window is full. Tool calls in it were "
    "dropped; continue from where you stopped.]"
)
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
COMPACT_FAILED = "[The compaction you asked for did not happen: {error}. The history is unchanged.]"
_TOOL_USE_ID = re.compile(r"[A-Za-z0-9_-]+")


@dataclass
class Totals:
    """What the session has used over all its asks (owned by the session, counted here)."""

    calls: int = 0
    usage: Usage = Usage()


@dataclass
class LoopParts:
    """What one ask needs from the session."""

    history: History
    compactor: Compactor
    model: Model
    tools: Sequence[Tool]
    tool_context: Callable[[Callable[[str | None], None]], ToolContext]
    """Makes the tools' context, given the hook the compact tool calls."""
    emit: Callable[[Event], None]
    system: str
    max_turns: int
    max_tokens: int
    totals: Totals
    redact: Callable[[str], str] = lambda text: text
    """Applied to tool output before it joins the history (and so reaches the model)."""
    sync: Callable[[], None] = lambda: None
    """Make the transcript durable (called when the ask ends)."""
    cache: CacheSettings | None = None
    """How requests are marked for prompt caching (None: not at all)."""
    ledger: Ledger = field(default_factory=Ledger)
    """Prices each call and keeps what the session spent."""
    prefix: PrefixTracker | None = None
    """Told, after each call, what the prompt cache now holds."""


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
            tool_uses, bad_inputs, content = _append_reply(parts, reply)
            _server_results(parts, reply, sent)
            final_text = _text_of(content) or final_text
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
            requested = _run_tools(parts, tool_uses, bad_inputs)
            if requested is not None:
                _compact_for_model(parts, requested or None)
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
        return _call_model(parts)
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
        return _call_model(parts)
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


def answer_left_over(history: History, why: str) -> None:
    """Answer every call of the last assistant turn that has no result yet (an interrupt or an
    error between the turn and its results): the history becomes valid again."""
    history.answer_unanswered(lambda block: (NOT_RUN.format(why=why), "not_run"))


# -- one model call ----------------------------------------------------------------------------


def _call_model(parts: LoopParts) -> tuple[ModelReply, ContextSize]:
    """The strategies that are due, then one streamed model call. Nothing is appended here.
    Returns the reply and the size of the history it was sent."""
    history = parts.history
    before = history.size()
    parts.compactor.before_call()
    sent = history.size()
    parts.totals.calls += 1
    call = parts.totals.calls
    parts.emit(ModelCalled(call, sent))
    request = ModelRequest(
        messages=history.messages,
        max_tokens=parts.max_tokens,
        system=parts.system,
        tools=[tool.definition() for tool in parts.tools],
        prompt_chars=sent.chars + history.overhead_chars,
        cache=parts.cache,
        edited_from=parts.prefix.edited_from if parts.prefix is not None else None,
    )
    request = _with_server_params(parts, request)
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

    call_started = time.perf_counter()
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
    duration = time.perf_counter() - call_started
    parts.totals.usage = parts.totals.usage + reply.usage
    if reply.usage.context_tokens > 0 and compaction_index(reply.content) is None:
        # The server's clearing edits counted the prompt without what they cleared.
        cleared = sum(int(edit.get("cleared_input_tokens") or 0) for edit in reply.applied_edits)
        history.anchor(sent.chars, reply.usage.context_tokens + cleared)
    cost = _account(parts, reply, request)
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
        )
    )
    if cost is None and (note := parts.ledger.unpriced_notice(reply.model)):
        parts.emit(Notice("unpriced_model", note))
    return reply, sent


def _with_server_params(parts: LoopParts, request: ModelRequest) -> ModelRequest:
    """The request with the server strategies' edits and betas (those the model lacks have
    given way to their fallbacks)."""
    try:
        offline = bool(getattr(parts.model, "offline", False))
        params = parts.compactor.server.params(parts.model.name, offline=offline)
    except ValueError as exc:
        raise ModelError(str(exc)) from exc
    return replace(request, context_management=params.context_management, betas=params.betas)


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


def _server_results(parts: LoopParts, reply: ModelReply, sent: ContextSize) -> None:
    """What the server's strategies did on this call: clearing edits as events, a compaction
    block as a compaction (its own tokens priced as a summary)."""
    if reply.applied_edits:
        parts.compactor.server.cleared(reply.applied_edits, sent)
    index = compaction_index(reply.content)
    last = parts.history.view()[-1] if len(parts.history) else None
    if index is None or last is None or compaction_index(last.get("content") or []) is None:
        return
    compactions = [i for i in reply.iterations if i.get("type") == "compaction"]
    usage = sum((Usage.from_api(i) for i in compactions), Usage())
    cost = parts.ledger.charge(usage, reply.model, summary=True) if compactions else None
    messages = [i for i in reply.iterations if i.get("type") == "message"]
    after = Usage.from_api(messages[-1]).context_tokens if messages else None
    parts.compactor.server.compacted(sent, reply.content[index].get("content"), usage, cost, after)


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


# -- what the model sent ---------------------------------------------------------------------


def _append_reply(
    parts: LoopParts, reply: ModelReply
) -> tuple[list[dict[str, Any]], dict[str, str], list[dict[str, Any]]]:
    """Append the assistant's content, redacted and normalised; return its tool calls, by id
    those whose input was unusable (answered with an error, not run), and the content."""
    content, bad_inputs, fixes = normalise_reply(_redacted(reply.content, parts), parts.history)
    if fixes:
        note = "The model's reply was adjusted: " + "; ".join(fixes)
        parts.emit(Notice("reply_normalised", note))
    if reply.stop_reason == WINDOW_EXCEEDED:
        # Cut off mid-reply: keep its text, drop its calls (their input may be cut too).
        content = [block for block in content if block.get("type") != "tool_use"]
        content = content or [{"type": "text", "text": "[response cut off: context window full]"}]
        parts.history.append({"role": "assistant", "content": content})
        parts.history.append({"role": "user", "content": [{"type": "text", "text": WINDOW_NOTE}]})
        return [], {}, content
    if reply.stop_reason == "max_tokens":
        # A tool call cut off mid-input cannot be run safely: drop them all and say so.
        content = [block for block in content if block.get("type") != "tool_use"]
        content = content or [{"type": "text", "text": "[response cut off at max_tokens]"}]
        parts.history.append({"role": "assistant", "content": content})
        note = MAX_TOKENS_NOTE.format(limit=parts.max_tokens)
        parts.emit(Notice("max_tokens", note))
        parts.history.append({"role": "user", "content": [{"type": "text", "text": note}]})
        return [], {}, content
    if not content:
        content = [{"type": "text", "text": "(no response)"}]
    parts.history.append({"role": "assistant", "content": content})
    calls = [block for block in content if block.get("type") == "tool_use"]
    return calls, bad_inputs, content


def normalise_reply(
    content: Sequence[dict[str, Any]], history: History
) -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
    """What the model sent, made valid for the history: no empty text, tool_use ids that are
    well-formed and unique in the session, object inputs. Returns the content, the ids whose
    input was unusable (with what it was), and a note of each fix."""
    result: list[dict[str, Any]] = []
    bad_inputs: dict[str, str] = {}
    fixes: list[str] = []
    seen: set[str] = set()
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            fixes.append("dropped a block that was not a content block")
            continue
        if block["type"] == "text" and not str(block.get("text") or "").strip():
            continue
        if block["type"] != "tool_use":
            result.append(block)
            continue
        block = dict(block)
        block_id = block.get("id")
        well_formed = isinstance(block_id, str) and bool(_TOOL_USE_ID.fullmatch(block_id))
        repeated = well_formed and (block_id in seen or history.id_taken(block_id))
        if repeated or not well_formed:
            new_id = history.fresh_tool_use_id(seen)
            problem = "repeated" if repeated else "not a valid id"
            fixes.append(f"tool_use id {block_id!r} was {problem}; it is now {new_id}")
            block["id"] = block_id = new_id
        seen.add(block_id)
        if not isinstance(block.get("name"), str) or not block.get("name"):
            block["name"] = "unknown_tool"
        tool_input, problem = _object_input(block.get("input"))
        if problem:
            bad_inputs[block_id] = problem
            fixes.append(f"the input of {block['name']} ({block_id}) was {problem}")
        elif tool_input is not block.get("input"):
            kind = _kind(block.get("input"))
            fixes.append(
                f"the input of {block['name']} ({block_id}) was {kind}; it is now an object"
            )
        block["input"] = tool_input
        result.append(block)
    return result, bad_inputs, fixes


def _object_input(value: Any) -> tuple[dict[str, Any], str | None]:
    """The tool input as an object, and what was wrong when it could not be one. A missing
    input (servers send none for argument-less calls) is an empty object; a string holding a
    JSON object is that object."""
    if isinstance(value, dict):
        return value, None
    if value is None:
        return {}, None
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed, None
    return {}, _kind(value)


def _kind(value: Any) -> str:
    shown = json.dumps(value, ensure_ascii=False, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"a {type(value).__name__} ({shown})"


# -- tools -------------------------------------------------------------------------------------


def _run_tools(
    parts: LoopParts, tool_uses: list[dict[str, Any]], bad_inputs: dict[str, str]
) -> str | None:
    """Run every tool call in order; each result joins the history as its tool returns.

    Returns the focus ("" for none) when the model called `compact`, else None.
    """
    requested: list[str] = []
    context = parts.tool_context(lambda focus: requested.append(focus or ""))
    for block in tool_uses:
        result: ToolResult | None = None
        try:
            summary = _summary(parts.tools, block)
            parts.emit(ToolStarted(block["id"], block["name"], block["input"], summary))
            if block["id"] in bad_inputs:
                example = _first_property(parts.tools, block["name"])
                kind = bad_inputs[block["id"]]
                text = BAD_INPUT.format(name=block["name"], kind=kind, example=example)
                result = ToolResult(block["id"], block["name"], text, is_error=True)
            else:
                result = run_tool(parts.tools, block["id"], block["name"], block["input"], context)
            result.content = parts.redact(result.content)
            parts.history.add_tool_result(result.block(), "error" if result.is_error else "ok")
        except BaseException as exc:
            _stop_batch(parts.history, block, result, exc)
            raise
        parts.emit(
            ToolFinished(
                block["id"],
                block["name"],
                block["input"],
                result.content,
                result.is_error,
                result.duration,
                summary,
                original_chars=len(result.content),
            )
        )
    return requested[0] if requested else None


def _stop_batch(
    history: History, current: dict[str, Any], result: ToolResult | None, exc: BaseException
) -> None:
    """The batch stops at `current`: keep its real output when its tool had returned, say it
    was cut short otherwise, and mark the calls after it as not run."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    why = "it was interrupted" if interrupted else f"{type(exc).__name__}: {exc}"

    def reason(block: dict[str, Any]) -> tuple[str, str]:
        if block["id"] != current["id"]:
            return NOT_RUN.format(why=why), "not_run"
        if result is not None:
            return result.content, "error" if result.is_error else "ok"
        text = INTERRUPTED_TOOL if interrupted else STOPPED_TOOL.format(error=why)
        return text, "interrupted"

    history.answer_unanswered(reason)


def _summary(tools: Sequence[Tool], block: dict[str, Any]) -> str:
    """The input field that says what a call does, as the tool declares it."""
    tool = next((t for t in tools if t.name == block["name"]), None)
    if tool is not None and tool.main_argument:
        return str(block["input"].get(tool.main_argument) or "")
    return json.dumps(block["input"], ensure_ascii=False)


def _first_property(tools: Sequence[Tool], name: str) -> str:
    tool = next((t for t in tools if t.name == name), None)
    properties = list(tool.input_schema.get("properties", {})) if tool else []
    return properties[0] if properties else "argument"


def _compact_for_model(parts: LoopParts, focus: str | None) -> None:
    """The model's compact tool: compact after its batch, and tell the model when it failed."""
    event = parts.compactor.request("model", focus)
    if not event.success:
        error = event.reason if isinstance(event, CompactionSkipped) else event.error
        note = COMPACT_FAILED.format(error=error)
        parts.history.append({"role": "user", "content": [{"type": "text", "text": note}]})


def _redacted(content: list[dict[str, Any]], parts: LoopParts) -> list[dict[str, Any]]:
    """The reply with every credential the session knows replaced (a model that read one
    somewhere never puts it back into the history)."""
    encoded = to_json(content)
    cleaned = parts.redact(encoded)
    return content if cleaned == encoded else json.loads(cleaned)


def _text_of(content: list[dict[str, Any]]) -> str:
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")
