"""The bash sandbox against an agent that goes looking for the key: real kernels (a Python process
started with the key in its environment, as a notebook kernel is), real bubblewrap, real /proc.

The tests that need bubblewrap skip, saying why, where it is missing or cannot create its
namespaces; CI installs it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.sandbox import sandbox_here

from evo_magic.tools import ToolContext, default_tools, run_tool
from evo_magic.tools.bash import command_environment
from evo_magic.tools.bash_settings import DEFAULT_ENV_DROP, BashSettings
from evo_magic.tools.cgroups import CommandCgroup, make_command_cgroup
from evo_magic.tools.sandbox import (
    DEFAULT_SANDBOX,
    SANDBOX_MODES,
    describe_sandbox,
    sandbox_status,
)

STATUS = sandbox_status()
needs_sandbox = pytest.mark.skipif(
    not STATUS.available, reason=f"the bubblewrap sandbox is not available: {STATUS.reason}"
)

# A notebook kernel: a process whose environment (from its start) holds the key, running one
# bash tool call and printing the result as JSON.
KERNEL = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from evo_magic.tools import ToolContext, default_tools, run_tool
    command, workspace, sandbox = sys.argv[1:4]
    Path(workspace, "kernel.pid").write_text(str(os.getpid()))
    ctx = ToolContext(workspace=Path(workspace), sandbox=sandbox, bash_timeout=60)
    result = run_tool(default_tools(), "toolu_1", "bash", {"command": command}, ctx)
    print(json.dumps({"content": result.content, "is_error": result.is_error}))
    """
)

# What an agent runs to find the key: every environ it can see, the kernel's by its real pid,
# and the memory of its parent and of the kernel.
HUNT = textwrap.dedent(
    """
    tr '\\0' '\\n' < /proc/$PPID/environ
    cat /proc/*/environ | tr '\\0' '\\n'
    tr '\\0' '\\n' < /proc/1/environ
    tr '\\0' '\\n' < /proc/{kernel}/environ
    env
    python3 - $PPID {kernel} <<'PY'
    import re, sys
    for pid in sys.argv[1:]:
        try:
            maps = open(f"/proc/{{pid}}/maps").read().splitlines()
            mem = open(f"/proc/{{pid}}/mem", "rb", 0)
        except OSError as error:
            print("no access to", pid, error)
            continue
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms:
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            for found in set(re.findall(rb"sk-ant-test-[0-9a-f]{{32}}", chunk)):
                print("found in memory of", pid, found.decode())
    PY
    echo hunt-done
    """
)


def new_key() -> str:
    return f"sk-ant-test-{secrets.token_hex(16)}"


