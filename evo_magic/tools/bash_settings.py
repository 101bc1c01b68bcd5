"""The settings of the bash tool's environment and bounds, in one frozen, validated value.

`BashSettings` says which environment variables a command gets (by name pattern, the rule
Codex ships as `shell_environment_policy`), whether the sandbox has a network, and the bounds a
runaway command cannot exceed: the size of its temporary file systems, its memory (address
space), its processes and the size of a file it writes. A bound of None is no bound.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Literal

MiB = 1 << 20
GiB = 1 << 30

NetworkMode = Literal["on", "off"]
NETWORK_MODES: tuple[NetworkMode, ...] = ("on", "off")
DEFAULT_ENV_DROP = ("*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*CREDENTIAL*")
"""Names of environment variables a command does not get (case-insensitive patterns)."""
SOCKET_ENV_VARS = (
    "SSH_AUTH_SOCK",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
)
"""Variables that point at the host's sockets (hidden in the sandbox): never passed on."""


@dataclass(frozen=True)
class BashSettings:
    """What a bash command gets and how far it may go (`docs/security.md`, "The bash sandbox")."""

    env_keep: tuple[str, ...] = ()
    """Name patterns of variables passed on even when they match `env_drop`."""
    env_drop: tuple[str, ...] = DEFAULT_ENV_DROP
    """Name patterns of variables not passed on (case-insensitive, `*` and `?` wildcards)."""
    network: NetworkMode = "on"
    """"off": the sandbox has its own network namespace with only loopback (pip, git clone and
    any download stop working)."""
    tmp_size: int | None = 512 * MiB
    """Bytes each of the sandbox's /tmp, /var/tmp and /dev/shm may hold."""
    memory: int | None = 4 * GiB
    """Bytes of address space each process of a command may map, and of memory all its
    processes may hold together where a memory cgroup can be made."""
    processes: int | None = 512
    """Processes a command may have at once (a pids cgroup where one can be created)."""
    file_size: int | None = 4 * GiB
    """Bytes of the largest file a command may write."""

    def __post_init__(self) -> None:
        for name in ("env_keep", "env_drop"):
            object.__setattr__(self, name, _patterns(name, getattr(self, name)))
        if self.network not in NETWORK_MODES:
            raise ValueError(f"sandbox_network must be 'on' or 'off', got {self.network!r}")
        for name, least in (("tmp_size", MiB), ("memory", 64 * MiB), ("processes", 8)):
            _check_bound(name, getattr(self, name), least)
        _check_bound("file_size", self.file_size, 1)

    def keeps(self, name: str) -> bool:
        """Whether the environment variable `name` is passed on by name (a known credential's
        value is dropped whatever its name)."""
        if name in SOCKET_ENV_VARS:
            return False
        upper = name.upper()
        dropped = any(fnmatch.fnmatchcase(upper, p.upper()) for p in self.env_drop)
        return not dropped or any(fnmatch.fnmatchcase(upper, p.upper()) for p in self.env_keep)


def _patterns(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not all(
        isinstance(p, str) and p.strip() for p in value
    ):
        raise ValueError(f"{name} must be a list of name patterns (strings), got {value!r}")
    return tuple(value)


def _check_bound(name: str, value: object, least: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be None (no bound) or an integer >= {least}, got {value!r}")
