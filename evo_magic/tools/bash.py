"""The `bash` tool: run one command in the workspace, in a sandbox, with a timeout, bounded
output and a guard.

The sandbox (tools/sandbox.py) is the defence: the command cannot see the notebook kernel's
process, memory or environment and can write only the workspace and a private /tmp. The guard
(tools/guard.py) refuses a few clearly destructive commands before anything runs; it catches
accidents, not a determined command. The environment never holds a credential the session knows,
nor (by default) a variable whose name says it holds one; the bounds (tools/bounds.py) stop a
runaway command.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evo_magic.secrets import environment_without_secrets, known_secrets
from evo_magic.tools.base import Tool, ToolContext, ToolError
from evo_magic.tools.bash_settings import BashSettings
from evo_magic.tools.bounds import bound_notes, processes_hit, shell_argv
from evo_magic.tools.cgroups import CommandCgroup, make_command_cgroup
from evo_magic.tools.guard import refusal_reason
from evo_magic.tools.sandbox import (
    DEFAULT_SANDBOX,
    INSTALL_HINT,
    Hidden,
    SandboxStatus,
    check_mode,
    sandbox_status,
    sandboxed_argv,
    workspace_secrets,
)

OUTPUT_CAP = 50_000
"""Most characters of output a result holds; beyond it the head and tail are kept."""
_KEEP = 24_000
"""Characters kept at each end of a capped output (two of them plus the note fit the cap)."""
_READ_SIZE = 65_536
_DRAIN_GRACE = 2.0
"""Seconds to wait for the output pipe to close once the process group is gone."""
UNSANDBOXED_NOTICE = "unsandboxed"
"""The key in `ToolContext.notices` of the warning that commands run without the sandbox."""
UNBOUNDED_PROCESSES_NOTICE = "processes-unbounded"
"""The key in `ToolContext.notices` of the warning that the process bound is not enforced."""
PER_PROCESS_MEMORY_NOTICE = "memory-per-process"
"""The key in `ToolContext.notices` of the note that the memory bound holds per process only."""
_WATCH_INTERVAL = 0.05
"""Seconds between two looks at whether a running command hit its process bound."""


@dataclass
class _OutputBuffer:
    """Decoded output with bounded memory: the first and last OUTPUT_CAP characters and a count."""

    head: str = ""
    tail: str = ""
    total: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    _decoder: Any = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))

    def feed(self, data: bytes, final: bool = False) -> None:
        """Add raw bytes; `final` flushes a partial UTF-8 sequence at the end of the stream."""
        text = self._decoder.decode(data, final)
        with self.lock:
            self.total += len(text)
            room = OUTPUT_CAP - len(self.head)
            if room > 0:
                self.head += text[:room]
                text = text[room:]
            if text:
                self.tail = (self.tail + text)[-OUTPUT_CAP:]

    def recent(self, chars: int = 2_000) -> str:
        """The last `chars` characters of the output so far."""
        with self.lock:
            return (self.head + self.tail)[-chars:]

    def text(self) -> str:
        """The output, or its head and tail with a note of how many characters were cut."""
        with self.lock:
            if self.total <= OUTPUT_CAP:
                return self.head + self.tail
            cut = self.total - 2 * _KEEP
            end = (self.head + self.tail)[-_KEEP:]
            note = f"\n\n[... {cut:,} characters cut from the middle of the output ...]\n\n"
            return self.head[:_KEEP] + note + end


def _read_all(stream: io.BufferedReader, buffer: _OutputBuffer) -> None:
    """Reader thread: copy `stream` into `buffer` until EOF, so the pipe never fills up."""
    try:
        while chunk := stream.read1(_READ_SIZE):
            buffer.feed(chunk)
    except (OSError, ValueError):
        pass  # the pipe went away; what was read is kept
    finally:
        buffer.feed(b"", final=True)
        stream.close()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's whole process group (it leads its own session)."""
    # ProcessLookupError: every process in the group has already exited.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _timeout(tool_input: dict[str, Any], ctx: ToolContext) -> float:
    """The timeout in seconds: the input's, capped at the context's `bash_timeout`."""
    requested = tool_input.get("timeout")
    if requested is None:
        return ctx.bash_timeout
    if requested <= 0:
        raise ToolError(f"bash: timeout must be a positive number of seconds, got {requested}")
    return min(float(requested), ctx.bash_timeout)


