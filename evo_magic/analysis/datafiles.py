"""Files the analysis reads back and that are data (a lake's parts and manifest, caches, the
records a replay reads again): a name they hold is resolved inside their folder, opened without
following any link, only when it is a regular file, and never blocking (a FIFO or a device put
in their place is refused at once, it never hangs a load). Writers of a lake hold its lock, and
every temporary name is unique, so builds of one lake at the same time wait for each other.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from evo_magic.analysis.errors import TranscriptError
from evo_magic.tools.paths import open_beneath

LOCK = ".lock"
"""The file of a lake that its writers lock (it holds nothing)."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotInside(TranscriptError):
    """A name read from a lake or a cache leads outside its folder, through a link, or to
    something that is not a regular file."""


_PLAIN = re.compile(r"[A-Za-z0-9_=.-]+(?:/[A-Za-z0-9_=.-]+)*")
"""A relative name of plain components: one `parts_of` splits without parsing a path."""


def unique_temporary(name: str) -> str:
    """A temporary name beside `name` that no other writer (process or thread) picks."""
    return f".{name}.{os.getpid()}.{os.urandom(6).hex()}.tmp"


def parts_of(relative: str) -> list[str]:
    """The components of `relative`, a name a lake's manifest holds: refused (`NotInside`) when
    it is absolute, climbs out with `..`, or holds a NUL byte."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        raise NotInside(f"{relative!r} is not a name of a file inside the lake")
    if _PLAIN.fullmatch(relative):  # what a lake writes: no path parsed for each of thousands
        parts = relative.split("/")
        if "." not in parts and ".." not in parts:
            return parts
    path = PurePosixPath(relative)
    parts = [part for part in path.parts if part not in ("", ".")]
    if path.is_absolute() or ".." in parts or not parts:
        raise NotInside(f"{relative!r} leads outside the lake: refused")
    return parts


@contextlib.contextmanager
def folder_fd(root: Path) -> Iterator[int]:
    """A descriptor of the folder `root` (the folder the user named: a link there is theirs)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def open_inside(root: Path, relative: str) -> BinaryIO:
    """The regular file `relative` below `root`, open for reading; no link on the way is
    followed. Raises FileNotFoundError when it is missing, `NotInside` when the name leads
    outside, through a link, or to anything but a regular file."""
    parts = parts_of(relative)
    with folder_fd(root) as root_fd:
        try:
            fd = open_beneath(root_fd, "/".join(parts), os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
                shown = f"{root / relative}: a part of the path is a link: refused"
                raise NotInside(shown) from exc
            raise
    return _regular(fd, str(root / relative))


def open_regular(path: Path) -> BinaryIO:
    """`path` open for reading when it is a regular file, without following a link at its
    end and without blocking; `NotInside` otherwise (a link, a FIFO, a device, a folder).
    A name that is not a regular file is not even opened (opening a FIFO, even without
    blocking, lets a writer waiting on it go on); the check on the opened file stays, for a
    name replaced in between."""
    if not stat.S_ISREG(os.lstat(path).st_mode):  # FileNotFoundError when it is missing
        shown = "a link" if os.path.islink(path) else "not a regular file"
        raise NotInside(f"{path} is {shown}: refused")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotInside(f"{path} is a link: refused") from exc
        raise
    return _regular(fd, str(path))


def _regular(fd: int, shown: str) -> BinaryIO:
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotInside(f"{shown} is not a regular file: refused")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def is_regular_inside(root: Path, relative: str) -> bool:
    """Whether `relative` names a regular file below `root` reached through no link."""
    try:
        open_inside(root, relative).close()
    except (OSError, NotInside):
        return False
    return True


def not_regular_inside(root: Path, names: list[str]) -> set[str]:
    """Those of `names` (files below `root`) that are not regular files reached through no
    link: missing, a link, a FIFO, or in a folder that is missing or a link. Each folder is
    opened once, each file only looked at (`lstat`), so a lake of thousands of parts is checked
    in milliseconds."""
    by_folder: dict[str, list[str]] = {}
    bad: set[str] = set()
    for name in names:
        try:
            parts = parts_of(name)
        except NotInside:
            bad.add(name)
            continue
        by_folder.setdefault("/".join(parts[:-1]), []).append(name)
    with folder_fd(root) as root_fd:
        for folder, members in by_folder.items():
            try:
                fd = open_beneath(root_fd, folder, _DIR_FLAGS) if folder else os.dup(root_fd)
            except OSError:
                bad.update(members)
                continue
            try:
                for name in members:
                    try:
                        mode = os.stat(parts_of(name)[-1], dir_fd=fd, follow_symlinks=False)
                    except OSError:
                        bad.add(name)
                        continue
                    if not stat.S_ISREG(mode.st_mode):
                        bad.add(name)
            finally:
                os.close(fd)
    return bad


def no_links_below(root: Path, path: Path) -> bool:
    """Whether `path` (found under `root`) is a regular file reached from `root` through no
    link (a folder of a lake replaced by a link to elsewhere is not the lake's)."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        return False
    return is_regular_inside(root, relative.as_posix())


def _folder_beneath(root_fd: int, parts: list[str]) -> int:
    """A descriptor of the folder `parts` below `root_fd`, made where missing; no link on the
    way is followed (a link there raises `NotInside`)."""
    current = os.dup(root_fd)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=current)
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=current)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotInside(
                        f"{'/'.join(parts)}: a link or a file where the lake keeps a "
                        "folder: nothing was written"
                    ) from exc
                raise
            os.close(current)
            current = child
        return current
    except BaseException:
        os.close(current)
        raise


def write_inside(
    root: Path, relative: str, write: Callable[[BinaryIO], None], *, durable: bool = True
) -> None:
    """The file `relative` below `root` written whole by `write` (a temporary file of a unique
    name in the same folder, then renamed over it), its folders made where missing; no link on
    the way is followed, so a folder replaced by a link never makes the write land outside.
    `durable`: flushed to the disk before it is renamed (False: left to the system, for a file
    whose loss or tear is found and repaired when it is read)."""
    parts = parts_of(relative)
    with folder_fd(root) as root_fd:
        folder = _folder_beneath(root_fd, parts[:-1])
        try:
            tmp = unique_temporary(parts[-1])
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o644, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb") as handle:
                    write(handle)
                    handle.flush()
                    if durable:
                        os.fsync(handle.fileno())
                os.replace(tmp, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=folder)
                raise
        finally:
            os.close(folder)


def remove_inside(root: Path, relative: str) -> None:
    """Delete the file `relative` below `root` (a link itself, never what it names); a name
    leading outside, or through a link, deletes nothing."""
    try:
        parts = parts_of(relative)
    except NotInside:
        return
    with folder_fd(root) as root_fd:
        try:
            folder = (
                open_beneath(root_fd, "/".join(parts[:-1]), _DIR_FLAGS)
                if len(parts) > 1
                else os.dup(root_fd)
            )
        except OSError:
            return  # its folder is gone, or is a link: nothing of the lake's to delete
        try:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(parts[-1], dir_fd=folder)
        finally:
            os.close(folder)


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold the lake's lock (other builds of the same lake wait until it is released)."""
    fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
