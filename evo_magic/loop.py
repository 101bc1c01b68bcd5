"""The ReAct loop: call the model, run the tools it asks for, repeat; compact on the way.

Before every model call layer 1 (micro-compaction) runs, then layer 2 when the context is still
over the limit. After a tool batch in which the model called `compact`, layer 3 runs.
Whatever happens (a failed call, an interrupt) the history stays one the API accepts.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from evo_magic.compact.history import compact_history, should_auto_compact
from evo_magic.compact.measure import TokenAnchor, measure
from evo_magic.compact.micro import micro_compact
from evo_magic.events import (
    AskFinished,
    AskStarted,
    ErrorOccurred,
    MicroCompacted,
    ModelCalled,
    ModelResponded,
    Notice,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from evo_magic.models.base import ModelError, ModelReply, ModelRequest
from evo_magic.state import Usage
from evo_magic.tools import ToolContext, ToolResult, run_tool

if TYPE_CHECKING:
    from evo_magic.session import Session

INTERRUPTED_TOOL = "Interrupted by the user before this tool finished; it may have partly run."
INTERRUPTED_TEXT = "\n\n[interrupted by the user]"
MAX_TOKENS_NOTE = (
    "[Your previous response was cut off at the max_tokens limit ({limit} tokens); tool calls "
    "in it were dropped. Continue from where you stopped, in smaller steps.]"
)


def run_ask(session: Session, text: str) -> AskFinished:
    """Run one user request to the end; see Session.ask."""
    started = time.perf_counter()
    session.asks += 1
    session.active_request = text
    session.emit(AskStarted(text, session.context()))
    session.append({"role": "user", "content": [{"type": "text", "text": text}]})
    usage = Usage()
    stop_reason = "end_turn"
    final_text = ""
    turns = 0
    answered = False
    try:
        while True:
            if turns >= session.max_turns:
                stop_reason = "max_turns"
                session.emit(
                    Notice(
                        "max_turns",
                        f"Stopped after {turns} model calls (max_turns={session.max_turns}); "
                        "the next request continues this conversation.",
                    )
                )
                break
            turns += 1
            reply = _call_model(session, turns)
            usage = usage + reply.usage
            stop_reason = reply.stop_reason or "end_turn"
            final_text = _text_of(reply.content) or final_text
            tool_uses = _append_reply(session, reply)
            if not tool_uses:
                if stop_reason != "max_tokens":
                    answered = True
                    break
                continue
            requested = _run_tools(session, tool_uses)
            if requested is not None:
                compact_history(session, trigger="model", focus=requested or None)
    except ModelError as exc:
        session.emit(ErrorOccurred("ModelError", str(exc)))
        raise
    except KeyboardInterrupt:
        session.emit(Notice("interrupted", "Interrupted by the user; the history is kept."))
        raise
    finally:
        # A request the model did not finish (turn limit, error, interrupt) stays pending, so a
        # compaction before the next ask (Session.compact) still carries it over verbatim.
        if answered:
            session.active_request = None
        session.transcript.sync()
    finished = AskFinished(
        final_text, turns, stop_reason, usage, time.perf_counter() - started, session.context()
    )
    session.emit(finished)
    return finished


def _call_model(session: Session, turn: int) -> ModelReply:
    """Layers 1 and 2, then one streamed model call. Nothing is appended here."""
    before = session.context()
    cleared = micro_compact(session.messages, session.policy)
    sent = session.context()
    if cleared.cleared_ids:
        session.emit(MicroCompacted(cleared.cleared_ids, cleared.chars_freed, before, sent))
    if should_auto_compact(session, sent):
        compact_history(session, trigger="auto", focus=None)
        sent = session.context()
    session.calls += 1
    session.emit(ModelCalled(session.calls, sent))
    request = ModelRequest(
        messages=session.messages,
        max_tokens=session.max_tokens,
        system=session.system,
        tools=[tool.definition() for tool in session.tools],
    )
    streamed: list[str] = []

    def on_text(delta: str) -> None:
        streamed.append(delta)
        session.emit(TextDelta(delta))

    call_started = time.perf_counter()
    try:
        reply = session.model.respond(request, on_text)
    except KeyboardInterrupt:
        _keep_partial_text(session, "".join(streamed))
        raise
    duration = time.perf_counter() - call_started
    session.usage = session.usage + reply.usage
    session.token_anchor = TokenAnchor(sent.chars, reply.usage.context_tokens)
    sent = measure(session.messages, session.token_anchor)
    session.emit(
        ModelResponded(
            session.calls,
            session.asks,
            reply.model,
            reply.stop_reason,
            reply.usage,
            duration,
            before,
            sent,
        )
    )
    return reply


def _append_reply(session: Session, reply: ModelReply) -> list[dict[str, Any]]:
    """Append the assistant's content (minus what the API would reject); return its tool calls."""
    content = [block for block in reply.content if not _empty_text(block)]
    if reply.stop_reason == "max_tokens":
        # A tool call cut off mid-input cannot be run safely: drop them all and say so.
        content = [block for block in content if block.get("type") != "tool_use"]
        content = content or [{"type": "text", "text": "[response cut off at max_tokens]"}]
        session.append({"role": "assistant", "content": content})
        note = MAX_TOKENS_NOTE.format(limit=session.max_tokens)
        session.emit(Notice("max_tokens", note))
        session.append({"role": "user", "content": [{"type": "text", "text": note}]})
        return []
    if not content:
        content = [{"type": "text", "text": "(no response)"}]
    session.append({"role": "assistant", "content": content})
    return [block for block in content if block.get("type") == "tool_use"]