def command_environment(settings: BashSettings | None = None) -> dict[str, str]:
    """The kernel's environment as a command gets it: without the session's credential
    variables, any variable whose value holds a known credential (whatever its name), the
    variables pointing at the host's sockets, and those whose names `settings` drops."""
    settings = settings or BashSettings()
    kept = environment_without_secrets(os.environ)
    return {name: value for name, value in kept.items() if settings.keeps(name)}


@dataclass(frozen=True)
class Launch:
    """How a command is started: the argv prefix before `bash -c`, a notice to show, and the
    bounds that apply (without the sandbox, none on temporary file systems)."""

    prefix: list[str]
    notice: str = ""
    settings: BashSettings = field(default_factory=BashSettings)


def plan_launch(
    workspace: Path,
    mode: str,
    notices: set[str] | None = None,
    read_only: tuple[Path, ...] = (),
    settings: BashSettings | None = None,
) -> Launch:
    """Where the command runs under sandbox setting `mode` ("require", "warn" or "off").

    "require" without a usable sandbox raises ToolError (nothing runs). "warn" without one runs
    unsandboxed with a notice, given once per `notices` set (the session's). Sandboxed, the
    workspace files that hold a known credential are hidden, with a notice the first time.
    """
    settings = settings or BashSettings()
    unsandboxed = replace(settings, tmp_size=None)
    if check_mode(mode) == "off":
        return Launch([], settings=unsandboxed)
    status = sandbox_status()
    if status.available and status.bwrap is not None:
        return _sandboxed_launch(status, workspace, notices, read_only, settings)
    if mode == "require":
        raise ToolError(
            f"bash: refused to run this command: the sandbox is required but not available: "
            f"{status.reason}. Nothing was run. To run bash, {INSTALL_HINT}, "
            "or set the sandbox setting to 'warn'."
        )
    network = " The network cannot be cut (sandbox_network 'off' does not apply)." * (
        settings.network == "off"
    )
    warning = (
        f"[warning: bash runs WITHOUT a sandbox: {status.reason}. Commands can read the notebook "
        "kernel's memory and environment, the host's sockets and the workspace's notebooks, and "
        f"write wherever this user can; /tmp is the host's, unbounded.{network} To confine them, "
        f"{INSTALL_HINT}; to refuse to run unsandboxed, set the sandbox setting to 'require'.]\n"
    )
    return Launch([], _once(notices, UNSANDBOXED_NOTICE, warning), unsandboxed)


def _sandboxed_launch(
    status: SandboxStatus,
    workspace: Path,
    notices: set[str] | None,
    read_only: tuple[Path, ...],
    settings: BashSettings,
) -> Launch:
    """The launch in bubblewrap, with the notices due: RAM disks left unsized by an old bwrap,
    the network cut, workspace files newly hidden."""
    assert status.bwrap is not None
    notice = ""
    if not status.sizes_tmpfs and settings.tmp_size is not None:
        settings = replace(settings, tmp_size=None)
        notice = _once(
            notices,
            "unsized-tmp",
            f"[warning: {status.bwrap} is older than bubblewrap 0.6 and cannot bound the "
            "size of /tmp, /var/tmp and /dev/shm; the other bounds hold]\n",
        )
    if settings.network == "off":
        notice += _once(
            notices,
            "network-off",
            "[notice: commands have no network (sandbox_network is 'off'): only loopback "
            "inside the sandbox; pip install, git clone and downloads fail]\n",
        )
    hidden = workspace_secrets(workspace.resolve(), known_secrets())
    prefix = sandboxed_argv(status.bwrap, workspace, [], read_only, settings, hidden)
    notice += _hidden_notice(workspace.resolve(), hidden, notices)
    return Launch(prefix, notice, settings)


