"""The sandbox every bash command runs in: bubblewrap (`bwrap`), the tool Flatpak is built on.

Inside, a command sees the machine's files read-only, the workspace read-write, a private /tmp
and /var/tmp, a /proc of its own PID namespace (the notebook kernel and every other process are
invisible: no /proc/<pid>/environ, no /proc/<pid>/mem, no ptrace target, no signal target), no
capabilities even when evo_magic runs as root, and neither the Jupyter runtime directory (kernel
connection files hold the key that lets a client run code in the kernel) nor the IPython
directory (its history may hold a key typed into a cell), nor the host's sockets (ssh-agent,
D-Bus, docker, `$XDG_RUNTIME_DIR`), nor a workspace file that holds a known credential (a
notebook, `.env`, a shell history) or any `.ipynb_checkpoints` directory. Its /tmp, /var/tmp and
/dev/shm are RAM disks of a bounded size, and the rest of /dev is read-only. When the kernel goes,
the sandbox goes. The network is shared (`pip install` and `git clone` work) unless the
`network` setting is "off": then the command has its own network namespace with loopback only.

A setting (`ToolContext.sandbox`) says what to do where bwrap is missing or cannot create its
namespaces: "require" refuses to run bash, "warn" runs unsandboxed and says so, "off" never
sandboxes. `sandbox_status()` tells a front end whether the sandbox is available and why not;
`describe_sandbox(mode)` says in one line where bash runs under a setting.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evo_magic.tools.bash_settings import BashSettings

SandboxMode = Literal["require", "warn", "off"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("require", "warn", "off")
DEFAULT_SANDBOX: SandboxMode = "warn"
"""Sandbox where possible, run unsandboxed with a plain warning elsewhere (`docs/security.md`)."""

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
    sizes_tmpfs: bool = True
    """Whether this bwrap can bound the size of a RAM disk (`--size`, bubblewrap 0.6 and later)."""

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
    """Run `true` under the same confinement a command gets (without RAM disk sizes where
    this bwrap is too old to set them)."""
    sizes = _sizes_tmpfs(bwrap)
    settings = BashSettings() if sizes else BashSettings(tmp_size=None)
    argv = [bwrap, *_confinement(Path("/"), hide=[], settings=settings), "--", "true"]
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
    return SandboxStatus(True, "", bwrap, sizes)


def _sizes_tmpfs(bwrap: str) -> bool:
    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=_PROBE_TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in done.stdout + done.stderr


def _confinement(
    workspace: Path,
    hide: list[Path],
    read_only: Sequence[Path] = (),
    settings: BashSettings | None = None,
    hide_files: Sequence[Path] = (),
) -> list[str]:
    """bwrap's options: what the command sees and shares. Order matters: later mounts win."""
    settings = settings or BashSettings()
    size = [] if settings.tmp_size is None else ["--size", str(settings.tmp_size)]
    options = ["--ro-bind", "/", "/", "--dev", "/dev", *size, "--tmpfs", "/dev/shm"]
    # /dev is a RAM disk bwrap makes: read-only, so nothing unbounded is written there.
    options += ["--remount-ro", "/dev", "--proc", "/proc"]
    options += [*size, "--tmpfs", "/tmp", *size, "--tmpfs", "/var/tmp"]
    if workspace != Path("/"):
        options += ["--bind", str(workspace), str(workspace)]
    for directory in read_only:
        options += ["--ro-bind", str(directory), str(directory)]
    for directory in hide:
        options += ["--tmpfs", str(directory), "--remount-ro", str(directory)]
    for path in hide_files:
        options += ["--ro-bind", "/dev/null", str(path)]
    options += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if settings.network == "off":
        options.append("--unshare-net")  # bwrap brings up loopback in the new namespace
    # --cap-drop ALL: run by root, bwrap would otherwise keep every capability, and a command
    # could remount / read-write. --die-with-parent: the sandbox ends with the kernel.
    options += ["--cap-drop", "ALL", "--die-with-parent", "--chdir", str(workspace)]
    return options


HOST_SOCKET_PLACES = (
    "/run/user",
    "/run/dbus",
    "/var/run/dbus",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
)
"""Where the host keeps sockets a command must not reach (a session bus, docker, an agent)."""


