"""Running the tool calls of a reply, and answering the calls that did not run.

Each result joins the history as its tool returns; whatever stops a batch (an interrupt, an
error in evo_magic), every call of it gets a result saying what happened, so the next request
is one the API accepts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evo_magic.events import CompactionSkipped, ToolFinished, ToolStarted
from evo_magic.history import History
from evo_magic.loop.parts import LoopParts
from evo_magic.tools import Tool, ToolResult, run_tool

INTERRUPTED_TOOL = "Interrupted by the user while this tool was running; it may have partly run."
STOPPED_TOOL = (
    "Stopped by an error in evo_magic while this tool was running ({error}); it may have "
    "partly run."
)
NOT_RUN = "Not run: the turn stopped ({why}) before this tool started."
BAD_INPUT = (
    "Not run: the input of this {name} call was {kind}, not a JSON object. Send the arguments "
    'as an object, e.g. {{"{example}": ...}}.'
)
COMPACT_FAILED = "[The compaction you asked for did not happen: {error}. The history is unchanged.]"


def run_tools(
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


def compact_for_model(parts: LoopParts, focus: str | None) -> None:
    """The model's compact tool: compact after its batch, and tell the model when it failed."""
    event = parts.compactor.request("model", focus)
    if not event.success:
        error = event.reason if isinstance(event, CompactionSkipped) else event.error
        note = COMPACT_FAILED.format(error=error)
        parts.history.append({"role": "user", "content": [{"type": "text", "text": note}]})


def answer_left_over(history: History, why: str) -> None:
    """Answer every call of the last assistant turn that has no result yet (an interrupt or an
    error between the turn and its results): the history becomes valid again."""
    history.answer_unanswered(lambda block: (NOT_RUN.format(why=why), "not_run"))
