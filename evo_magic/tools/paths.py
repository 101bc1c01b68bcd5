"""Keep every file tool inside the workspace, races, symlinks and hardlinks included.

Two steps. `resolve_in_workspace` turns the model's path into a symlink-free path inside the
workspace (or refuses it with a message that says why); it follows symlinks, so a link inside the
workspace to another file inside still works. Then `open_in_workspace` opens that path by walking
from a descriptor of the workspace without following any link: `openat2` with
`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it (Linux 5.6+), else one
`O_NOFOLLOW` component at a time with `dir_fd`. A directory swapped for a symlink between the two
steps makes the open fail; it never reaches outside. Writes refuse a file with more than one hard
link, which could be a name for a file outside.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from evo_magic.tools.base import ToolError


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """The absolute, symlink-free path `path` names, guaranteed to lie inside `workspace`.

    `path` may be relative (to the workspace) or absolute, and need not exist yet. Symlinks are
    followed and `..` is normalised before the check, so `../x`, `/etc/passwd`, a symlink in the
    workspace pointing outside and a path through such a symlinked directory all raise ToolError.
    The result is only a name: open it with `open_in_workspace`, which re-checks on the way.
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


class PathChanged(ToolError):
    """A part of the path became a symlink (or vanished) while it was being opened."""


class MultiplyLinked(ToolError):
    """A file to be written has another hard link, which may be a name outside the workspace."""


# openat2(2): struct open_how and the RESOLVE_* flags, from <linux/openat2.h>.
_SYS_OPENAT2 = 437  # the same number on every Linux architecture (added after the unification)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@dataclass
class _Openat2:
    """Whether this kernel has openat2, found out on first use."""

    usable: bool | None = None
    syscall: object = None


_OPENAT2 = _Openat2()


def _syscall() -> object | None:
    if _OPENAT2.usable is False:
        return None
    if _OPENAT2.syscall is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            function = libc.syscall
        except (OSError, AttributeError):
            _OPENAT2.usable = False
            return None
        function.restype = ctypes.c_long
        _OPENAT2.syscall = function
    return _OPENAT2.syscall


def _openat2(dir_fd: int, relative: str, flags: int, mode: int) -> int | None:
    """`openat2(dir_fd, relative, ...)` with no link followed and nothing above `dir_fd`, or None
    when the kernel (or a seccomp filter) does not offer the call."""
    function = _syscall() if os.uname().sysname == "Linux" else None
    if function is None:
        return None
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE)
    fd = function(  # type: ignore[operator]
        _SYS_OPENAT2,
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(relative)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        _OPENAT2.usable = True
        return int(fd)
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EPERM) and not _OPENAT2.usable:
        _OPENAT2.usable = False  # an old kernel, or a container that filters the call
        return None
    raise OSError(code, os.strerror(code), relative)


def _walk_open(dir_fd: int, parts: list[str], flags: int, mode: int, create_dirs: bool) -> int:
    """Open `parts` below `dir_fd` one component at a time, never following a link."""
    current = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=current)
            except FileNotFoundError:
                if not create_dirs:
                    raise
                with contextlib.suppress(FileExistsError):  # made by someone else meanwhile
                    os.mkdir(part, dir_fd=current)
                child = os.open(part, _DIR_FLAGS, dir_fd=current)
            os.close(current)
            current = child
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
    finally:
        os.close(current)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_beneath(
    root_fd: int,
    relative: str,
    flags: int,
    mode: int = 0o666,
    *,
    create_dirs: bool = False,
    use_openat2: bool = True,
) -> int:
    """A descriptor for `relative` (a normalised, `..`-free path) below the directory `root_fd`.

    No symlink is followed anywhere on the way (a link raises OSError ELOOP, or ENOTDIR for a
    link where a directory is expected). With `create_dirs`, missing parent directories are made,
    each one re-opened without following links. `use_openat2=False` forces the portable walk.
    """
    parts = [part for part in PurePosixPath(relative).parts if part not in ("", ".")]
    if not parts or ".." in parts or PurePosixPath(relative).is_absolute():
        raise ValueError(f"not a normalised relative path: {relative!r}")
    if use_openat2:
        try:
            fd = _openat2(root_fd, "/".join(parts), flags, mode)
        except FileNotFoundError:
            if not create_dirs or len(parts) == 1:
                raise
            fd = None  # a parent is missing: the walk below creates it
        if fd is not None:
            return fd
    return _walk_open(root_fd, parts, flags, mode, create_dirs)


@contextlib.contextmanager
def _workspace_fd(workspace: Path) -> Iterator[int]:
    fd = os.open(workspace.resolve(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@dataclass
class Opened:
    """A file opened inside the workspace: its descriptor and its status at open time."""

    fd: int
    status: os.stat_result

    def close(self) -> None:
        os.close(self.fd)


def open_in_workspace(
    workspace: Path, resolved: Path, flags: int, *, create_dirs: bool = False
) -> Opened:
    """Open `resolved` (from `resolve_in_workspace`) without following any link.

    Non-blocking, so a FIFO or a device never hangs the tool; callers check `status`. Raises
    PathChanged when a component turned out to be a symlink (it was swapped in after the path
    was resolved), FileNotFoundError when the file is missing, other OSErrors as they come.
    """
    relative = display_path(workspace, resolved)
    with _workspace_fd(workspace) as root_fd:
        try:
            fd = open_beneath(
                root_fd, relative, flags | os.O_NONBLOCK | os.O_NOCTTY, create_dirs=create_dirs
            )
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EXDEV) or (
                error.errno == errno.ENOTDIR and _has_link(root_fd, relative)
            ):
                raise PathChanged(
                    f"{relative!r}: a part of the path is (now) a symbolic link, so it was not "
                    "opened; tools follow no link while opening a file"
                ) from error
            raise
    os.set_blocking(fd, True)
    return Opened(fd, os.fstat(fd))


def _has_link(root_fd: int, relative: str) -> bool:
    """Whether a component of `relative` below `root_fd` is now a symlink (to explain ENOTDIR)."""
    parts = PurePosixPath(relative).parts
    for end in range(1, len(parts) + 1):
        try:
            mode = os.stat("/".join(parts[:end]), dir_fd=root_fd, follow_symlinks=False).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            return True
    return False


def check_single_link(opened: Opened, shown: str) -> None:
    """Refuse to write through a file that has another hard link (another name, perhaps
    outside the workspace, for the same data)."""
    links = opened.status.st_nlink
    if stat.S_ISREG(opened.status.st_mode) and links > 1:
        raise MultiplyLinked(
            f"{shown} has {links} hard links: writing would also change the file under its other "
            "name(s), which may be outside the workspace. Nothing was written; write a new file "
            "instead (e.g. write_file to another path, then rename it with bash)."
        )
