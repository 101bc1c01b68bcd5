"""The agent's tools and `run_tool`, which turns one tool call into a ToolResult, never raising."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from evo_magic.tools.base import Tool, ToolContext, ToolError, ToolResult, check_input
from evo_magic.tools.bash import BASH
from evo_magic.tools.bash_settings import BashSettings
from evo_magic.tools.compact import COMPACT
from evo_magic.tools.files import EDIT_FILE, READ_FILE, WRITE_FILE
from evo_magic.tools.sandbox import (
    DEFAULT_SANDBOX,
    SANDBOX_MODES,
    SandboxStatus,
    describe_sandbox,
    sandbox_status,
)

__all__ = [
    "BASH",
    "BashSettings",
    "COMPACT",
    "DEFAULT_SANDBOX",
    "EDIT_FILE",
    "READ_FILE",
    "SANDBOX_MODES",
    "WRITE_FILE",
    "SandboxStatus",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "default_tools",
    "offered_tools",
    "describe_sandbox",
    "run_tool",
    "sandbox_status",
]


def default_tools() -> list[Tool]:
    """The tools every session offers, always in this order (a stable order keeps the prompt
    cache valid): bash, read_file, write_file, edit_file, compact."""
    return [BASH, READ_FILE, WRITE_FILE, EDIT_FILE, COMPACT]


def offered_tools(base: Sequence[Tool], strategies: Iterable[object]) -> list[Tool]:
    """The tools a session offers: `base` in its order, then the tools each strategy
    contributes (its optional `tools()` method), in the strategies' order, a name already
    offered skipped. The order depends only on the configuration, so the cached prefix
    (tools first) holds from one call to the next."""
    offered = list(base)
    names = {tool.name for tool in offered}
    for strategy in strategies:
        method = getattr(strategy, "tools", None)
        for tool in method() if callable(method) else ():
            if not isinstance(tool, Tool):
                raise TypeError(f"{strategy!r}.tools() must return Tool values, got {tool!r}")
            if tool.name not in names:
                names.add(tool.name)
                offered.append(tool)
    return offered


def run_tool(
    tools: Sequence[Tool], tool_use_id: str, name: str, tool_input: object, ctx: ToolContext
) -> ToolResult:
    """Run the tool called `name` on `tool_input`; every failure becomes an `is_error` result.

    An unknown name, invalid input, a ToolError and any other Exception all return a result the
    model can read; only KeyboardInterrupt and SystemExit propagate. `duration` is in seconds.
    """
    started = time.perf_counter()
    content, is_error = _call(tools, name, tool_input, ctx)
    return ToolResult(
        tool_use_id, name, content, is_error=is_error, duration=time.perf_counter() - started
    )


def _call(
    tools: Sequence[Tool], name: str, tool_input: object, ctx: ToolContext
) -> tuple[str, bool]:
    """The tool's text and whether it is an error."""
    tool = next((tool for tool in tools if tool.name == name), None)
    if tool is None:
        known = ", ".join(tool.name for tool in tools) or "none"
        return f"Unknown tool {name!r}; the known tools are: {known}", True
    try:
        return tool.run(check_input(tool, tool_input), ctx), False
    except ToolError as error:
        return str(error), True
    except Exception as error:  # a tool never raises into the loop
        return f"{type(error).__name__}: {error}", True
