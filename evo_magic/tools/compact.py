"""The `compact` tool: the model asks for its own context to be summarised."""

from __future__ import annotations

from typing import Any

from evo_magic.tools.base import Tool, ToolContext


def _run(tool_input: dict[str, Any], ctx: ToolContext) -> str:
    focus = (tool_input.get("focus") or "").strip()
    ctx.request_compaction(focus or None)
    message = "Compaction scheduled: it runs after this tool batch."
    return f"{message}\nFocus: {focus}" if focus else message


COMPACT = Tool(
    name="compact",
    description=(
        "Summarise the conversation so far to free context space. Use it when the context is "
        "getting long, e.g. after a large exploration and before the next phase of work. It runs "
        "after the current tool batch; the summary replaces older messages."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "focus": {
                "type": "string",
                "description": "What the summary must keep: the facts, files and decisions needed "
                "for the work still to do.",
            },
        },
        "required": [],
    },
    run=_run,
    main_argument="focus",
)
