"""The `bash` tool: run one command in the workspace, with a timeout, bounded output and a guard.

The guard (`REFUSED`) refuses a short list of clearly destructive commands before anything runs.
Its rule: a pattern matches only where a command word starts (start of a line, after `;`, `&`,
`|`, a bracket or a backquote, behind prefixes like `env`, `nohup` or `VAR=1`), so `sudo x` and
`ls; sudo x` are refused while `echo sudo` runs; `rm` is refused only when an argument is `/`,
`/*`, `~`, `$HOME` or a top-level system directory, so `rm -rf ./build` runs. It is a guard
against accidents, not a security boundary: `bash -c "sudo x"` or an obfuscated command gets
through.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any

from evo_magic.tools.base import Tool, ToolContext, ToolError

OUTPUT_CAP = 50_000
"""Most characters of output a result holds; beyond it the head and tail are kept."""
_KEEP = 24_000
"""Characters kept at each end of a capped output (two of them plus the note fit the cap)."""
_READ_SIZE = 65_536
_DRAIN_GRACE = 2.0
"""Seconds to wait for the output pipe to close once the process group is gone."""
HIDDEN_ENV = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"})
"""Variables the agent's commands never see: the session's own credentials."""

# Where a command word can start: the beginning, after a shell separator or an opening
# bracket/substitution, optionally behind prefixes that run the next word as a command
# (`env`, `exec`, `nohup`, `xargs`, `if`, `VAR=value`, ...) and a directory (`/bin/rm`).
# Matching only there keeps `echo sudo` or `grep reboot log` runnable while `ls; sudo x` is not.
_CMD = (
    r"(?:^|[;&|(){}`\n])\s*"
    r"(?:(?:\w+=\S*|env|exec|nohup|time|command|builtin|nice|xargs|if|then|else|do|while|until|!)"
    r"\s+)*"
    r"(?:[\w./-]*/)?"
)
# One argument of the current simple command (stops at a separator).
_ARGS = r"[^;&|\n]*"
# A whole word ends at whitespace, the end or a separator.
_END = r"(?=\s|$|[;&|)])"
_SYSTEM_DIRS = r"(?:bin|boot|dev|etc|home|lib\w*|opt|proc|root|sbin|srv|sys|usr|var)"
# `/`, `/*`, `~`, `~/`, `$HOME`, `${HOME}/*`, `/etc`, ..., quoted or not, as a whole word.
_DANGEROUS_TARGET = rf"[\"']?(?:/(?:{_SYSTEM_DIRS})?|~|\$HOME|\$\{{HOME\}})/?\*?[\"']?{_END}"
_BLOCK_DEVICE = r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|loop|dm-|md|sr)\w*"
_SHUTDOWN = "shuts down or restarts the machine"


@dataclass(frozen=True)
class Refusal:
    """A destructive command shape the bash tool refuses, and why."""

    pattern: re.Pattern[str]
    reason: str


def _refusal(pattern: str, reason: str) -> Refusal:
    return Refusal(re.compile(pattern, re.MULTILINE), reason)


REFUSED: tuple[Refusal, ...] = (
    _refusal(
        rf"{_CMD}rm\s+(?:{_ARGS}\s)?{_DANGEROUS_TARGET}",
        "deletes the root, the home directory or a system directory",
    ),
    _refusal(r"--no-preserve-root\b", "disables rm's protection of /"),
    _refusal(rf"{_CMD}sudo\b", "runs commands as root"),
    _refusal(rf"{_CMD}su{_END}", "switches to another user (root)"),
    _refusal(rf"{_CMD}(?:shutdown|reboot|halt|poweroff){_END}", _SHUTDOWN),
    _refusal(
        rf"{_CMD}(?:systemctl|init|telinit)\s+(?:poweroff|reboot|halt|kexec|0|6){_END}", _SHUTDOWN
    ),
    _refusal(rf"{_CMD}mkfs(?:\.\w+)?{_END}", "formats a filesystem"),
    _refusal(
        rf"{_CMD}dd\s{_ARGS}\bof=/dev/(?!(?:null|zero|stdout|stderr|tty|fd/)\b)",
        "writes raw data to a device",
    ),
    _refusal(rf">\s*{_BLOCK_DEVICE}", "writes raw data to a block device"),
    _refusal(
        rf"{_CMD}(?:chmod|chown|chgrp)(?={_ARGS}\s(?:-\w*R|--recursive))"
        rf"{_ARGS}\s{_DANGEROUS_TARGET}",
        "changes permissions or ownership of the whole system or home directory",
    ),
    _refusal(
        r"(?P<name>[\w:]+)\s*\(\)\s*\{[^}]*(?P=name)\s*\|\s*(?P=name)\s*&",
        "is a fork bomb",
    ),
)


def refusal_reason(command: str) -> str | None:
    """Why `command` is refused, or None when the guard lets it run."""
    for refusal in REFUSED:
        if refusal.pattern.search(command):
            return refusal.reason
    return None


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


def _environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name not in HIDDEN_ENV}


def run_command(command: str, workspace: os.PathLike[str] | str, timeout: float) -> str:
    """Run `command` with `bash -c` in `workspace`; the merged output and a final status line.

    The status line is `[exit code: N]`. On timeout the whole process group is killed and
    ToolError is raised with the partial output. Processes the command leaves in the background
    are killed when it ends, so none outlives it (`setsid` escapes this). A KeyboardInterrupt
    kills the process group, then propagates.
    """
    reason = refusal_reason(command)
    if reason is not None:
        raise ToolError(f"bash: refused to run this command: it {reason}. Nothing was run.")
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=_environment(),
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
        _kill_group(process)
        process.wait()
    reader.join(_DRAIN_GRACE)
    output = buffer.text() or "(no output)"
    if reader.is_alive():
        output += "\n[output may be incomplete: a detached process still holds the output pipe]"
    if timed_out:
        killed = f"timed out after {timeout:g} s and was killed, with every process it started"
        raise ToolError(f"{output}\n[{killed}]")
    return f"{output}\n[exit code: {process.returncode}]"


def _run(tool_input: dict[str, Any], ctx: ToolContext) -> str:
    command = tool_input["command"]
    if not command.strip():
        raise ToolError("bash: command is empty")
    if not ctx.workspace.is_dir():
        raise ToolError(f"bash: the workspace {ctx.workspace} is not a directory")
    return run_command(command, ctx.workspace, _timeout(tool_input, ctx))


BASH = Tool(
    name="bash",
    description=(
        "Run a bash command in the workspace directory and return its combined stdout and stderr, "
        "ending with the exit code. Each call is a fresh shell: `cd` and variables do not carry "
        "over. There is no stdin; commands must not wait for input. Output beyond 50,000 "
        "characters keeps only its head and tail. Background processes are killed when the "
        "command ends. Clearly destructive commands (sudo, rm -rf /, shutdown, mkfs, ...) are "
        "refused. Prefer read_file, write_file and edit_file for files."
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
