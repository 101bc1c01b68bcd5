"""The bounds a bash command cannot exceed: memory, file size and processes.

Memory and file size are resource limits the command's shell sets on itself before it runs the
command (`ulimit -v`, `ulimit -f`), so they hold sandboxed or not. Processes are bounded by a
pids cgroup made for the command inside the kernel's own, where one can be created (cgroup v1's
`pids` hierarchy, or a cgroup v2 tree that delegates the pids controller; typically as root):
the per-user process limit (`ulimit -u`)
counts every process of the user and does not apply to root at all, so it is set as well but
relied on only where nothing better exists. A command that hits a bound is stopped, and its
output ends with a line naming the bound.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from evo_magic.tools.bash_settings import BashSettings

_CGROUP_MOUNT = Path("/sys/fs/cgroup")
_SELF_CGROUP = Path("/proc/self/cgroup")
_SIGXFSZ_EXIT = 128 + signal.SIGXFSZ
_MEMORY_SIGNS = ("Cannot allocate memory", "MemoryError", "std::bad_alloc", "out of memory")
_FORK_SIGNS = ("fork: retry", "fork: Resource temporarily unavailable")


def shell_argv(command: str, settings: BashSettings) -> list[str]:
    """`bash -c command` behind a shell that first sets the memory, file size and process
    limits (each set as both soft and hard limit, so the command cannot raise it)."""
    limits = []
    if settings.memory is not None:
        limits.append(f"ulimit -v {settings.memory // 1024}")
    if settings.file_size is not None:
        limits.append(f"ulimit -f {max(1, settings.file_size // 1024)}")
    if settings.processes is not None:
        limits.append(f"ulimit -u {settings.processes}")
    if not limits:
        return ["bash", "-c", command]
    # A limit already lower than ours stays (raising it fails): hence `2>/dev/null` per limit.
    # The same shell then runs the command (a second bash would cost its start-up on every
    # command); `set --` first, so that it sees no positional parameters, as with `bash -c`.
    setup = "; ".join(f"{limit} 2>/dev/null" for limit in limits)
    return ["bash", "-c", f'{setup}; eval "set --\n$1"', "bash", command]


@dataclass
class PidsCgroup:
    """A pids cgroup made for one command: the command enters it before it runs."""

    path: Path

    def enter_argv(self, argv: list[str]) -> list[str]:
        """`argv` started by a shell that first moves itself into the cgroup (so every process
        the command starts is counted from the first)."""
        enter = 'echo $$ > "$0/cgroup.procs" || exit 125; exec "$@"'
        return ["/bin/sh", "-c", enter, str(self.path), *argv]

    def hit(self) -> bool:
        """Whether a fork was refused because of the bound."""
        try:
            events = (self.path / "pids.events").read_text()
        except OSError:
            return False
        counts = dict(line.split() for line in events.splitlines() if line.count(" ") == 1)
        return counts.get("max", "0") != "0"

    def remove(self) -> None:
        """Kill what is left in the cgroup and remove it. Processes of a large tree take a
        while to go: after half a second the removal goes on in the background (for at most
        half a minute) rather than hold the command's result back."""
        if not self._try_remove(attempts=50):
            threading.Thread(target=self._try_remove, args=(3_000,), daemon=True).start()

    def _try_remove(self, attempts: int) -> bool:
        for _ in range(attempts):
            try:
                pids = (self.path / "cgroup.procs").read_text().split()
            except OSError:
                return True  # gone already
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            try:
                self.path.rmdir()
                return True
            except OSError:
                time.sleep(0.01)
        return False


def make_pids_cgroup(processes: int | None) -> PidsCgroup | None:
    """A new pids cgroup with `processes` as its bound, made inside this process's own pids
    cgroup (so a bound set on the kernel, a container's say, still holds), or None where none
    can be made."""
    if processes is None:
        return None
    for parent in _own_pids_cgroups():
        path = parent / f"evo_magic-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except OSError:
            continue
        try:
            (path / "pids.max").write_text(str(processes))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            continue
        return PidsCgroup(path)
    return None


def _own_pids_cgroups() -> list[Path]:
    """The directories of this process's pids cgroup that a child cgroup could be made in: the
    cgroup v1 `pids` hierarchy's, or the cgroup v2 one's where it delegates the pids controller."""
    try:
        lines = _SELF_CGROUP.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if "pids" in controllers.split(","):
            found.append(_CGROUP_MOUNT / "pids" / relative)
        elif controllers == "" and (_CGROUP_MOUNT / "cgroup.controllers").exists():
            own = _CGROUP_MOUNT / relative
            if _v2_pids_enabled(own):
                found.append(own)
    return [d for d in found if (d / "cgroup.procs").exists() and os.access(d, os.W_OK)]


def _v2_pids_enabled(directory: Path) -> bool:
    try:
        return "pids" in (directory / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


def fork_refused(output: str) -> bool:
    """Whether bash said a fork was refused (the sign of the process bound without a cgroup)."""
    return any(sign in output for sign in _FORK_SIGNS)


def bound_notes(
    output: str, returncode: int | None, settings: BashSettings, processes_hit: bool
) -> list[str]:
    """One line for each bound the command's output or exit shows it hit."""
    notes = []
    if processes_hit or (settings.processes is not None and fork_refused(output)):
        notes.append(
            f"[stopped: the command hit the process bound ({settings.processes} processes at "
            "once; setting bash_processes)]"
        )
    failed = returncode != 0  # a failed allocation that the command survived is its business
    if settings.memory is not None and failed and any(sign in output for sign in _MEMORY_SIGNS):
        notes.append(
            f"[the command hit the memory bound ({_size(settings.memory)} of address space per "
            "process; setting bash_memory)]"
        )
    if settings.file_size is not None and (
        returncode == _SIGXFSZ_EXIT or "File size limit exceeded" in output
    ):
        notes.append(
            f"[stopped: the command hit the file size bound ({_size(settings.file_size)} per "
            "file; setting bash_file_size)]"
        )
    if settings.tmp_size is not None and "No space left on device" in output:
        notes.append(
            f"[a write found no space: /tmp, /var/tmp and /dev/shm hold at most "
            f"{_size(settings.tmp_size)} each (setting sandbox_tmp_size); or the disk is full]"
        )
    return notes


def _size(value: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= factor and value % factor == 0:
            return f"{value // factor} {unit}"
    return f"{value:,} bytes"
