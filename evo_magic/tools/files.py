"""The file tools: `read_file`, `write_file` and `edit_file`, all confined to the workspace.

Text is UTF-8 and kept exact (line endings included), because the model copies what read_file
returned into edit_file's `old_str`.
"""

from __future__ import annotations

import errno
import io
import os
import posixpath
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo_magic.tools.base import Tool, ToolContext, ToolError
from evo_magic.tools.paths import (
    Opened,
    PathChanged,
    check_single_link,
    display_path,
    open_in_workspace,
    resolve_in_workspace,
)

READ_CAP = 50_000
"""Most characters of file text one read_file call returns."""
_SNIFF_BYTES = 8192
"""A NUL byte in this many leading bytes marks a file as binary."""


def _path_property(what: str) -> dict[str, str]:
    return {
        "type": "string",
        "description": f"Path of the file {what}, relative to the workspace or absolute inside it.",
    }


def _resolve(tool: str, tool_input: dict[str, Any], ctx: ToolContext) -> tuple[Path, str]:
    """The resolved path and its display form; a path outside the workspace is refused."""
    try:
        path = resolve_in_workspace(ctx.workspace, tool_input["path"])
    except ToolError as error:
        raise ToolError(f"{tool}: {error}") from error
    return path, display_path(ctx.workspace, path)


def _writable(tool: str, path: Path, shown: str, ctx: ToolContext) -> None:
    """Refuse a write inside a read-only directory (the session's own transcripts)."""
    for directory in ctx.read_only:
        if path.is_relative_to(directory.resolve()):
            raise ToolError(
                f"{tool}: {shown} is in {display_path(ctx.workspace, directory.resolve())}, the "
                "session's transcripts, which tools may read but not change"
            )


def _open(tool: str, ctx: ToolContext, path: Path, flags: int, create_dirs: bool = False) -> Opened:
    """Open `path` below the workspace, following no link; a swapped-in link is refused."""
    try:
        return open_in_workspace(ctx.workspace, path, flags, create_dirs=create_dirs)
    except PathChanged as error:
        raise ToolError(f"{tool}: {error}") from error


def _open_text(tool: str, ctx: ToolContext, path: Path, shown: str, hint: str = "") -> Opened:
    """Open an existing, regular, non-binary file for reading; anything else is refused.

    `hint` follows the "does not exist" message."""
    try:
        opened = _open(tool, ctx, path, os.O_RDONLY)
    except FileNotFoundError as error:
        raise ToolError(f"{tool}: {shown} does not exist{hint}") from error
    except OSError as error:
        raise ToolError(f"{tool}: cannot read {shown}: {error.strerror or error}") from error
    mode = opened.status.st_mode
    problem = None
    if stat.S_ISDIR(mode):
        problem = f"{tool}: {shown} is a directory; use bash (`ls`) to list it"
    elif not stat.S_ISREG(mode):
        problem = f"{tool}: {shown} is not a regular file"
    elif b"\0" in os.pread(opened.fd, _SNIFF_BYTES, 0):
        problem = _binary_message(tool, shown, "it has a NUL byte")
    if problem is not None:
        opened.close()
        raise ToolError(problem)
    return opened


def _binary_message(tool: str, shown: str, why: str) -> str:
    return (
        f"{tool}: {shown} looks binary ({why}); only UTF-8 text files are supported. "
        "Use bash (e.g. `file`, `xxd | head`) to inspect it."
    )


def _line_count(text: str) -> int:
    """Lines in `text`, a last line without a newline included ("" has 0)."""
    return text.count("\n") + (0 if text == "" or text.endswith("\n") else 1)


# read_file


def _positive(tool_input: dict[str, Any], name: str, default: int | None) -> int | None:
    value = tool_input.get(name, default)
    if value is not None and value < 1:
        raise ToolError(f"read_file: {name} must be at least 1, got {value}")
    return value


@dataclass
class _Slice:
    """What one read_file call takes from a file."""

    text: str
    next_line: int
    """The 1-based number of the first line not returned."""
    total: int
    """The file's line count."""
    long_line: int | None = None
    """A line longer than the cap, of which only the start was returned."""


