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

from evo_magic.tools import ToolContext, default_tools, run_tool
from evo_magic.tools.bash import command_environment
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


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@needs_sandbox
def test_the_agent_cannot_read_the_kernels_environment_or_memory(workspace: Path) -> None:
    key = new_key()
    result = run_kernel(HUNT.format(kernel="$(cat kernel.pid)"), workspace, "require", key)
    assert "hunt-done" in result["content"], result["content"]
    assert "sk-ant-test-" not in result["content"]


def test_the_hunt_finds_the_key_without_the_sandbox(workspace: Path) -> None:
    # The same hunt, unsandboxed, finds the key (in /proc/$PPID/environ at least): the hunt
    # above would see it if the sandbox let it.
    key = new_key()
    result = run_kernel(HUNT.format(kernel="$(cat kernel.pid)"), workspace, "off", key)
    assert key in result["content"]


@needs_sandbox
def test_commands_write_only_the_workspace(workspace: Path, tmp_path: Path) -> None:
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
        result = run_kernel(command, workspace, "require", new_key())
        assert not system_file.exists() and not home_file.exists()
    finally:
        system_file.unlink(missing_ok=True)
        home_file.unlink(missing_ok=True)
    text = result["content"]
    assert (outside / "secret.txt").read_text() == "secret\n"  # /tmp is private
    assert "Read-only file system" in text
    assert (workspace / "inside.txt").read_text() == "inside\n"
    assert "\ntmp\n" in text


@needs_sandbox
def test_the_jupyter_runtime_directory_is_hidden(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kernel connection files hold the key that lets a client run code in the kernel. The test
    # directory is under the home directory because /tmp is private in the sandbox anyway.
    runtime = Path.home() / f".evo_magic_test_runtime_{secrets.token_hex(4)}"
    runtime.mkdir()
    try:
        (runtime / "kernel-1.json").write_text('{"key": "connection-secret"}')
        monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
        ctx = ToolContext(workspace=workspace, sandbox="require")
        result = run_tool(default_tools(), "t", "bash", {"command": f"cat {runtime}/*"}, ctx)
    finally:
        shutil.rmtree(runtime)
    assert "connection-secret" not in result.content


@needs_sandbox
def test_the_sandbox_kills_processes_that_leave_the_group(workspace: Path) -> None:
    marker = f"sleep 1000.{secrets.randbelow(10**9):09d}"
    ctx = ToolContext(workspace=workspace, sandbox="require")
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
def test_a_signal_death_reads_the_same_sandboxed_or_not(workspace: Path) -> None:
    for mode in ("require", "off"):
        ctx = ToolContext(workspace=workspace, sandbox=mode)
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
def test_require_refuses_to_run_without_bwrap(workspace: Path) -> None:
    status = sandbox_status()
    assert not status.available and "bwrap was not found on PATH" in status.reason
    ctx = ToolContext(workspace=workspace, sandbox="require")
    text, is_error = bash(ctx, "echo ran > marker")
    assert is_error and "the sandbox is required but not available" in text
    assert "Nothing was run" in text and "apt-get install bubblewrap" in text
    assert not (workspace / "marker").exists()
    assert describe_sandbox("require").startswith("bash is disabled")


@pytest.mark.usefixtures("bin_without_bwrap")
def test_warn_runs_unsandboxed_and_says_so_once(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, sandbox="warn")
    first, is_error = bash(ctx, "echo ran > marker; echo one")
    assert not is_error and (workspace / "marker").exists()
    assert first.startswith("[warning: bash runs WITHOUT a sandbox: bwrap was not found on PATH")
    assert "read the notebook kernel's memory and environment" in first
    assert first.endswith("one\n\n[exit code: 0]")
    second, _ = bash(ctx, "echo two")
    assert second == "two\n\n[exit code: 0]"  # once per session (the context's notices)
    assert describe_sandbox("warn").startswith("bash runs WITHOUT a sandbox")


@pytest.mark.usefixtures("bin_without_bwrap")
def test_off_runs_unsandboxed_silently(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, sandbox="off")
    assert bash(ctx, "echo ran") == ("ran\n\n[exit code: 0]", False)


def test_a_bwrap_that_cannot_create_namespaces(workspace: Path, broken_bwrap: Path) -> None:
    status = sandbox_status()
    assert not status.available and status.bwrap == str(broken_bwrap)
    assert "cannot create its namespaces here" in status.reason
    assert "non-privileged user namespaces" in status.reason
    text, is_error = bash(ToolContext(workspace=workspace, sandbox="require"), "echo ran")
    assert is_error and "cannot create its namespaces" in text
    text, is_error = bash(ToolContext(workspace=workspace, sandbox="warn"), "echo ran")
    assert not is_error and text.startswith("[warning: bash runs WITHOUT a sandbox")
    assert text.endswith("ran\n\n[exit code: 0]")


def test_the_setting_is_checked(workspace: Path) -> None:
    assert DEFAULT_SANDBOX == "warn" and SANDBOX_MODES == ("require", "warn", "off")
    assert ToolContext(workspace=workspace).sandbox == "warn"
    with pytest.raises(ValueError, match="sandbox must be one of 'require', 'warn', 'off'"):
        ToolContext(workspace=workspace, sandbox="strict")  # type: ignore[arg-type]


def test_the_environment_holds_no_known_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    key = new_key()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    monkeypatch.setenv("COPIED_KEY", f"Bearer {key}")
    monkeypatch.setenv("EVO_VISIBLE", "yes")
    env = command_environment()
    assert "ANTHROPIC_API_KEY" not in env and "COPIED_KEY" not in env
    assert env["EVO_VISIBLE"] == "yes"