def _once(notices: set[str] | None, key: str, text: str) -> str:
    """`text` the first time `key` is noticed in `notices` (every time without a set)."""
    if notices is not None and key in notices:
        return ""
    if notices is not None:
        notices.add(key)
    return text


def _hidden_notice(workspace: Path, hidden: Hidden, notices: set[str] | None) -> str:
    """One line naming the workspace files newly hidden from commands ("" when none is new)."""
    names = [p.relative_to(workspace).as_posix() for p in hidden.files]
    names += [p.relative_to(workspace).as_posix() + "/" for p in hidden.directories]
    new = [name for name in names if notices is None or f"hidden:{name}" not in notices]
    if not new:
        return ""
    if notices is not None:
        notices.update(f"hidden:{name}" for name in new)
    return f"[notice: hidden from bash (they hold or may hold a credential): {', '.join(new)}]\n"


def run_command(
    command: str,
    workspace: os.PathLike[str] | str,
    timeout: float,
    sandbox: str = DEFAULT_SANDBOX,
    notices: set[str] | None = None,
    read_only: tuple[Path, ...] = (),
    settings: BashSettings | None = None,
) -> str:
    """Run `command` with `bash -c` in `workspace`; the merged output and a final status line.

    The guard may refuse it first (ToolError, nothing run). `sandbox` is the setting
    `plan_launch` applies; an unsandboxed run under "warn" starts with a notice. The status line
    is `[exit code: N]`. On timeout every process the command started is killed and ToolError
    is raised with the partial output. Processes the command leaves in the background are killed
    when it ends (in the sandbox, all of them; unsandboxed, `setsid` escapes unless a pids
    cgroup holds them). A KeyboardInterrupt kills them too, then propagates. A command that hits
    one of the bounds of `settings` is stopped, and a line before the status names the bound.
    """
    reason = refusal_reason(command, cwd=workspace)
    if reason is not None:
        raise ToolError(f"bash: refused to run this command: it {reason}. Nothing was run.")
    settings = settings or BashSettings()
    launch = plan_launch(Path(workspace), sandbox, notices, read_only, settings)
    argv = [*launch.prefix, *shell_argv(command, launch.settings)]
    cgroup = make_command_cgroup(launch.settings.processes, launch.settings.memory)
    notice = launch.notice + _unbounded_notice(cgroup, launch.settings, notices)
    if cgroup is not None:
        argv = cgroup.enter_argv(argv)
    try:
        output, returncode, hit = _execute(argv, workspace, timeout, launch.settings, cgroup)
        hit = hit or processes_hit(cgroup, output, launch.settings)
        memory_killed = cgroup is not None and cgroup.memory_hit()
    finally:
        if cgroup is not None:
            cgroup.remove()
    found = bound_notes(output, returncode, launch.settings, hit, memory_killed)
    notes = "".join(f"\n{note}" for note in found)
    if returncode is None and not hit:
        killed = f"timed out after {timeout:g} s and was killed, with every process it started"
        raise ToolError(f"{notice}{output}{notes}\n[{killed}]")
    status = 128 + signal.SIGKILL if returncode is None else returncode  # as bash reports it
    return f"{notice}{output}{notes}\n[exit code: {status}]"


