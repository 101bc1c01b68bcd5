"""What a recorded tool call did to files: the paths it read and the paths it changed, and the
key that says two calls were the same command. Pure functions of (tool name, input), read as
data: nothing a call names is run or opened.

Reads: evo_magic `read_file` (`path`), Claude Code `Read` (`file_path`), and a shell command
(evo_magic `bash` and Claude Code `Bash` `command`, Codex `exec_command` `cmd` or `shell`
`command`, `bash -lc` unwrapped) that runs `cat`, `head`, `tail` or `sed -n` on a path.
Changes: evo_magic `write_file` and `edit_file`, Claude Code `Write`, `Edit`, `MultiEdit` and
`NotebookEdit`, the files of an `apply_patch` (`*** Add/Update/Delete File: ...`), and in a
shell command a `>` or `>>` target, `tee`'s files and `sed -i`'s. A path is the one the call
names, normalised (`./a/../b` is `b`); a file named once relative and once absolute is two
paths (a recording does not say every call's working folder).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

READ_TOOLS = {"read_file": "path", "Read": "file_path"}
"""File tools that read a file, and the input field naming it."""
WRITE_TOOLS = {
    "write_file": "path",
    "edit_file": "path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
"""File tools that change a file, and the input field naming it."""
SHELL_READERS = frozenset({"cat", "head", "tail", "sed"})
"""Programs whose file arguments a shell command reads (`sed` only with `-n`, without `-i`)."""
_VALUED = {"head": {"-n", "-c"}, "tail": {"-n", "-c"}, "sed": {"-e", "-f"}, "cat": set()}
"""Options whose value is the next word, not a file."""
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")"})
_REDIRECTS = frozenset({">", ">>", ">|"})
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_LONG = {"n": ("--quiet", "--silent"), "i": ("--in-place",)}
_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "-"})


@dataclass(frozen=True)
class Effect:
    """What one tool call did to files, and the key of the command it was."""

    reads: tuple[str, ...]
    writes: tuple[str, ...]
    key: str
    """The tool's name and its input as canonical JSON: equal keys are the same command."""


def effect(tool: str, input_text: str | None) -> Effect:
    """The files tool `tool` read and changed when called with the input whose JSON text is
    `input_text` (a text that is not JSON: no files, the text itself as the key)."""
    return _effect(str(tool), input_text or "")


@lru_cache(maxsize=65536)
def _effect(tool: str, input_text: str) -> Effect:
    try:
        value = json.loads(input_text)
    except ValueError:
        return Effect((), (), f"{tool}\x00{input_text}")
    key = f"{tool}\x00{json.dumps(value, sort_keys=True, ensure_ascii=False)}"
    reads: list[str] = []
    writes: list[str] = []
    if isinstance(value, dict):
        named = _named(value, READ_TOOLS.get(tool))
        reads.extend(named)
        writes.extend(_named(value, WRITE_TOOLS.get(tool)))
        command = shell_command(value)
        if command is not None:
            shell_reads, shell_writes = shell_files(command)
            reads.extend(shell_reads)
            writes.extend(shell_writes)
        for field in value.values():
            if isinstance(field, str) and "*** " in field:
                writes.extend(patched_files(field))
    elif isinstance(value, str) and "*** " in value:
        writes.extend(patched_files(value))
    return Effect(_unique(reads), _unique(writes), key)


def _named(value: dict[str, Any], field: str | None) -> list[str]:
    path = value.get(field) if field else None
    return [normal(path)] if isinstance(path, str) and path.strip() else []


def normal(path: str) -> str:
    """`path` normalised as a recording's paths are compared."""
    return posixpath.normpath(path.strip())


def shell_command(value: dict[str, Any]) -> str | None:
    """The shell command of a tool input (`command` or `cmd`; a list is an argv, and
    `bash -lc TEXT` is TEXT)."""
    command = value.get("command", value.get("cmd"))
    if isinstance(command, list) and all(isinstance(part, str) for part in command):
        if (
            len(command) >= 3
            and command[0] in {"bash", "sh", "zsh"}
            and command[1] in {"-lc", "-c"}
        ):
            return command[2]
        return shlex.join(command)
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if len(words) == 3 and words[0] in {"bash", "sh", "zsh"} and words[1] in {"-lc", "-c"}:
        return words[2]
    return command


def shell_files(command: str) -> tuple[list[str], list[str]]:
    """The files a shell command reads (with `cat`, `head`, `tail`, `sed -n`) and changes (a
    `>`/`>>` target, `tee`, `sed -i`). A command that does not parse (an open quote, a here
    document) reads and changes nothing that can be told."""
    reads: list[str] = []
    writes: list[str] = []
    try:
        simple_commands = list(_simple_commands(command))
    except ValueError:
        return [], []
    for words, targets in simple_commands:
        writes.extend(targets)
        if not words:
            continue
        program = posixpath.basename(words[0])
        if program == "tee":
            writes.extend(w for w in words[1:] if not w.startswith("-"))
        elif program == "sed" and any(_has_flag(w, "i") for w in words[1:]):
            writes.extend(_operands("sed", words[1:]))
        elif program in SHELL_READERS:
            if program == "sed" and not any(_has_flag(w, "n") for w in words[1:]):
                continue
            reads.extend(_operands(program, words[1:]))
    return [normal(p) for p in reads if p not in _NOT_FILES], [
        normal(p) for p in writes if p not in _NOT_FILES
    ]


def _simple_commands(command: str) -> Iterator[tuple[list[str], list[str]]]:
    """Each simple command's words (variable assignments and redirections left out) and the
    files it redirects output to."""
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    words: list[str] = []
    targets: list[str] = []
    tokens = list(lexer)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in _SEPARATORS:
            yield words, targets
            words, targets = [], []
        elif token in _REDIRECTS or token in {"<", ">&", "<<", "<<<"}:
            if words and words[-1].isdigit():
                words.pop()  # the descriptor of `2>`
            following = tokens[i + 1] if i + 1 < len(tokens) else ""
            if token in _REDIRECTS and following and not following.startswith("&"):
                targets.append(following)
            i += 1
        elif not words and re.match(r"^[A-Za-z_]\w*=", token):
            pass  # an environment assignment before the program
        else:
            words.append(token)
        i += 1
    yield words, targets


def _has_flag(word: str, flag: str) -> bool:
    """Whether `word` is an option holding `flag`: a short cluster (`-n`, `-ni`, `-i.bak`) or
    its long name (`--quiet`, `--silent` for `n`; `--in-place` for `i`)."""
    if word.startswith("--"):
        return word.split("=")[0] in _LONG.get(flag, ())
    cluster = re.match(r"-([A-Za-z]+)", word)
    return cluster is not None and flag in cluster.group(1)


def _operands(program: str, words: list[str]) -> list[str]:
    """The file operands of `program`'s arguments: options and their values left out, and
    for `sed` its script (the first operand, unless given with `-e` or `-f`)."""
    operands: list[str] = []
    scripted = False
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-") and len(word) > 1:
            if word in _VALUED.get(program, set()):
                skip = True
                scripted = scripted or word in {"-e", "-f"}
            continue
        operands.append(word)
    if program == "sed" and not scripted and operands:
        operands = operands[1:]
    if program in {"head", "tail"}:
        operands = [w for w in operands if not w.lstrip("+").isdigit()]
    return operands


def patched_files(text: str) -> list[str]:
    """The files an `apply_patch` text adds, updates or deletes."""
    return [normal(name) for name in _PATCH_FILE.findall(text) if name.strip()]


def _unique(paths: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for p in paths if p and p != "."))