def _read_lines(opened: Opened, shown: str, offset: int, limit: int | None) -> _Slice:
    """Lines from `offset` on, up to `limit` lines and READ_CAP characters."""
    parts: list[str] = []
    size = 0
    chunk = _Slice("", next_line=offset, total=0)
    full = False
    try:
        # newline="" keeps "\r\n" exact; the file is scanned to its end to count the lines.
        raw = open(opened.fd, "rb", closefd=False)  # noqa: SIM115 (closed with the wrapper)
        with io.TextIOWrapper(raw, encoding="utf-8", newline="") as handle:
            for number, line in enumerate(handle, start=1):
                chunk.total = number
                if number < offset or full:
                    continue  # before the slice, or after it: only counting
                over_limit = limit is not None and number >= offset + limit
                if over_limit or size + len(line) > READ_CAP:
                    full = True
                    if not parts:  # this line alone is over the cap: return its start
                        parts.append(line[:READ_CAP])
                        chunk.long_line = number
                        chunk.next_line = number + 1
                    continue
                parts.append(line)
                size += len(line)
                chunk.next_line = number + 1
    except UnicodeDecodeError as error:
        raise ToolError(_binary_message("read_file", shown, "not valid UTF-8")) from error
    chunk.text = "".join(parts)
    return chunk


def _read_file(tool_input: dict[str, Any], ctx: ToolContext) -> str:
    path, shown = _resolve("read_file", tool_input, ctx)
    opened = _open_text("read_file", ctx, path, shown)
    try:
        offset = _positive(tool_input, "offset", 1) or 1
        limit = _positive(tool_input, "limit", None)
        chunk = _read_lines(opened, shown, offset, limit)
    finally:
        opened.close()
    if chunk.total == 0:
        ctx.on_file(shown)
        return f"[{shown} is empty]"
    if offset > chunk.total:
        raise ToolError(
            f"read_file: offset {offset} is past the end of {shown} ({chunk.total} lines)"
        )
    ctx.on_file(shown)
    notes = []
    if chunk.long_line is not None:
        notes.append(
            f"[line {chunk.long_line} is longer than {READ_CAP:,} characters and was cut; "
            "use bash (e.g. `cut -c`) to see the rest of it]"
        )
    remaining = chunk.total - chunk.next_line + 1
    if remaining > 0:
        more = f"call read_file with offset={chunk.next_line} to continue"
        notes.append(f"[... {remaining} more lines; {more}]")
    if not notes:
        return chunk.text
    separator = "" if chunk.text.endswith("\n") else "\n"
    return chunk.text + separator + "\n".join(notes)


READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a UTF-8 text file in the workspace. Returns its exact text (no line numbers), at "
        f"most {READ_CAP:,} characters; a note at the end says how to continue when it stopped "
        "early. Use offset/limit to read part of a large file."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": _path_property("to read"),
            "offset": {"type": "integer", "description": "First line to read, 1-based; default 1."},
            "limit": {"type": "integer", "description": "Most lines to read (default: all)."},
        },
        "required": ["path"],
    },
    run=_read_file,
    main_argument="path",
)


# write_file


def _write(
    tool: str, ctx: ToolContext, path: Path, shown: str, content: str, *, new: bool = False
) -> int:
    """Write `content` as UTF-8, creating parent directories; the number of bytes written.

    The file is opened below the workspace without following links, and refused when it has
    another hard link. `new` creates the file and fails if it exists (FileExistsError).
    """
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ToolError(f"{tool}: content is not valid UTF-8 text ({error})") from error
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if new else 0)
    try:
        opened = _open(tool, ctx, path, flags, create_dirs=True)
    except IsADirectoryError as error:
        raise ToolError(f"{tool}: {shown} is a directory") from error
    except FileExistsError:
        raise
    except OSError as error:
        if error.errno == errno.ENXIO:  # a FIFO nobody reads
            raise ToolError(f"{tool}: {shown} is not a regular file") from error
        raise ToolError(f"{tool}: cannot write {shown}: {error.strerror or error}") from error
    try:
        if not stat.S_ISREG(opened.status.st_mode):
            raise ToolError(f"{tool}: {shown} is not a regular file")
        check_single_link(opened, f"{tool}: {shown}")
        os.ftruncate(opened.fd, 0)
        written = 0
        while written < len(data):
            written += os.write(opened.fd, data[written:])
    except OSError as error:
        raise ToolError(f"{tool}: cannot write {shown}: {error.strerror or error}") from error
    finally:
        opened.close()
    return len(data)


def _write_file(tool_input: dict[str, Any], ctx: ToolContext) -> str:
    path, shown = _resolve("write_file", tool_input, ctx)
    _writable("write_file", path, shown, ctx)
    written = _write("write_file", ctx, path, shown, tool_input["content"])
    ctx.on_file(shown)
    return f"Wrote {written} bytes to {shown}"


WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create a file in the workspace or overwrite it completely with `content` (UTF-8); "
        "parent directories are created. To change part of an existing file use edit_file."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": _path_property("to write"),
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "content"],
    },
    run=_write_file,
    main_argument="path",
)


# edit_file