def _run_tools(session: Session, tool_uses: list[dict[str, Any]]) -> str | None:
    """Run every tool call in order and append all results in one user message.

    Returns the focus ("" for none) when the model called `compact`, else None.
    """
    requested: list[str] = []
    context = ToolContext(
        workspace=session.workspace,
        on_file=lambda path: session.state.note_file(path, session.policy.max_recent_files),
        request_compaction=lambda focus: requested.append(focus or ""),
        bash_timeout=session.bash_timeout,
    )
    results: list[ToolResult] = []
    try:
        for block in tool_uses:
            session.emit(ToolStarted(block["id"], block["name"], block.get("input", {})))
            result = run_tool(
                session.tools, block["id"], block["name"], block.get("input"), context
            )
            result = _spill_large_output(session, result)
            results.append(result)
            session.emit(
                ToolFinished(
                    block["id"],
                    block["name"],
                    block.get("input", {}),
                    result.content,
                    result.is_error,
                    result.duration,
                    result.saved_to,
                    result.original_chars or len(result.content),
                )
            )
    except KeyboardInterrupt:
        done = {result.tool_use_id for result in results}
        results += [
            ToolResult(b["id"], b["name"], INTERRUPTED_TOOL, is_error=True)
            for b in tool_uses
            if b["id"] not in done
        ]
        raise
    finally:
        session.append({"role": "user", "content": [result.block() for result in results]})
    return requested[0] if requested else None


def _spill_large_output(session: Session, result: ToolResult) -> ToolResult:
    """Layer 0: an output over `large_output_limit` goes to a file; the context gets a preview."""
    policy = session.policy
    if len(result.content) <= policy.large_output_limit:
        return result
    path = session.transcript.save_tool_output(result.tool_use_id, result.content)
    shown = _display_path(session, path)
    preview = result.content[: policy.preview_chars]
    result.original_chars = len(result.content)
    result.saved_to = str(path)
    result.content = (
        f"[Output too large for the context: {len(result.content):,} characters, saved to "
        f"{shown}. Read it with read_file (offset/limit) if you need more. "
        f"The first {len(preview):,} characters:]\n{preview}"
    )
    return result


def _display_path(session: Session, path: Any) -> str:
    try:
        return path.relative_to(session.workspace).as_posix()
    except ValueError:
        return str(path)


def _keep_partial_text(session: Session, text: str) -> None:
    """An interrupted stream: keep what the model already said, as a valid assistant message."""
    if text.strip():
        content = [{"type": "text", "text": text + INTERRUPTED_TEXT}]
        session.append({"role": "assistant", "content": content})


def _empty_text(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and not block.get("text", "").strip()


def _text_of(content: list[dict[str, Any]]) -> str:
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")
