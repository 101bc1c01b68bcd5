"""What every tool is: a name, a JSON schema, and a function from input to text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo_magic.tools.bash_settings import BashSettings
from evo_magic.tools.sandbox import DEFAULT_SANDBOX, SandboxMode, check_mode


class ToolError(Exception):
    """A tool refused or failed; the message goes back to the model as an `is_error` tool_result."""


@dataclass
class ToolContext:
    """What a tool may touch: the workspace, and two hooks back into the session."""

    workspace: Path
    on_file: Callable[[str], None] = lambda path: None
    """Called with the workspace-relative path of a file read, written or edited."""
    request_compaction: Callable[[str | None], None] = lambda focus: None
    """Called by the `compact` tool: compaction runs after the current tool batch."""
    bash_timeout: float = 120.0
    sandbox: SandboxMode = DEFAULT_SANDBOX
    """Where bash runs when bubblewrap is unusable: "require" refuses to run it, "warn" runs it
    unsandboxed and says so, "off" never sandboxes (see tools/sandbox.py)."""
    read_only: tuple[Path, ...] = ()
    """Directories inside the workspace the agent may read but never change (the session's
    own transcripts): mounted read-only in the sandbox, refused by write_file and edit_file."""
    bash: BashSettings = field(default_factory=BashSettings)
    """What a bash command gets (environment, network) and the bounds it cannot exceed."""
    notices: set[str] = field(default_factory=set)
    """Notices already given in a tool output; pass the session's one set to every batch so
    that each (e.g. "bash runs without a sandbox") is given once per session."""
    notes: dict[str, Any] = field(default_factory=dict)
    """What the tools strategies contribute keep for the whole session (pass the session's
    one dict to every batch): the `todo` list, the `recall` index, the `handoff` text."""
    originals: Path | None = None
    """The session's transcript folder (`session.jsonl`, `snapshots/`): what `recall` reads."""
    shown: Callable[[str], str | None] = lambda tool_use_id: None
    """The text of the tool result of that tool use as the context holds it now (None: it is
    not in the context any more)."""

    def __post_init__(self) -> None:
        check_mode(self.sandbox)
        if not isinstance(self.bash, BashSettings):
            raise TypeError(f"bash must be a BashSettings, got {type(self.bash).__name__}")


@dataclass(frozen=True)
class Tool:
    """One tool the model can call."""

    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[dict[str, Any], ToolContext], str]
    main_argument: str | None = None
    """The input field a one-line summary shows (e.g. `command` for bash)."""

    def definition(self) -> dict[str, Any]:
        """The tool as the Messages API `tools` parameter lists it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass
class ToolResult:
    """The outcome of one tool call, before it becomes a tool_result block."""

    tool_use_id: str
    name: str
    content: str
    is_error: bool = False
    duration: float = 0.0
    saved_to: str | None = None
    """Set when the full output was too large and was saved to this file (layer 0)."""
    original_chars: int = field(default=0)

    def block(self) -> dict[str, Any]:
        """The tool_result content block sent back to the model."""
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": self.content,
        }
        if self.is_error:
            block["is_error"] = True
        return block


def check_input(tool: Tool, tool_input: Any) -> dict[str, Any]:
    """Validate `tool_input` against the tool's schema: an object, required fields, simple types."""
    if not isinstance(tool_input, dict):
        raise ToolError(
            f"{tool.name}: input must be a JSON object, got {type(tool_input).__name__}"
        )
    schema = tool.input_schema
    missing = [name for name in schema.get("required", []) if name not in tool_input]
    if missing:
        raise ToolError(f"{tool.name}: missing required field(s): {', '.join(missing)}")
    types = {"string": str, "integer": int, "boolean": bool, "number": (int, float)}
    for name, value in tool_input.items():
        spec = schema.get("properties", {}).get(name)
        if spec is None:
            continue
        expected = types.get(spec.get("type", ""))
        wrong = expected is not None and not isinstance(value, expected)
        if spec.get("type") == "integer" and isinstance(value, bool):
            wrong = True
        if wrong:
            raise ToolError(f"{tool.name}: field {name!r} must be a {spec['type']}, got {value!r}")
    return tool_input