def _create(ctx: ToolContext, path: Path, shown: str, new_str: str) -> str:
    """edit_file with an empty old_str: create a new file, never overwrite one."""
    try:
        _write("edit_file", ctx, path, shown, new_str, new=True)
    except FileExistsError as error:
        raise ToolError(
            f"edit_file: old_str is empty, which creates a new file, but {shown} already exists. "
            "Give the exact text to replace as old_str, or use write_file to overwrite the file."
        ) from error
    return f"Created {shown} ({_line_count(new_str)} lines)"


def _replace_once(text: str, shown: str, old_str: str, new_str: str) -> tuple[str, int]:
    """`text` with its single occurrence of `old_str` replaced, and that occurrence's line."""
    count = text.count(old_str)
    if count == 0:
        raise ToolError(
            f"edit_file: old_str was not found in {shown} (0 occurrences). It must match the file "
            "exactly, whitespace and indentation included; read_file it and copy the text."
        )
    if count > 1:
        raise ToolError(
            f"edit_file: old_str occurs {count} times in {shown}; it must occur exactly once. "
            "Add surrounding lines to old_str to make it unique."
        )
    index = text.index(old_str)
    return text[:index] + new_str + text[index + len(old_str) :], text.count("\n", 0, index) + 1


_CREATE_HINT = ". To create it, use write_file (or edit_file with an empty old_str)."


def _edit_file(tool_input: dict[str, Any], ctx: ToolContext) -> str:
    path, shown = _resolve("edit_file", tool_input, ctx)
    _writable("edit_file", path, shown, ctx)
    old_str: str = tool_input["old_str"]
    new_str: str = tool_input["new_str"]
    if old_str == "":
        result = _create(ctx, path, shown, new_str)
        ctx.on_file(shown)
        return result
    opened = _open_text("edit_file", ctx, path, shown, _CREATE_HINT)
    try:
        if old_str == new_str:
            raise ToolError("edit_file: old_str and new_str are identical; nothing would change")
        with open(opened.fd, "rb", closefd=False) as handle:
            text = handle.read().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolError(_binary_message("edit_file", shown, "not valid UTF-8")) from error
    finally:
        opened.close()
    new_text, line = _replace_once(text, shown, old_str, new_str)
    _write("edit_file", ctx, path, shown, new_text)
    ctx.on_file(shown)
    return (
        f"Edited {shown}: replaced 1 occurrence at line {line} "
        f"({_line_count(old_str)} lines -> {_line_count(new_str)} lines)"
    )


EDIT_FILE = Tool(
    name="edit_file",
    description=(
        "Replace one exact occurrence of old_str by new_str in a workspace file. old_str must "
        "match the file exactly (whitespace included) and occur exactly once: include enough "
        "surrounding lines to make it unique. An empty old_str creates a new file with new_str."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": _path_property("to edit"),
            "old_str": {
                "type": "string",
                "description": "Exact text to replace, occurring once; empty to create a new file.",
            },
            "new_str": {"type": "string", "description": "The text that replaces old_str."},
        },
        "required": ["path", "old_str", "new_str"],
    },
    run=_edit_file,
    main_argument="path",
)


# the same reads for the session's own use


def read_text(workspace: Path, path: str, max_chars: int | None = None) -> str | None:
    """The whole text of the file `path` names, read as read_file reads it: inside
    `workspace` (no link followed), a regular UTF-8 text file; ToolError saying why otherwise.
    None when it holds more than `max_chars` characters (then only its size is looked at).
    For the session's own reads, such as a compaction putting recent files back."""
    ctx = ToolContext(workspace)
    resolved, shown = _resolve("read_file", {"path": path}, ctx)
    opened = _open_text("read_file", ctx, resolved, shown)
    try:
        # A UTF-8 character is at most 4 bytes: a larger file cannot be within the limit.
        if max_chars is not None and opened.status.st_size > 4 * max_chars:
            return None
        with open(opened.fd, "rb", closefd=False) as handle:
            data = handle.read()
    finally:
        opened.close()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolError(_binary_message("read_file", shown, "not valid UTF-8")) from error
    return None if max_chars is not None and len(text) > max_chars else text


FILE_TOOLS = frozenset(tool.name for tool in (READ_FILE, WRITE_FILE, EDIT_FILE))
"""The tools that note the file they read or wrote among the session's recent files."""


def touched_path(name: Any, tool_input: Any) -> str | None:
    """The path a successful call of tool `name` with `tool_input` notes among the recent
    files, in the form the tools note it (workspace-relative, normalised; an absolute path as
    given, since its workspace is not known here); None for a tool that notes none. What a
    recorded session's results say is read with it (replay)."""
    if name not in FILE_TOOLS or not isinstance(tool_input, dict):
        return None
    path = tool_input.get("path")
    if not isinstance(path, str) or not path:
        return None
    return path if path.startswith("/") else posixpath.normpath(path)
