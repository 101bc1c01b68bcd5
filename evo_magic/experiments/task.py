"""A task of an experiment: what the agent is asked, in which folder, and how success is checked."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Check = str | Callable[[Path], bool | float]
"""A shell command run in the run's copy of the workspace (exit 0: success), or a function of
that copy's path returning success (bool) or a score (float; success when it is at least 1)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class TaskError(ValueError):
    """A task that cannot be run as given; the message names the field and the rule."""


@dataclass(frozen=True)
class Task:
    """One task: `prompt` asked in a fresh copy of `workspace`, then `check` decides.

    - `name`: letters, digits, `-`, `_` or `.` (it names the runs' folders).
    - `prompt`: the request; a sequence of requests is asked in turn, each after the agent
      finished the one before (a constraint stated first, work, then a question).
    - `workspace`: the template folder; every run works in its own copy, never in it.
    - `check`: a command (run in the sandbox in the run's copy after the agent stopped, exit
      0 is success, its output kept), or a callable `workspace path -> bool | float`.
    - `max_turns`: model calls per request at most.
    - `check_timeout`: seconds the check command may take before the run is an error.
    """

    name: str
    prompt: str | Sequence[str]
    workspace: str | os.PathLike[str]
    check: Check
    max_turns: int = 30
    check_timeout: float = 120.0
    turns: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise TaskError(
                f"Task name must be 1-64 letters, digits, '-', '_' or '.', got {self.name!r}"
            )
        object.__setattr__(self, "turns", _turns(self.name, self.prompt))
        folder = Path(self.workspace).expanduser()
        if not folder.is_dir():
            raise TaskError(f"Task {self.name}: workspace {str(folder)!r} is not a folder")
        object.__setattr__(self, "workspace", folder.resolve())
        if not (isinstance(self.check, str) and self.check.strip()) and not callable(self.check):
            raise TaskError(f"Task {self.name}: check must be a command or a callable")
        turns = self.max_turns
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
            raise TaskError(f"Task {self.name}: max_turns must be a positive whole number")
        limit = self.check_timeout
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0:
            raise TaskError(f"Task {self.name}: check_timeout must be a positive number")

    @property
    def template(self) -> Path:
        """The workspace folder the runs copy (as a resolved Path)."""
        return Path(self.workspace)

    def workspace_hash(self) -> str:
        """A SHA-256 of the template: every path under it, its kind and its bytes (links are
        hashed by their target's text, never followed)."""
        digest = hashlib.sha256()
        root = self.template
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                digest.update(f"L {relative} -> {os.readlink(path)}\n".encode())
            elif path.is_file():
                digest.update(f"F {relative} {path.stat().st_size}\n".encode())
                digest.update(path.read_bytes())
            elif path.is_dir():
                digest.update(f"D {relative}\n".encode())
        return digest.hexdigest()

    def describe(self) -> dict[str, object]:
        """The task as a record (the check as its command, or the callable's name)."""
        check = self.check if isinstance(self.check, str) else _callable_name(self.check)
        return {
            "name": self.name,
            "prompt": list(self.turns),
            "workspace": str(self.template),
            "check": check,
            "max_turns": self.max_turns,
            "check_timeout": self.check_timeout,
            "workspace_sha256": self.workspace_hash(),
        }


def _turns(name: str, prompt: object) -> tuple[str, ...]:
    turns = (prompt,) if isinstance(prompt, str) else prompt
    if not isinstance(turns, Sequence) or not turns:
        raise TaskError(f"Task {name}: prompt must be a request or a list of requests")
    if not all(isinstance(turn, str) and turn.strip() for turn in turns):
        raise TaskError(f"Task {name}: every request of prompt must be non-empty text")
    return tuple(turns)


def _callable_name(check: Callable[..., object]) -> str:
    module = getattr(check, "__module__", "") or ""
    qualified = getattr(check, "__qualname__", None) or type(check).__name__
    return f"{module}.{qualified}" if module else qualified
