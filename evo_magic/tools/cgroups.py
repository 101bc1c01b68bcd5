"""The control group made for one bash command: the bounds that hold for all its processes.

`ulimit` bounds each process on its own; a command of many processes escapes a per-process bound
by forking (four processes of 1.5 GiB under a 4 GiB address-space bound hold 6 GiB), and root is
not bounded by `ulimit -u` at all. A cgroup counts every process of the command together: the
`pids` controller refuses a fork past the process bound, the `memory` controller makes the
kernel's OOM killer pick a process of the command (never the notebook's kernel) once the command
as a whole passes the memory bound.

The command's cgroups are made inside this process's own (so a bound set on the kernel, a
container's say, still holds): under cgroup v1 one directory per controller's hierarchy, under
cgroup v2 one directory where the parent delegates the controller. Where a controller cannot be
used (not root, not delegated), that bound falls back to `ulimit` alone and the caller says so.
Only the cgroup's own counters decide that a bound was hit: what a command prints is its own
business (a file can say "fork: retry" without any fork being refused).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_CGROUP_MOUNT = Path("/sys/fs/cgroup")
_SELF_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True)
class _Part:
    """One directory of the command's cgroup and the controller it bounds there."""

    controller: str  # "pids" or "memory"
    path: Path
    v2: bool


@dataclass
class CommandCgroup:
    """The cgroup directories made for one command; the command enters all of them before it
    runs, so every process it starts is counted from the first."""

    parts: tuple[_Part, ...]

    @property
    def bounds_processes(self) -> bool:
        return any(p.controller == "pids" for p in self.parts)

    @property
    def bounds_memory(self) -> bool:
        return any(p.controller == "memory" for p in self.parts)

    def enter_argv(self, argv: list[str]) -> list[str]:
        """`argv` started by a shell that first moves itself into each directory."""
        directories = dict.fromkeys(p.path for p in self.parts)
        enter = "".join(
            f"echo $$ > {shlex.quote(str(d / 'cgroup.procs'))} || exit 125; " for d in directories
        )
        return ["/bin/sh", "-c", enter + 'exec "$@"', "sh", *argv]

    def processes_hit(self) -> bool:
        """Whether a fork was refused because of the process bound."""
        return any(
            _count(p.path / "pids.events", "max") > 0 for p in self.parts if p.controller == "pids"
        )

    def memory_hit(self) -> bool:
        """Whether the kernel killed a process of the command for passing the memory bound."""
        for part in self.parts:
            if part.controller != "memory":
                continue
            events = "memory.events" if part.v2 else "memory.oom_control"
            if _count(part.path / events, "oom_kill") > 0:
                return True
        return False

    def remove(self) -> None:
        """Kill what is left in the cgroup and remove it. Processes of a large tree take a
        while to go: after half a second the removal goes on in the background (for at most
        half a minute) rather than hold the command's result back."""
        if not self._try_remove(attempts=50):
            threading.Thread(target=self._try_remove, args=(3_000,), daemon=True).start()

    def _try_remove(self, attempts: int) -> bool:
        left = list(dict.fromkeys(p.path for p in self.parts))
        for _ in range(attempts):
            left = [path for path in left if not _kill_and_remove(path)]
            if not left:
                return True
            time.sleep(0.01)
        return False


def make_command_cgroup(processes: int | None, memory: int | None) -> CommandCgroup | None:
    """A new cgroup bounding a command's processes together (`processes` at once, `memory`
    bytes in all), made for the bounds that are set and that this machine lets us enforce; None
    where neither can be."""
    wanted = {"pids": processes, "memory": memory}
    made: list[_Part] = []
    name = f"evo_magic-{os.getpid()}-{secrets.token_hex(4)}"
    for controller, parent, v2 in _own_cgroups():
        bound = wanted.get(controller)
        if bound is None or any(p.controller == controller for p in made):
            continue
        part = _make_part(controller, parent / name, v2, bound)
        if part is not None:
            made.append(part)
    return CommandCgroup(tuple(made)) if made else None


def _make_part(controller: str, path: Path, v2: bool, bound: int) -> _Part | None:
    try:
        path.mkdir(exist_ok=v2)  # under v2 both controllers share one directory
    except OSError:
        return None
    try:
        for file, value in _bound_files(controller, v2, bound):
            (path / file).write_text(value)
    except OSError:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return _Part(controller, path, v2)


def _bound_files(controller: str, v2: bool, bound: int) -> list[tuple[str, str]]:
    if controller == "pids":
        return [("pids.max", str(bound))]
    if v2:
        return [("memory.max", str(bound)), ("memory.swap.max", "0")]
    return [("memory.limit_in_bytes", str(bound))]


def _own_cgroups() -> list[tuple[str, Path, bool]]:
    """(controller, directory, is v2) for each controller of this process's own cgroups that a
    child cgroup could be made in: cgroup v1's `pids` and `memory` hierarchies, or cgroup v2's
    tree where it delegates the controller."""
    try:
        lines = _SELF_CGROUP.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        for controller in ("pids", "memory"):
            if controller in controllers.split(","):
                found.append((controller, _CGROUP_MOUNT / controller / relative, False))
        if controllers == "" and (_CGROUP_MOUNT / "cgroup.controllers").exists():
            own = _CGROUP_MOUNT / relative
            delegated = _v2_delegated(own)
            found.extend((c, own, True) for c in ("pids", "memory") if c in delegated)
    return [
        (c, d, v2) for c, d, v2 in found if (d / "cgroup.procs").exists() and os.access(d, os.W_OK)
    ]


def _v2_delegated(directory: Path) -> list[str]:
    try:
        return (directory / "cgroup.subtree_control").read_text().split()
    except OSError:
        return []


def _count(file: Path, key: str) -> int:
    """The number after `key` in a cgroup's `key value` lines (0 when unreadable)."""
    try:
        text = file.read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


def _kill_and_remove(path: Path) -> bool:
    """Kill the processes left in `path` and remove it; whether it is gone."""
    try:
        pids = (path / "cgroup.procs").read_text().split()
    except OSError:
        return True  # gone already
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    try:
        path.rmdir()
        return True
    except OSError:
        return False
