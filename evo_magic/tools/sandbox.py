"""Keep every file tool inside the workspace: resolve a path, refuse it when it leads outside."""

from __future__ import annotations

from pathlib import Path

from evo_magic.tools.base import ToolError


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The absolute, symlink-free path `path` names, guaranteed to lie inside `workspace`.

    `path` may be relative (to the workspace) or absolute, and need not exist yet. Symlinks are
    followed and `..` is normalised before the check, so `../x`, `/etc/passwd`, a symlink in the
    workspace pointing outside and a path through such a symlinked directory all raise ToolError.
    """
    root = workspace.resolve()
    if not path.strip():
        raise ToolError("path is empty; give a path relative to the workspace")
    if path.startswith("~"):
        # The shell would expand `~`; here it would silently become a directory named "~".
        raise ToolError(f"{path!r}: `~` is not expanded; give a path relative to the workspace")
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = candidate.resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as error:
        # RuntimeError: a symlink loop (Python 3.11); ValueError: a NUL byte in the path.
        raise ToolError(f"{path!r}: cannot resolve path ({error})") from error
    if not resolved.is_relative_to(root):
        raise ToolError(
            f"{path!r} resolves to {resolved}, outside the workspace {root}; "
            "tools may only touch files inside the workspace"
        )
    return resolved


def display_path(workspace: Path, resolved: Path) -> str:
    """The workspace-relative POSIX form of `resolved` (a result of `resolve_in_workspace`).

    The workspace root itself is shown as ".".
    """
    return resolved.relative_to(workspace.resolve()).as_posix()