def _unbounded_notice(
    cgroup: CommandCgroup | None, settings: BashSettings, notices: set[str] | None
) -> str:
    """Once per session each: the process bound is not enforced (root, and no pids cgroup); the
    memory bound holds per process only (no memory cgroup)."""
    said = ""
    processes_bounded = cgroup is not None and cgroup.bounds_processes
    if not processes_bounded and settings.processes is not None and os.geteuid() == 0:
        # A user other than root is bounded by `ulimit -u` (counting the user's processes).
        said += _once(
            notices,
            UNBOUNDED_PROCESSES_NOTICE,
            "[warning: the process bound is not enforced: no pids cgroup can be created here, "
            "and the per-user process limit does not apply to root]\n",
        )
    if settings.memory is not None and not (cgroup is not None and cgroup.bounds_memory):
        said += _once(
            notices,
            PER_PROCESS_MEMORY_NOTICE,
            "[note: the memory bound holds per process only (address space): no memory cgroup "
            "can be created here, so a command of several processes may use more in all]\n",
        )
    return said


def _execute(
    argv: list[str],
    workspace: os.PathLike[str] | str,
    timeout: float,
    settings: BashSettings,
    cgroup: CommandCgroup | None = None,
) -> tuple[str, int | None, bool]:
    """Run `argv`; its output, exit code (None when it was killed: timed out or hit the
    process bound) and whether it hit the process bound."""
    process = subprocess.Popen(
        argv,
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=command_environment(settings),
    )
    buffer = _OutputBuffer()
    assert process.stdout is not None
    # Daemon: a process that escaped the group (setsid) may hold the pipe open for ever.
    reader = threading.Thread(target=_read_all, args=(process.stdout, buffer), daemon=True)
    reader.start()
    stopped = True
    hit = False
    try:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                process.wait(timeout=min(left, _WATCH_INTERVAL))
                stopped = False
                break
            except subprocess.TimeoutExpired:
                if hit := _hit_process_bound(cgroup, buffer, settings):
                    break
    finally:
        # Runs on every exit, KeyboardInterrupt included: nothing the command started survives.
        # In the sandbox, killing bwrap's group ends its PID namespace and every process in it.
        _kill_group(process)
        process.wait()
    reader.join(_DRAIN_GRACE)
    output = buffer.text() or "(no output)"
    if reader.is_alive():
        output += "\n[output may be incomplete: a detached process still holds the output pipe]"
    if stopped:
        return output, None, hit
    # A signal's death reads as bash reports it (128 + N), sandboxed (bwrap reports it so) or not.
    code = process.returncode
    return output, 128 - code if code < 0 else code, False


def _hit_process_bound(
    cgroup: CommandCgroup | None, buffer: _OutputBuffer, settings: BashSettings
) -> bool:
    """Whether a fork was refused while the command runs (the rule of `processes_hit`)."""
    return processes_hit(cgroup, buffer.recent(), settings)


def _run(tool_input: dict[str, Any], ctx: ToolContext) -> str:
    command = tool_input["command"]
    if not command.strip():
        raise ToolError("bash: command is empty")
    if not ctx.workspace.is_dir():
        raise ToolError(f"bash: the workspace {ctx.workspace} is not a directory")
    timeout = _timeout(tool_input, ctx)
    return run_command(
        command, ctx.workspace, timeout, ctx.sandbox, ctx.notices, ctx.read_only, ctx.bash
    )


BASH = Tool(
    name="bash",
    description=(
        "Run a bash command in the workspace directory and return its combined stdout and stderr, "
        "ending with the exit code. Each call is a fresh shell: `cd` and variables do not carry "
        "over. There is no stdin; commands must not wait for input. Output beyond 50,000 "
        "characters keeps only its head and tail. Background processes are killed when the "
        "command ends. Commands run in a sandbox where it is available: only the workspace and a "
        "private /tmp are writable. Clearly destructive commands (sudo, rm -rf /, shutdown, "
        "mkfs, ...) are refused. Prefer read_file, write_file and edit_file for files."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command, run with `bash -c`."},
            "timeout": {
                "type": "integer",
                "description": "Seconds before the command is killed; capped at the session's "
                "bash timeout, which is also the default.",
            },
        },
        "required": ["command"],
    },
    run=_run,
    main_argument="command",
)
