"""Todo: a todo list the model writes with a tool, carried verbatim across every compaction.

Source: DeepAgents' `write_todos` (and its issue #4161: the plan lost at a summary), Claude
Code's TodoWrite and plan mode, Cline's focus chain. A summary paraphrases a plan; a list the
model wrote itself, put back word for word, does not drift.

The strategy edits nothing: it offers the model the `todo` tool. Each call replaces the whole
list; the latest list is then carried like a pin (`compact.pins`): every full compaction puts
it after the compacted header, and the compactor puts it back when a strategy drops it. Until
the first compaction the list is in the context as the tool call's input, so nothing is added
to the history before then (the prompt cache is never rewritten for it). The tool call is in
the transcript like any other, which is what replay reads (`carried_todo`).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.compact.base import Context, Message
from evo_magic.compact.pins import CARRIED
from evo_magic.declared import check_fields, setting
from evo_magic.secrets import known_secrets, redact
from evo_magic.tools.base import Tool, ToolContext, ToolError

TODO_TOOL = "todo"
TODO_PREFIX = "[todo list, written by the agent with the todo tool; carried across compactions]\n"
"""Starts the text block that carries the list (never a person's words)."""


@dataclass(frozen=True)
class Todo:
    """Offer the model a `todo` tool; its latest list is carried verbatim across every
    compaction (see the module)."""

    max_chars: int = setting(
        4_000, "Longest list the tool accepts, in characters (it is in every request).", minimum=1
    )

    name = "todo"
    when = "every_call"
    source = "DeepAgents' write_todos, Claude Code's TodoWrite and plan mode"

    def __post_init__(self) -> None:
        check_fields(self, self.name)

    def compact(self, messages: Sequence[Message], ctx: Context) -> None:
        """Nothing to edit: the list is carried by the compactor like a pin."""
        return None

    def tools(self) -> tuple[Tool, ...]:
        """The `todo` tool."""
        return (
            Tool(
                name=TODO_TOOL,
                description=(
                    "Write your todo list: the whole list each time (it replaces the previous "
                    "one), one item per line, e.g. '- [x] read the tests', '- [ ] fix the "
                    "parser'. The latest list is kept word for word when the conversation is "
                    "compacted, so keep the plan and what is done in it."
                ),
                input_schema={
                    "type": "object",
                    "properties": {
                        "todos": {"type": "string", "description": "The whole list, as text."}
                    },
                    "required": ["todos"],
                },
                run=self._run,
                main_argument="todos",
            ),
        )

    def block_text(self, tool_input: Mapping[str, Any]) -> str:
        """The text block that carries the list of a `todo` call (credentials redacted);
        ToolError saying why when the input is not a list the tool accepts."""
        todos = tool_input.get("todos")
        if not isinstance(todos, str) or not todos.strip():
            raise ToolError("todo: `todos` must be the whole list as non-empty text")
        if len(todos) > self.max_chars:
            raise ToolError(
                f"todo: the list has {len(todos):,} characters, over the {self.max_chars:,} "
                "it may hold (it is in every request): shorten it"
            )
        return TODO_PREFIX + redact(todos, known_secrets())

    def _run(self, tool_input: dict[str, Any], ctx: ToolContext) -> str:
        carry(ctx.notes, self.block_text(tool_input))
        lines = tool_input["todos"].strip().count("\n") + 1
        return f"Todo list saved ({lines} line(s)); it is kept word for word across compactions."


def carry(notes: MutableMapping[str, Any], text: str) -> None:
    """Carry `text` as the todo list from now on (replacing the previous one)."""
    notes.setdefault(CARRIED, {})[TODO_TOOL] = text


def carried_todo(
    strategies: Sequence[object], notes: MutableMapping[str, Any], message: Message
) -> None:
    """What a recorded assistant `message` does to the carried list when a `Todo` is among
    `strategies` (replay's side of the live tool: the same rule, `Todo.block_text`)."""
    todo = next((s for s in strategies if isinstance(s, Todo)), None)
    content = message.get("content")
    if todo is None or message.get("role") != "assistant" or not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        if block.get("name") == TODO_TOOL and isinstance(block.get("input"), dict):
            try:
                carry(notes, todo.block_text(block["input"]))
            except ToolError:
                continue  # live, the call was refused: the list stayed as it was