def run_kernel(command: str, workspace: Path, sandbox: str, key: str) -> dict:
    env = {**os.environ, "ANTHROPIC_API_KEY": key, "ANTHROPIC_AUTH_TOKEN": key + "-token"}
    done = subprocess.run(
        [sys.executable, "-c", KERNEL, command, str(workspace), sandbox],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_sandbox
def test_the_agent_cannot_read_the_kernels_environment_or_memory(empty_workspace: Path) -> None:
    key = new_key()
    result = run_kernel(HUNT.format(kernel="$(cat kernel.pid)"), empty_workspace, "require", key)
    assert "hunt-done" in result["content"], result["content"]
    assert "sk-ant-test-" not in result["content"]


def test_the_hunt_finds_the_key_without_the_sandbox(empty_workspace: Path) -> None:
    # The same hunt, unsandboxed, finds the key (in /proc/$PPID/environ at least): the hunt
    # above would see it if the sandbox let it.
    key = new_key()
    result = run_kernel(HUNT.format(kernel="$(cat kernel.pid)"), empty_workspace, "off", key)
    assert key in result["content"]


@needs_sandbox
def test_commands_write_only_the_workspace(empty_workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    probe = f"evo_magic_sandbox_probe_{secrets.token_hex(4)}"
    system_file = Path("/usr") / probe
    home_file = Path.home() / probe
    command = (
        f"echo pwned > {outside}/secret.txt; cat {outside}/secret.txt; "
        f"touch {system_file}; touch {home_file}; mount -o remount,rw / ; "
        "echo inside > inside.txt; echo tmp > /tmp/t && cat /tmp/t"
    )
    try:
        result = run_kernel(command, empty_workspace, "require", new_key())
        assert not system_file.exists() and not home_file.exists()
    finally:
        system_file.unlink(missing_ok=True)
        home_file.unlink(missing_ok=True)
    text = result["content"]
    assert (outside / "secret.txt").read_text() == "secret\n"  # /tmp is private
    assert "Read-only file system" in text
    assert (empty_workspace / "inside.txt").read_text() == "inside\n"
    assert "\ntmp\n" in text


@needs_sandbox
def test_the_jupyter_runtime_directory_is_hidden(
    empty_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kernel connection files hold the key that lets a client run code in the kernel. The test
    # directory is under the home directory because /tmp is private in the sandbox anyway.
    runtime = Path.home() / f".evo_magic_test_runtime_{secrets.token_hex(4)}"
    runtime.mkdir()
    try:
        (runtime / "kernel-1.json").write_text('{"key": "connection-secret"}')
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
        ctx = ToolContext(workspace=empty_workspace, sandbox="require")
        result = run_tool(default_tools(), "t", "bash", {"command": f"cat {runtime}/*"}, ctx)
    finally:
        shutil.rmtree(runtime)
    assert "connection-secret" not in result.content


@needs_sandbox
def test_the_sandbox_kills_processes_that_leave_the_group(empty_workspace: Path) -> None:
    marker = f"sleep 1000.{secrets.randbelow(10**9):09d}"
    ctx = ToolContext(workspace=empty_workspace, sandbox="require")
    command = f"setsid {marker} > /dev/null 2>&1 & sleep 0.3; echo started"
    result = run_tool(default_tools(), "t", "bash", {"command": command}, ctx)
    assert "started" in result.content
    deadline = time.monotonic() + 3
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _running(marker) == []


def _running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if cmdline.startswith(marker) and state != "Z":
            found.append(int(entry.name))
    return found


@needs_sandbox
def test_a_signal_death_reads_the_same_sandboxed_or_not(empty_workspace: Path) -> None:
    for mode in ("require", "off"):
        ctx = ToolContext(workspace=empty_workspace, sandbox=mode)
        result = run_tool(default_tools(), "t", "bash", {"command": "kill -9 $$"}, ctx)
        assert result.content.endswith("[exit code: 137]"), (mode, result.content)


@needs_sandbox
def test_status_when_available() -> None:
    assert STATUS.bwrap and STATUS.reason == ""
    assert "bubblewrap" in describe_sandbox("warn") and "WITHOUT" not in describe_sandbox("warn")
    assert describe_sandbox("off").startswith("bash runs unsandboxed")


# Where the sandbox is unavailable


@pytest.fixture
def bin_without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH holding bash and nothing else."""
    directory = tmp_path / "bin"
    directory.mkdir()
    bash = shutil.which("bash")
    assert bash is not None
    (directory / "bash").symlink_to(bash)
    monkeypatch.setenv("PATH", str(directory))
    return directory


@pytest.fixture
def broken_bwrap(bin_without_bwrap: Path) -> Path:
    """A bwrap that fails as it does where user namespaces are not allowed."""
    fake = bin_without_bwrap / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    return fake


def bash(ctx: ToolContext, command: str) -> tuple[str, bool]:
    result = run_tool(default_tools(), "t", "bash", {"command": command}, ctx)
    return result.content, result.is_error


@pytest.mark.usefixtures("bin_without_bwrap")
def test_require_refuses_to_run_without_bwrap(empty_workspace: Path) -> None:
    status = sandbox_status()
    assert not status.available and "bwrap was not found on PATH" in status.reason
    ctx = ToolContext(workspace=empty_workspace, sandbox="require")
    text, is_error = bash(ctx, "echo ran > marker")
    assert is_error and "the sandbox is required but not available" in text
    assert "Nothing was run" in text and "apt-get install bubblewrap" in text
    assert not (empty_workspace / "marker").exists()
    assert describe_sandbox("require").startswith("bash is disabled")


@pytest.mark.usefixtures("bin_without_bwrap")
def test_warn_runs_unsandboxed_and_says_so_once(empty_workspace: Path) -> None:
    ctx = ToolContext(workspace=empty_workspace, sandbox="warn")
    first, is_error = bash(ctx, "echo ran > marker; echo one")
    assert not is_error and (empty_workspace / "marker").exists()
    assert first.startswith("[warning: bash runs WITHOUT a sandbox: bwrap was not found on PATH")
    assert "read the notebook kernel's memory and environment" in first
    assert first.endswith("one\n\n[exit code: 0]")
    second, _ = bash(ctx, "echo two")
    assert second == "two\n\n[exit code: 0]"  # once per session (the context's notices)
    assert describe_sandbox("warn").startswith("bash runs WITHOUT a sandbox")


@pytest.mark.usefixtures("bin_without_bwrap")
def test_off_runs_unsandboxed_silently(empty_workspace: Path) -> None:
    ctx = ToolContext(workspace=empty_workspace, sandbox="off")
    assert bash(ctx, "echo ran") == ("ran\n\n[exit code: 0]", False)


def test_a_bwrap_that_cannot_create_namespaces(empty_workspace: Path, broken_bwrap: Path) -> None:
    status = sandbox_status()
    assert not status.available and status.bwrap == str(broken_bwrap)
    assert "cannot create its namespaces here" in status.reason
    assert "non-privileged user namespaces" in status.reason
    text, is_error = bash(ToolContext(workspace=empty_workspace, sandbox="require"), "echo ran")
    assert is_error and "cannot create its namespaces" in text
    text, is_error = bash(ToolContext(workspace=empty_workspace, sandbox="warn"), "echo ran")
    assert not is_error and text.startswith("[warning: bash runs WITHOUT a sandbox")
    assert text.endswith("ran\n\n[exit code: 0]")


def test_the_setting_is_checked(empty_workspace: Path) -> None:
    assert DEFAULT_SANDBOX == "warn" and SANDBOX_MODES == ("require", "warn", "off")
    assert ToolContext(workspace=empty_workspace).sandbox == "warn"
    with pytest.raises(ValueError, match="sandbox must be one of 'require', 'warn', 'off'"):
        ToolContext(workspace=empty_workspace, sandbox="strict")  # type: ignore[arg-type]


def test_the_environment_holds_no_known_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    key = new_key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    monkeypatch.setenv("COPIED_KEY", f"Bearer {key}")
    monkeypatch.setenv("EVO_VISIBLE", "yes")
    env = command_environment()
    assert "ANTHROPIC_API_KEY" not in env and "COPIED_KEY" not in env
    assert env["EVO_VISIBLE"] == "yes"


# What a command gets: its environment (by name), the host's sockets, the network


def env_of(ctx: ToolContext) -> str:
    text, is_error = bash(ctx, "env")
    assert not is_error, text
    return text


@pytest.mark.parametrize("mode", ["require", "off"])
def test_variables_named_like_credentials_do_not_reach_bash(
    empty_workspace: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    if mode == "require" and not STATUS.available:
        pytest.skip(STATUS.reason)
    password = "pw-" + secrets.token_hex(8)
    named = {
        "AWS_SECRET_ACCESS_KEY": "aws-" + secrets.token_hex(8),
        "OPENAI_API_KEY": "sk-" + secrets.token_hex(8),
        "GITHUB_TOKEN": "ghp_" + secrets.token_hex(8),
        "HF_TOKEN": "hf_" + secrets.token_hex(8),
        "PGPASSWORD": "pg-" + secrets.token_hex(8),
        "gcloud_credential_file": "/secret/" + secrets.token_hex(8),
    }
    for name, value in named.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("EVO_VISIBLE", "yes")
    # A proxy password in the base URL is a credential: the variable does not reach bash.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://proxyuser:{password}@127.0.0.1:9")
    shown = env_of(ToolContext(workspace=empty_workspace, sandbox=mode))
    assert "EVO_VISIBLE=yes" in shown
    assert not [name for name in named if name in shown]
    assert not [value for value in named.values() if value in shown]
    assert password not in shown and "ANTHROPIC_BASE_URL" not in shown

    # The setting changes it: keep HF_TOKEN, drop EVO_*; a known credential stays out anyway.
    monkeypatch.setenv("ANTHROPIC_API_KEY", new_key())
    settings = BashSettings(
        env_keep=("hf_token", "ANTHROPIC_*"), env_drop=(*DEFAULT_ENV_DROP, "EVO_*")
    )
    shown = env_of(ToolContext(workspace=empty_workspace, sandbox=mode, bash=settings))
    assert f"HF_TOKEN={named['HF_TOKEN']}" in shown
    assert "EVO_VISIBLE" not in shown and "GITHUB_TOKEN" not in shown
    assert "ANTHROPIC_API_KEY" not in shown and password not in shown


def test_the_settings_are_checked() -> None:
    assert BashSettings().env_drop == DEFAULT_ENV_DROP
    assert BashSettings(env_keep="HF_*").env_keep == ("HF_*",)
    with pytest.raises(ValueError, match="sandbox_network must be 'on' or 'off'"):
        BashSettings(network="none")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="processes must be None"):
        BashSettings(processes=0)
    with pytest.raises(ValueError, match="tmp_size must be None"):
        BashSettings(tmp_size=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="env_drop must be a list of name patterns"):
        BashSettings(env_drop=("", "X"))
    with pytest.raises(TypeError, match="bash must be a BashSettings"):
        ToolContext(workspace=Path("."), bash={"network": "off"})  # type: ignore[arg-type]


class SocketServer:
    """A Unix socket that answers every connection with a word, as an agent or a bus would."""

    def __init__(self, path: Path, word: bytes) -> None:
        import socket
        import threading

        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        self.word = word
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            with connection:
                connection.sendall(self.word)

    def close(self) -> None:
        self.server.close()


CONNECT = (
    "python3 -c 'import socket, sys\n"
    "for path in sys.argv[1:]:\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    try:\n"
    "        s.connect(path); print(path, s.recv(20).decode())\n"
    "    except OSError as e:\n"
    '        print(path, "unreachable:", e.strerror)\' '
)


@pytest.fixture
def host_sockets(monkeypatch: pytest.MonkeyPatch):
    """An ssh-agent socket and a runtime directory holding a session bus, outside the workspace
    (under the home directory: /tmp is private in the sandbox anyway)."""
    root = Path.home() / f".evo_magic_test_sockets_{secrets.token_hex(4)}"
    (root / "ssh").mkdir(parents=True)
    (root / "runtime").mkdir()
    agent, bus = root / "ssh" / "agent.sock", root / "runtime" / "bus"
    servers = [SocketServer(agent, b"agent-here"), SocketServer(bus, b"bus-here")]
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(root / "runtime"))
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", f"unix:path={bus},guid=0")
    try:
        yield agent, bus
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(root)


@needs_sandbox
def test_the_hosts_sockets_are_hidden(
    empty_workspace: Path, host_sockets: tuple[Path, Path]
) -> None:
    agent, bus = host_sockets
    command = CONNECT + f"{agent} {bus}; env | grep -E 'SSH_AUTH|DBUS|XDG_RUNTIME' ; echo done"
    text, _ = bash(ToolContext(workspace=empty_workspace, sandbox="require"), command)
    assert "done" in text and f"{agent} unreachable" in text and f"{bus} unreachable" in text
    assert "agent-here" not in text and "bus-here" not in text
    assert "SSH_AUTH_SOCK" not in text and "DBUS_SESSION" not in text and "XDG_RUNTIME" not in text
    # The control: unsandboxed, the same command reaches both (the variables are unset all
    # the same: they are never passed on).
    text, _ = bash(ToolContext(workspace=empty_workspace, sandbox="off"), command)
    assert "agent-here" in text and "bus-here" in text and "SSH_AUTH_SOCK" not in text


@pytest.fixture
def loopback_server():
    """A TCP server on 127.0.0.1 in the kernel's network namespace; yields its port."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                connection.sendall(b"host-service")

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


@needs_sandbox
def test_the_network_can_be_cut(empty_workspace: Path, loopback_server: int) -> None:
    command = (
        "python3 -c 'import socket, sys\n"
        "try:\n"
        '    print(socket.create_connection(("127.0.0.1", int(sys.argv[1])), 3).recv(20))\n'
        "except OSError as e:\n"
        '    print("no host:", e.strerror)\n'
        'own = socket.create_server(("127.0.0.1", 0))\n'
        'socket.create_connection(own.getsockname()).sendall(b"x")\n'
        f'print("own loopback:", own.accept()[0].recv(1))\' {loopback_server}'
    )
    on, _ = bash(ToolContext(workspace=empty_workspace, sandbox="require"), command)
    assert "host-service" in on
    off = BashSettings(network="off")
    ctx = ToolContext(workspace=empty_workspace, sandbox="require", bash=off)
    text, _ = bash(ctx, command)
    assert text.startswith("[notice: commands have no network (sandbox_network is 'off')")
    assert "pip install, git clone and downloads fail" in text
    assert "host-service" not in text and "no host: Connection refused" in text
    assert "own loopback: b'x'" in text  # loopback works inside
    text, _ = bash(ctx, "tail -n +3 /proc/net/dev | cut -d: -f1")  # said once only
    assert text.split() == ["lo", "[exit", "code:", "0]"]  # one interface: loopback


# What a command sees of the workspace


@needs_sandbox
def test_workspace_files_holding_a_key_are_hidden_with_a_notice_once(
    empty_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = new_key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    (empty_workspace / "analysis.ipynb").write_text(
        f'{{"source": ["%env ANTHROPIC_API_KEY={key}"]}}'
    )
    (empty_workspace / "clean.ipynb").write_text('{"source": ["print(1)"]}')
    (empty_workspace / "sub").mkdir()
    (empty_workspace / "sub" / ".env").write_text(f"KEY={key}\n")
    (empty_workspace / ".zsh_history").write_text(f"export ANTHROPIC_API_KEY={key}\n")
    (empty_workspace / "sub" / ".ipynb_checkpoints").mkdir()
    (empty_workspace / "sub" / ".ipynb_checkpoints" / "x-checkpoint.ipynb").write_text("{}")
    ctx = ToolContext(workspace=empty_workspace, sandbox="require")
    command = "cat analysis.ipynb sub/.env .zsh_history; ls sub/.ipynb_checkpoints; cat clean.ipynb"
    first, _ = bash(ctx, command)
    assert first.startswith(
        "[notice: hidden from bash (they hold or may hold a credential): .zsh_history, "
        "analysis.ipynb, sub/.env, sub/.ipynb_checkpoints/]\n"
    )
    assert key not in first and "[redacted]" not in first and "x-checkpoint" not in first
    assert '"print(1)"' in first  # a notebook without a credential is seen as it is
    second, _ = bash(ctx, command)
    assert not second.startswith("[notice") and key not in second
    assert (empty_workspace / "analysis.ipynb").read_text().count(
        key
    ) == 1  # the user's file is kept


# The bounds a command cannot exceed


@needs_sandbox
def test_a_fork_bomb_is_stopped_at_the_process_bound(empty_workspace: Path) -> None:
    bounded = BashSettings(processes=32)
    ctx = ToolContext(workspace=empty_workspace, sandbox="require", bash=bounded, bash_timeout=60)
    started = time.monotonic()
    bomb = "python3 -c 'import os\nwhile True:\n    os.fork()'"
    text, is_error = bash(ctx, bomb)
    assert time.monotonic() - started < 30  # stopped, not timed out
    if os.geteuid() == 0 and "not enforced" in text:
        pytest.fail(f"root without a pids cgroup: {text[:300]}")
    assert "[stopped: the command hit the process bound (32 processes at once" in text, text
    assert text.endswith("[exit code: 137]") and not is_error
    text, _ = bash(ctx, "for i in $(seq 100); do sleep 30 & done; wait")
    assert "hit the process bound" in text
    assert bash(ctx, "echo alive") == ("alive\n\n[exit code: 0]", False)
    # Each command's cgroup goes with it (a large tree's in the background, soon after).
    mine = f"evo_magic-{os.getpid()}-*"
    deadline = time.monotonic() + 10
    while list(Path("/sys/fs/cgroup").rglob(mine)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(Path("/sys/fs/cgroup").rglob(mine)) == []


def test_as_root_without_a_pids_cgroup_the_process_bound_is_not_enforced_and_said(
    empty_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What happens as root where no cgroup can be made: the per-user process limit does not
    apply to root, so the bound does not hold; bash says so once."""
    if os.geteuid() != 0:
        pytest.skip("as a user other than root, `ulimit -u` bounds the processes")
    from evo_magic.tools import cgroups

    monkeypatch.setattr(cgroups, "_CGROUP_MOUNT", Path("/nonexistent/cgroup"))
    ctx = ToolContext(
        workspace=empty_workspace, sandbox=sandbox_here(), bash=BashSettings(processes=16)
    )
    text, _ = bash(ctx, "for i in $(seq 40); do sleep 5 & done; jobs | wc -l")
    assert "[warning: the process bound is not enforced" in text
    assert "\n40\n" in text  # 40 processes ran beyond a bound of 16
    text, _ = bash(ctx, "echo again")
    assert text == "again\n\n[exit code: 0]"


def _cgroup_bounds(processes: int | None, memory: int | None) -> CommandCgroup | None:
    made = make_command_cgroup(processes, memory)
    if made is not None:
        made.remove()
    return made


def test_only_the_cgroup_decides_that_a_fork_was_refused(empty_workspace: Path) -> None:
    """A workspace file that says "fork: retry" must not make a command fail where a pids cgroup
    counts the command's forks (it would let any file stop any command)."""
    made = _cgroup_bounds(32, None)
    if made is None or not made.bounds_processes:
        pytest.skip("no pids cgroup can be made here: bash's words are the only sign there is")
    (empty_workspace / "log.txt").write_text(
        "bash: fork: retry: Resource temporarily unavailable\n"
        "bash: fork: Resource temporarily unavailable\n"
    )
    ctx = ToolContext(
        workspace=empty_workspace, sandbox=sandbox_here(), bash=BashSettings(processes=32)
    )
    text, is_error = bash(ctx, "cat log.txt; sleep 0.3; echo finished")
    assert "finished" in text and "hit the process bound" not in text, text
    assert text.endswith("[exit code: 0]") and not is_error


@pytest.mark.slow  # its processes hold memory for seconds on purpose
@pytest.mark.parametrize("mode", ["require", "off"])
def test_the_memory_bound_holds_for_all_processes_of_a_command(
    empty_workspace: Path, mode: str
) -> None:
    """Four processes of 100 MiB each under a 256 MiB bound: each alone is within the
    per-process bound, together they are not, and the kernel stops one of the command's own."""
    if mode == "require" and not STATUS.available:
        pytest.skip(STATUS.reason)
    made = _cgroup_bounds(None, 256 << 20)
    if made is None or not made.bounds_memory:
        pytest.skip("no memory cgroup can be made here: the bound holds per process only")
    ctx = ToolContext(workspace=empty_workspace, sandbox=mode, bash=BashSettings(memory=256 << 20))
    hold = (
        'python3 -c \'import time; b = b"x" * (100 << 20); '
        'print("held", flush=True); time.sleep(3)\''
    )
    text, _ = bash(ctx, f"for i in 1 2 3 4; do {hold} & sleep 0.5; done; wait")
    assert text.splitlines().count("done") < 4 and "Killed" in text, text
    assert "passed the memory bound (256 MiB in all its processes together" in text, text
    assert bash(ctx, "echo alive")[0].startswith("alive")


def test_where_no_memory_cgroup_can_be_made_the_per_process_bound_is_said_once(
    empty_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evo_magic.tools import cgroups

    monkeypatch.setattr(cgroups, "_CGROUP_MOUNT", Path("/nonexistent/cgroup"))
    ctx = ToolContext(workspace=empty_workspace, sandbox=sandbox_here(), bash=BashSettings())
    first, _ = bash(ctx, "echo one")
    assert "[note: the memory bound holds per process only" in first
    second, _ = bash(ctx, "echo two")
    assert "memory bound" not in second


@pytest.mark.parametrize("mode", ["require", "off"])
def test_a_memory_hog_hits_the_memory_bound(empty_workspace: Path, mode: str) -> None:
    if mode == "require" and not STATUS.available:
        pytest.skip(STATUS.reason)
    bounded = BashSettings(memory=128 << 20)
    ctx = ToolContext(workspace=empty_workspace, sandbox=mode, bash=bounded)
    text, _ = bash(ctx, "python3 -c 'b = bytearray(1 << 30); print(\"allocated\")'")
    assert "MemoryError" in text and "allocated" not in text
    assert "[the command hit the memory bound (128 MiB of address space per process" in text


@needs_sandbox
def test_files_and_ram_disks_are_bounded(empty_workspace: Path) -> None:
    bounded = BashSettings(tmp_size=4 << 20, file_size=2 << 20)
    ctx = ToolContext(workspace=empty_workspace, sandbox="require", bash=bounded)
    text, _ = bash(ctx, "head -c 5000000 /dev/zero > big; stat -c %s big")
    assert "\n2097152\n" in text
    assert "[stopped: the command hit the file size bound (2 MiB per file" in text
    # Each RAM disk holds 4 MiB at most; files of 1.5 MiB stay under the file size bound.
    fill = "for i in 1 2 3 4; do head -c 1500000 /dev/zero > {}/f$i || echo full-{}; done; "
    command = "".join(fill.format(d, d) for d in ("/tmp", "/var/tmp", "/dev/shm"))
    text, _ = bash(ctx, command + "echo x > /dev/extra")
    assert "full-/tmp" in text and "full-/var/tmp" in text and "full-/dev/shm" in text
    assert "No space left on device" in text and "setting sandbox_tmp_size" in text
    assert "/dev/extra: Read-only file system" in text


def test_without_a_usable_sandbox_the_bounds_degrade_and_say_so(
    empty_workspace: Path, broken_bwrap: Path
) -> None:
    (broken_bwrap.parent / "python3").symlink_to(sys.executable)
    ctx = ToolContext(
        workspace=empty_workspace, sandbox="warn", bash=BashSettings(memory=128 << 20)
    )
    text, _ = bash(ctx, "python3 -c 'b = bytearray(1 << 30)'")
    assert text.startswith("[warning: bash runs WITHOUT a sandbox")
    assert "/tmp is the host's, unbounded" in text
    assert "hit the memory bound" in text  # set by the command's shell, sandboxed or not
    off = BashSettings(network="off")
    text, _ = bash(ToolContext(workspace=empty_workspace, sandbox="warn", bash=off), "true")
    assert "The network cannot be cut" in text
    text, is_error = bash(
        ToolContext(workspace=empty_workspace, sandbox="require", bash=off), "true"
    )
    assert is_error and "Nothing was run" in text


@needs_sandbox
def test_a_bubblewrap_too_old_to_size_ram_disks_still_sandboxes_and_says_so(
    empty_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap before 0.6 has no `--size`: the sandbox still runs, without that bound."""
    directory = tmp_path / "old-bwrap"
    directory.mkdir()
    old = directory / "bwrap"
    old.write_text(
        "#!/bin/sh\n"
        '[ "$1" = --help ] && { echo "usage: bwrap [OPTIONS...] [--] COMMAND [ARGS...]"; '
        "exit 0; }\n"
        'for a in "$@"; do [ "$a" = --size ] && { echo "bwrap: Unknown option --size" >&2; '
        "exit 1; }; done\n"
        f'exec {STATUS.bwrap} "$@"\n'
    )
    old.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}:{os.environ['PATH']}")
    status = sandbox_status()
    assert status.available and status.bwrap == str(old) and not status.sizes_tmpfs
    ctx = ToolContext(workspace=empty_workspace, sandbox="require")
    text, is_error = bash(ctx, "cat /proc/1/cmdline | tr '\\0' ' '; echo")
    assert not is_error and text.startswith("[warning: ") and "cannot bound the size" in text
    assert "bwrap" in text  # it ran in the sandbox: its PID 1 is bubblewrap
    text, _ = bash(ctx, "echo again")
    assert text == "again\n\n[exit code: 0]"
