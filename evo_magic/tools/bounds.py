"""The bounds a bash command cannot exceed: memory, file size and processes.

Memory and file size are resource limits the command's shell sets on itself before it runs the
command (`ulimit -v`, `ulimit -f`), so they hold sandboxed or not, per process. Where a cgroup
can be made for the command (tools/cgroups.py; typically as root), it bounds the command's
processes together: how many run at once, and the memory they hold in all. The per-user process
limit (`ulimit -u`) counts every process of the user and does not apply to root at all, so it is
set as well but relied on only where nothing better exists. A command that hits a bound is
stopped, and its output ends with a line naming the bound.
"""

from __future__ import annotations

import signal

from evo_magic.tools.bash_settings import BashSettings
from evo_magic.tools.cgroups import CommandCgroup

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


def processes_hit(cgroup: CommandCgroup | None, output: str, settings: BashSettings) -> bool:
    """Whether the command hit the process bound. Where a cgroup counts the command's
    processes only its count decides (a command may print "fork: retry" without any fork being
    refused); elsewhere bash's own words for a refused fork are the only sign there is."""
    if settings.processes is None:
        return False
    if cgroup is not None and cgroup.bounds_processes:
        return cgroup.processes_hit()
    return any(sign in output for sign in _FORK_SIGNS)


def bound_notes(
    output: str,
    returncode: int | None,
    settings: BashSettings,
    processes: bool,
    memory_killed: bool = False,
) -> list[str]:
    """One line for each bound the command hit: `processes` as `processes_hit` says,
    `memory_killed` when the memory cgroup's OOM killer stopped a process of the command, else
    the memory bound per process as the output shows it."""
    notes = []
    if processes:
        notes.append(
            f"[stopped: the command hit the process bound ({settings.processes} processes at "
            "once; setting bash_processes)]"
        )
    if settings.memory is not None and memory_killed:
        notes.append(
            f"[killed: a process of the command passed the memory bound "
            f"({_size(settings.memory)} in all its processes together; setting bash_memory)]"
        )
    failed = returncode != 0  # a failed allocation that the command survived is its business
    said = any(sign in output for sign in _MEMORY_SIGNS)
    if settings.memory is not None and not memory_killed and failed and said:
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
