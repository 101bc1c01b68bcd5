"""The sandbox every bash command runs in: bubblewrap (`bwrap`), the tool Flatpak is built on.

Inside, a command sees the machine's files read-only, the workspace read-write, a private /tmp
and /var/tmp, a /proc of its own PID namespace (the notebook kernel and every other process are
invisible: no /proc/<pid>/environ, no /proc/<pid>/mem, no ptrace target, no signal target), no
capabilities even when evo_magic runs as root, and neither the Jupyter runtime directory (kernel
connection files hold the key that lets a client run code in the kernel) nor the IPython
directory (its history may hold a key typed into a cell). When the kernel goes, the sandbox goes.
The network is shared: `pip install` and `git clone` work.

A setting (`ToolContext.sandbox`) says what to do where bwrap is missing or cannot create its
namespaces: "require" refuses to run bash, "warn" runs unsandboxed and says so, "off" never
sandboxes. `sandbox_status()` tells a front end whether the sandbox is available and why not;
`describe_sandbox(mode)` says in one line where bash runs under a setting.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SandboxMode = Literal["require", "warn", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("require", "warn", "off")
DEFAULT_SANDBOX: SandboxMode = "warn"
"""Sandbox where possible, run unsandboxed with a plain warning elsewhere (see the README)."""

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)
_PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class SandboxStatus:
    """Whether bash commands can run in the sandbox on this machine, and if not, why not."""

    available: bool
    reason: str = ""
    """Why the sandbox is not available ("" when it is)."""
    bwrap: str | None = None
    """The bwrap executable found on PATH."""

    def describe(self) -> str:
        """One line for a status display."""
        if self.available:
            return f"sandboxed: bash commands run in bubblewrap ({self.bwrap})"
        return f"not sandboxed: {self.reason}"


def check_mode(mode: str) -> SandboxMode:
    """`mode` when it is one of SANDBOX_MODES; ValueError naming the valid ones otherwise."""
    if mode not in SANDBOX_MODES:
        valid = ", ".join(repr(name) for name in SANDBOX_MODES)
        raise ValueError(f"sandbox must be one of {valid}, got {mode!r}")
    return mode  # type: ignore[return-value]


_probed: dict[str, SandboxStatus] = {}
_probe_lock = threading.Lock()


def sandbox_status(*, refresh: bool = False) -> SandboxStatus:
    """Whether bubblewrap is on PATH and can create its namespaces here.

    The first call for a given bwrap runs it once (a few milliseconds); later calls return the
    remembered answer unless `refresh`. A different PATH is looked up afresh.
    """
    if not sys.platform.startswith("linux"):
        return SandboxStatus(False, f"bubblewrap runs only on Linux, not {sys.platform}")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxStatus(False, f"bwrap was not found on PATH; {INSTALL_HINT}")
    with _probe_lock:
        if refresh or bwrap not in _probed:
            _probed[bwrap] = _probe(bwrap)
        return _probed[bwrap]


def _probe(bwrap: str) -> SandboxStatus:
    """Run `true` under the same confinement a command gets."""
    argv = [bwrap, *_confinement(Path("/"), hide=[]), "--", "true"]
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return SandboxStatus(False, f"{bwrap} could not be run ({error})", bwrap)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        detail = said[-1] if said else f"exit code {done.returncode}"
        return SandboxStatus(
            False,
            f"{bwrap} cannot create its namespaces here ({detail}); user namespaces may be "
            "disabled or blocked (container, AppArmor or seccomp policy)",
            bwrap,
        )
    return SandboxStatus(True, "", bwrap)


def _confinement(workspace: Path, hide: list[Path], read_only: Sequence[Path] = ()) -> list[str]:
    """bwrap's options: what the command sees and shares. Order matters: later mounts win."""
    options = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    options += ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    if workspace != Path("/"):
        options += ["--bind", str(workspace), str(workspace)]
    for directory in read_only:
        options += ["--ro-bind", str(directory), str(directory)]
    for directory in hide:
        options += ["--tmpfs", str(directory)]
    options += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    # --cap-drop ALL: run by root, bwrap would otherwise keep every capability, and a command
    # could remount / read-write. --die-with-parent: the sandbox ends with the kernel.
    options += ["--cap-drop", "ALL", "--die-with-parent", "--chdir", str(workspace)]
    return options


def _private_directories() -> list[Path]:
    """Directories of the notebook's own that a command must not read: the Jupyter runtime
    directory (kernel connection files and server tokens) and the IPython directory (history)."""
    home = Path.home()
    data = os.environ.get("JUPYTER_DATA_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or home / ".local" / "share", "jupyter"
    )
    runtime = os.environ.get("JUPYTER_RUNTIME_DIR") or os.path.join(data, "runtime")
    ipython = os.environ.get("IPYTHONDIR") or home / ".ipython"
    return [Path(runtime), Path(ipython)]


def sandboxed_argv(
    bwrap: str, workspace: Path, argv: list[str], read_only: tuple[Path, ...] = ()
) -> list[str]:
    """The command line that runs `argv` inside the sandbox, `workspace` writable but for the
    `read_only` directories in it (those that exist).

    A private directory is hidden only when it exists and does not contain the workspace
    (hiding it would hide the workspace too).
    """
    root = workspace.resolve()
    hide = []
    for directory in _private_directories():
        resolved = directory.resolve()
        if resolved.is_dir() and not root.is_relative_to(resolved):
            hide.append(resolved)
    protected = [p.resolve() for p in read_only if p.is_dir()]
    return [bwrap, *_confinement(root, hide, protected), "--", *argv]


def describe_sandbox(mode: str) -> str:
    """One line saying where bash commands run under setting `mode`, for a status display."""
    if check_mode(mode) == "off":
        return "bash runs unsandboxed (sandbox setting 'off')"
    status = sandbox_status()
    if status.available:
        return f"bash runs in the bubblewrap sandbox ({status.bwrap})"
    if mode == "require":
        return f"bash is disabled: the sandbox is required but not available ({status.reason})"
    return f"bash runs WITHOUT a sandbox: {status.reason}"