def host_sockets() -> list[Path]:
    """The host's socket places that exist, and those the environment points at
    (`XDG_RUNTIME_DIR`, `SSH_AUTH_SOCK`, a D-Bus or docker `unix:` address), resolved."""
    places = [Path(place) for place in HOST_SOCKET_PLACES]
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        places.append(Path(runtime))
    if agent := os.environ.get("SSH_AUTH_SOCK"):
        places.append(Path(agent))
    for name in ("DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "DOCKER_HOST"):
        places += [Path(p) for p in _unix_paths(os.environ.get(name, ""))]
    found: list[Path] = []
    for place in places:
        with contextlib.suppress(OSError, RuntimeError):
            resolved = place.resolve(strict=True)
            if resolved not in found and resolved != Path("/"):
                found.append(resolved)
    return found


def _unix_paths(address: str) -> list[str]:
    """The socket paths in a D-Bus address (`unix:path=...;...`) or `unix://...` URL."""
    if address.startswith("unix://"):
        return [address[len("unix://") :]]
    paths = []
    for part in address.split(";"):
        if part.startswith("unix:"):
            for item in part[len("unix:") :].split(","):
                key, _, value = item.partition("=")
                if key == "path" and value:
                    paths.append(value)
    return paths


CREDENTIAL_FILE_NAMES = frozenset(
    {
        ".env",
        ".bash_history",
        ".zsh_history",
        ".sh_history",
        ".history",
        ".python_history",
        ".psql_history",
        ".mysql_history",
        ".sqlite_history",
        ".node_repl_history",
        "history.sqlite",
    }
)
"""Workspace files hidden from a command when they hold a known credential (also `*.ipynb`,
`.env.*` and `*.env`)."""
CHECKPOINTS = ".ipynb_checkpoints"
_SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".hg"})
_SCAN_DEPTH = 6
_SCAN_ENTRIES = 10_000
_READ_LIMIT = 64 << 20


@dataclass(frozen=True)
class Hidden:
    """What of the workspace a command does not see: files (read as empty) and directories."""

    files: tuple[Path, ...] = ()
    directories: tuple[Path, ...] = ()


def workspace_secrets(workspace: Path, secret_values: Sequence[str]) -> Hidden:
    """The workspace's notebooks, `.env` files and shell histories that hold a credential, and
    every `.ipynb_checkpoints` directory (a notebook's older copies), found by a bounded walk
    (`_SCAN_DEPTH` levels, `_SCAN_ENTRIES` entries, skipping `.git`, `node_modules`, ...).
    Symbolic links are not followed."""
    files: list[Path] = []
    directories: list[Path] = []
    seen = 0
    stack = [(str(workspace), 0)]
    while stack and seen < _SCAN_ENTRIES:
        directory, depth = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                if name == CHECKPOINTS:
                    directories.append(Path(entry.path))
                elif name not in _SKIP_DIRS and depth + 1 < _SCAN_DEPTH:
                    stack.append((entry.path, depth + 1))
            elif (
                secret_values
                and _may_hold_credentials(name)
                and entry.is_file(follow_symlinks=False)
                and _holds(entry.path, secret_values)
            ):
                files.append(Path(entry.path))
    return Hidden(tuple(sorted(files)), tuple(sorted(directories)))


def _may_hold_credentials(name: str) -> bool:
    return (
        name in CREDENTIAL_FILE_NAMES
        or name.endswith((".ipynb", ".env"))
        or name.startswith(".env.")
    )


def _holds(path: str, secret_values: Sequence[str]) -> bool:
    """Whether the file holds a credential as written (or JSON-escaped, as a notebook holds
    it): a plain byte search, fast on a notebook of many megabytes."""
    needles = [value.encode("utf-8") for value in secret_values]
    try:
        with open(path, "rb") as file:
            data = file.read(_READ_LIMIT)
    except OSError:
        return False
    return any(needle in data for needle in needles)


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
    bwrap: str,
    workspace: Path,
    argv: list[str],
    read_only: tuple[Path, ...] = (),
    settings: BashSettings | None = None,
    hidden: Hidden = Hidden(),
) -> list[str]:
    """The command line that runs `argv` inside the sandbox, `workspace` writable but for the
    `read_only` directories in it (those that exist), without the `hidden` workspace files and
    the host's sockets.

    A private directory is hidden only when it exists and does not contain the workspace
    (hiding it would hide the workspace too).
    """
    root = workspace.resolve()
    directories = [d.resolve() for d in [*_private_directories(), *hidden.directories]]
    files = list(hidden.files)
    for place in host_sockets():
        (directories if place.is_dir() else files).append(place)
    hide: list[Path] = []
    # Outermost first; nothing inside a hidden directory (already gone) or a private /tmp.
    for directory in sorted(set(directories), key=lambda d: len(d.parts)):
        inside = root.is_relative_to(directory)
        if directory.is_dir() and not inside and _visible(directory, hide, root):
            hide.append(directory)
    shown_files = [f for f in dict.fromkeys(files) if _visible(f, hide, root) and f != root]
    protected = [p.resolve() for p in read_only if p.is_dir()]
    options = _confinement(root, hide, protected, settings, shown_files)
    return [bwrap, *options, "--", *argv]


def _visible(path: Path, hidden: list[Path], workspace: Path) -> bool:
    """Whether `path` is still seen in the sandbox: not under a hidden directory, nor (outside
    the workspace) under a private temporary one."""
    private = () if path.is_relative_to(workspace) else _PRIVATE
    return not any(path.is_relative_to(d) for d in (*hidden, *private))


_PRIVATE = (Path("/tmp"), Path("/var/tmp"), Path("/dev"), Path("/proc"))


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
