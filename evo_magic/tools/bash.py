"""The `bash` tool: run one command in the workspace, in a sandbox, with a timeout, bounded
output and a guard.

The sandbox (tools/sandbox.py) is the defence: the command cannot see the notebook kernel's
process, memory or environment and can write only the workspace and a private /tmp. The guard
(tools/guard.py) refuses a few clearly destructive commands before anything runs; it catches
accidents, not a determined command. The environment never holds a credential the session knows.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo_magic.secrets import SECRET_ENV_VARS, known_secrets
from evo_magic.tools.base import Tool, ToolContext, ToolError
from evo_magic.tools.guard import refusal_reason
from evo_magic.tools.sandbox import (
    DEFAULT_SANDBOX,
    INSTALL_HINT,
    check_mode,
    sandbox_status,
    sandboxed_argv,
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


def command_environment() -> dict[str, str]:
    """The kernel's environment without the session's credentials: the credential variables
    are dropped, and so is any variable whose value holds a known credential."""
    secrets = known_secrets()
    return {
        name: value
        for name, value in os.environ.items()
        if name not in SECRET_ENV_VARS and not any(secret in value for secret in secrets)
    }


@dataclass(frozen=True)
class Launch:
    """How a command is started: the argv prefix before `bash -c`, and a notice to show."""

    prefix: list[str]
    notice: str = ""


def plan_launch(
    workspace: Path,
    mode: str,
    notices: set[str] | None = None,
    read_only: tuple[Path, ...] = (),
) -> Launch:
    """Where the command runs under sandbox setting `mode` ("require", "warn" or "off").

    "require" without a usable sandbox raises ToolError (nothing runs). "warn" without one runs
    unsandboxed with a notice, given once per `notices` set (the session's).
    """
    if check_mode(mode) == "off":
        return Launch([])
    status = sandbox_status()
    if status.available and status.bwrap is not None:
        return Launch(sandboxed_argv(status.bwrap, workspace, [], read_only))
    if mode == "require":
        raise ToolError(
            f"bash: refused to run this command: the sandbox is required but not available: "
            f"{status.reason}. Nothing was run. To run bash, {INSTALL_HINT}, "
            "or set the sandbox setting to 'warn'."
        )
    if notices is not None and UNSANDBOXED_NOTICE in notices:
        return Launch([])
    if notices is not None:
        notices.add(UNSANDBOXED_NOTICE)
    return Launch(
        [],
        f"[warning: bash runs WITHOUT a sandbox: {status.reason}. Commands can read the notebook "
        "kernel's memory and environment and write wherever this user can. To confine them, "
        f"{INSTALL_HINT}; to refuse to run unsandboxed, set the sandbox setting to 'require'.]\n",
    )


def run_command(
    command: str,
    workspace: os.PathLike[str] | str,
    timeout: float,
    sandbox: str = DEFAULT_SANDBOX,
    notices: set[str] | None = None,
    read_only: tuple[Path, ...] = (),
) -> str:
    """Run `command` with `bash -c` in `workspace`; the merged output and a final status line.

    The guard may refuse it first (ToolError, nothing run). `sandbox` is the setting
    `plan_launch` applies; an unsandboxed run under "warn" starts with a notice. The status line
    is `[exit code: N]`. On timeout every process the command started is killed and ToolError
    is raised with the partial output. Processes the command leaves in the background are killed
    when it ends (in the sandbox, all of them; unsandboxed, `setsid` escapes). A
    KeyboardInterrupt kills them too, then propagates.
    """
    reason = refusal_reason(command, cwd=workspace)
    if reason is not None:
        raise ToolError(f"bash: refused to run this command: it {reason}. Nothing was run.")
    launch = plan_launch(Path(workspace), sandbox, notices, read_only)
    output, returncode = _execute([*launch.prefix, "bash", "-c", command], workspace, timeout)
    if returncode is None:
        killed = f"timed out after {timeout:g} s and was killed, with every process it started"
        raise ToolError(f"{launch.notice}{output}\n[{killed}]")
    return f"{launch.notice}{output}\n[exit code: {returncode}]"


def _execute(
    argv: list[str], workspace: os.PathLike[str] | str, timeout: float
) -> tuple[str, int | None]:
    """Run `argv`; its output and exit code (None when it timed out and was killed)."""
    process = subprocess.Popen(
        argv,
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=command_environment(),
    )
    buffer = _OutputBuffer()
    assert process.stdout is not None
    # Daemon: a process that escaped the group (setsid) may hold the pipe open for ever.
    reader = threading.Thread(target=_read_all, args=(process.stdout, buffer), daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # Runs on every exit, KeyboardInterrupt included: nothing the command started survives.
        # In the sandbox, killing bwrap's group ends its PID namespace and every process in it.
        _kill_group(process)
        process.wait()
    reader.join(_DRAIN_GRACE)
    output = buffer.text() or "(no output)"
    if reader.is_alive():
        output += "\n[output may be incomplete: a detached process still holds the output pipe]"
    if timed_out:
        return output, None
    # A signal's death reads as bash reports it (128 + N), sandboxed (bwrap reports it so) or not.
    code = process.returncode
    return output, 128 - code if code < 0 else code


def _run(tool_input: dict[str, Any], ctx: ToolContext) -> str:
    command = tool_input["command"]
    if not command.strip():
        raise ToolError("bash: command is empty")
    if not ctx.workspace.is_dir():
        raise ToolError(f"bash: the workspace {ctx.workspace} is not a directory")
    timeout = _timeout(tool_input, ctx)
    return run_command(command, ctx.workspace, timeout, ctx.sandbox, ctx.notices, ctx.read_only)


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
