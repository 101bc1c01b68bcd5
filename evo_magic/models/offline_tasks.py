"""What the offline stand-in does with a request made of plain directives, as the built-in
experiment tasks are written (`evo_magic.experiments.tasks`).

A request holding one or more of these sentences is worked through them, one step each, in
the order written, then answered in text:

- ``Run `COMMAND`.``: a bash call.
- ``In `PATH`, replace `OLD` with `NEW`.``: an edit_file call.
- ``Write to `PATH` the line `TEXT`.``: a write_file call; a blank (``____``) in TEXT is filled
  from what the context holds, by the retention probes' literal search (`evo_magic.probe`),
  outside the request itself; nothing found, the line says "I don't know."
- ``Replace `OLD` with `NEW` in every file the search listed.``: one bash call that edits
  the files listed by the newest `grep -rl ... OLD ...` output still in the context; that
  output gone, nothing is edited and the step says so.

Whenever it writes a file, it honours every constraint of the form ``every file you write
must end with the line `TEXT` `` that a user message in its context states (the line is
appended). So what it does depends on what the strategies left in its context: a grep output
masked or summarised away, or a first message cut by a summary, changes the outcome, for a
reason one can name.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evo_magic.messages import content_blocks
from evo_magic.probe import BLANK, block_text, fill_blank

Block = dict[str, Any]
Message = dict[str, Any]

_RUN = re.compile(r"Run `([^`]+)`")
_EDIT = re.compile(r"In `([^`]+)`, replace `([^`]+)` with `([^`]*)`")
_WRITE = re.compile(r"Write to `([^`]+)` the line `([^`]+)`")
_RENAME = re.compile(r"Replace `([^`]+)` with `([^`]+)` in every file the search listed")
_CONSTRAINT = re.compile(r"every file you write must end with the line `([^`]+)`", re.IGNORECASE)
_KINDS = (("run", _RUN), ("edit", _EDIT), ("write", _WRITE), ("rename", _RENAME))
UNKNOWN = "I don't know."


@dataclass(frozen=True)
class Directive:
    """One step of a request: its kind and the backquoted parts, as written."""

    kind: str
    parts: tuple[str, ...]
    at: int


def directives(request: str) -> list[Directive]:
    """The directives of `request`, in the order written ([] when it holds none)."""
    found = [
        Directive(kind, match.groups(), match.start())
        for kind, pattern in _KINDS
        for match in pattern.finditer(request)
    ]
    return sorted(found, key=lambda d: d.at)


Tool = Callable[..., Block]


def directive_step(
    directive: Directive, context: list[Message], request_index: int, tool: Tool
) -> tuple[str, list[Block]]:
    """What one directive does, read against `context` (the history; `request_index` is the
    request's own message, not searched): a sentence saying it, and the tool calls."""
    others = [*context[:request_index], *context[request_index + 1 :]]
    if directive.kind == "run":
        (command,) = directive.parts
        return f"running `{command}`.", [tool("bash", command=command)]
    if directive.kind == "edit":
        path, old, new = directive.parts
        return f"editing {path}.", [tool("edit_file", path=path, old_str=old, new_str=new)]
    if directive.kind == "write":
        path, text = directive.parts
        line = filled(text, others)
        content = "\n".join([line, *constraints(context)]) + "\n"
        return f"writing {path}.", [tool("write_file", path=path, content=content)]
    old, new = directive.parts
    files = listed_files(old, context)
    if not files:
        return f"I no longer see which files the search for {old} listed; nothing renamed.", []
    command = f"sed -i 's/\\b{old}\\b/{new}/g' " + " ".join(map(shlex.quote, files))
    return f"renaming {old} to {new} in {len(files)} file(s).", [tool("bash", command=command)]


def filled(text: str, context: list[Message]) -> str:
    """`text` with its blank filled from `context` (every span found, joined by "; "), or
    UNKNOWN when the context does not hold it; `text` as it is when it has no blank."""
    if BLANK not in text:
        return text
    texts = [block_text(b) for m in context for b in content_blocks(m)]
    spans = [span for span in fill_blank(text, texts) if BLANK not in span]
    return text.replace(BLANK, "; ".join(spans)) if spans else UNKNOWN


def constraints(context: list[Message]) -> list[str]:
    """The closing lines the user's messages in `context` require of every written file."""
    found: dict[str, None] = {}
    for message in context:
        if message.get("role") != "user":
            continue
        for block in content_blocks(message):
            if block.get("type") == "text":
                for line in _CONSTRAINT.findall(block.get("text") or ""):
                    found.setdefault(line, None)
    return list(found)


def listed_files(word: str, context: list[Message]) -> list[str]:
    """The files the newest `grep -rl` for `word` in `context` listed ([] when gone)."""
    calls = {
        b["id"]: b.get("input", {}).get("command", "")
        for m in context
        if m.get("role") == "assistant"
        for b in content_blocks(m)
        if b.get("type") == "tool_use" and b.get("name") == "bash"
    }
    for message in reversed(context):
        for block in content_blocks(message):
            command = calls.get(block.get("tool_use_id", "")) if block.get("type") else None
            if block.get("type") != "tool_result" or not command:
                continue
            if command.startswith("grep -rl") and word in command:
                lines = block_text(block).splitlines()
                return [line.strip() for line in lines if _is_path(line.strip())]
    return []


def _is_path(line: str) -> bool:
    return bool(line) and not line.startswith("[") and " " not in line
