"""The agent's tools on real files and real processes: nothing is mocked."""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from support.sandbox import sandbox_here

from evo_magic.tools import (
    BASH,
    COMPACT,
    EDIT_FILE,
    READ_FILE,
    WRITE_FILE,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    default_tools,
    run_tool,
)
from evo_magic.tools.bash import OUTPUT_CAP
from evo_magic.tools.files import READ_CAP
from evo_magic.tools.paths import display_path, resolve_in_workspace


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, holding a secret file."""
    other = tmp_path / "outside"
    other.mkdir()
    (other / "secret.txt").write_text("secret\n")
    return other


@pytest.fixture
def files_seen() -> list[str]:
    return []


@pytest.fixture
def ctx(empty_workspace: Path, files_seen: list[str]) -> ToolContext:
    return ToolContext(
        workspace=empty_workspace,
        on_file=files_seen.append,
        bash_timeout=10,
        sandbox=sandbox_here(),
    )


def call(name: str, tool_input: Any, ctx: ToolContext) -> ToolResult:
    return run_tool(default_tools(), "toolu_1", name, tool_input, ctx)


def ok(name: str, tool_input: Any, ctx: ToolContext) -> str:
    result = call(name, tool_input, ctx)
    assert not result.is_error, result.content
    return result.content


def error(name: str, tool_input: Any, ctx: ToolContext) -> str:
    result = call(name, tool_input, ctx)
    assert result.is_error, result.content
    return result.content


def unique_sleep() -> str:
    """A `sleep` whose command line no other process has, to find it from outside the sandbox
    (inside, the command sees its own PID namespace: `$!` is not a pid out here)."""
    return f"sleep 1000.{secrets.randbelow(10**9):09d}"


def running(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # it exited meanwhile
        if marker in cmdline and state != "Z" and "bash -c" not in cmdline:
            found.append(int(entry.name))
    return found


def wait_gone(marker: str, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not running(marker):
            return True
        time.sleep(0.02)
    return False


# sandbox


def test_resolve_accepts_relative_absolute_inside_and_new_paths(empty_workspace: Path) -> None:
    root = empty_workspace.resolve()
    assert resolve_in_workspace(empty_workspace, "a/b.txt") == root / "a" / "b.txt"
    assert resolve_in_workspace(empty_workspace, str(root / "x.py")) == root / "x.py"
    assert resolve_in_workspace(empty_workspace, "a/../c.txt") == root / "c.txt"
    assert display_path(empty_workspace, root / "a" / "b.txt") == "a/b.txt"
    assert display_path(empty_workspace, root) == "."


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "~/x", ""])
def test_resolve_refuses_escapes(empty_workspace: Path, path: str) -> None:
    with pytest.raises(ToolError):
        resolve_in_workspace(empty_workspace, path)


def test_resolve_refuses_symlinks_leading_outside(empty_workspace: Path, outside: Path) -> None:
    (empty_workspace / "link.txt").symlink_to(outside / "secret.txt")
    (empty_workspace / "linkdir").symlink_to(outside)
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(empty_workspace, "link.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(empty_workspace, "linkdir/new.txt")


def test_resolve_follows_symlinks_inside(empty_workspace: Path) -> None:
    (empty_workspace / "real").mkdir()
    (empty_workspace / "alias").symlink_to(empty_workspace / "real")
    assert (
        resolve_in_workspace(empty_workspace, "alias/f") == empty_workspace.resolve() / "real" / "f"
    )


ESCAPES = ["../outside/secret.txt", "linkdir/secret.txt", "link.txt", "ABS"]


@pytest.fixture
def escapes(empty_workspace: Path, outside: Path) -> list[str]:
    (empty_workspace / "link.txt").symlink_to(outside / "secret.txt")
    (empty_workspace / "linkdir").symlink_to(outside)
    return [path.replace("ABS", str(outside / "secret.txt")) for path in ESCAPES]


@pytest.mark.parametrize("index", range(len(ESCAPES)))
def test_file_tools_refuse_paths_outside(
    ctx: ToolContext, outside: Path, escapes: list[str], index: int, files_seen: list[str]
) -> None:
    path = escapes[index]
    assert "outside the workspace" in error("read_file", {"path": path}, ctx)
    assert "outside" in error("write_file", {"path": path, "content": "pwned"}, ctx)
    edit = {"path": path, "old_str": "secret", "new_str": "pwned"}
    assert "outside" in error("edit_file", edit, ctx)
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert files_seen == []


# read_file


def test_read_file_returns_exact_text_and_reports_the_file(
    ctx: ToolContext, empty_workspace: Path, files_seen: list[str]
) -> None:
    (empty_workspace / "src").mkdir()
    (empty_workspace / "src" / "a.py").write_bytes(b"x = 1\r\ny = 2\n")
    assert ok("read_file", {"path": "src/a.py"}, ctx) == "x = 1\r\ny = 2\n"
    assert ok("read_file", {"path": str(empty_workspace / "src" / "a.py")}, ctx).startswith("x = 1")
    assert files_seen == ["src/a.py", "src/a.py"]


def test_read_file_offset_limit_and_continuation_note(
    ctx: ToolContext, empty_workspace: Path
) -> None:
    (empty_workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 321)))
    text = ok("read_file", {"path": "n.txt", "offset": 101, "limit": 100}, ctx)
    lines = text.splitlines()
    assert lines[0] == "line 101" and lines[99] == "line 200"
    assert lines[100] == "[... 120 more lines; call read_file with offset=201 to continue]"
    assert ok("read_file", {"path": "n.txt", "offset": 301}, ctx).endswith("line 320\n")
    assert "past the end" in error("read_file", {"path": "n.txt", "offset": 400}, ctx)
    assert "at least 1" in error("read_file", {"path": "n.txt", "offset": 0}, ctx)


def test_read_file_caps_large_files(ctx: ToolContext, empty_workspace: Path) -> None:
    line = "x" * 99 + "\n"
    (empty_workspace / "big.txt").write_text(line * 2000)  # 200,000 characters
    text = ok("read_file", {"path": "big.txt"}, ctx)
    body, note = text.rsplit("\n[", 1)
    assert body + "\n" == line * 500 and len(body) < READ_CAP
    assert note == "... 1500 more lines; call read_file with offset=501 to continue]"
    rest = ok("read_file", {"path": "big.txt", "offset": 501}, ctx)
    assert "offset=1001" in rest


def test_read_file_cuts_a_single_overlong_line(ctx: ToolContext, empty_workspace: Path) -> None:
    (empty_workspace / "min.js").write_text("a" * (READ_CAP + 10) + "\nnext\n")
    text = ok("read_file", {"path": "min.js"}, ctx)
    assert text.startswith("a" * READ_CAP + "\n[line 1 is longer than")
    assert "offset=2" in text


def test_read_file_refusals(ctx: ToolContext, empty_workspace: Path) -> None:
    (empty_workspace / "dir").mkdir()
    (empty_workspace / "nul.bin").write_bytes(b"abc\0def")
    (empty_workspace / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (empty_workspace / "empty.txt").write_text("")
    assert "does not exist" in error("read_file", {"path": "missing.txt"}, ctx)
    assert "is a directory" in error("read_file", {"path": "dir"}, ctx)
    assert "binary" in error("read_file", {"path": "nul.bin"}, ctx)
    assert "not valid UTF-8" in error("read_file", {"path": "latin1.txt"}, ctx)
    assert "is empty" in ok("read_file", {"path": "empty.txt"}, ctx)


# write_file


def test_write_file_creates_parents_and_counts_utf8_bytes(
    ctx: ToolContext, empty_workspace: Path, files_seen: list[str]
) -> None:
    text = ok("write_file", {"path": "deep/er/é.txt", "content": "héllo\n"}, ctx)
    assert text == "Wrote 7 bytes to deep/er/é.txt"
    assert (empty_workspace / "deep" / "er" / "é.txt").read_text() == "héllo\n"
    assert ok("write_file", {"path": "deep/er/é.txt", "content": ""}, ctx).startswith("Wrote 0")
    assert files_seen == ["deep/er/é.txt", "deep/er/é.txt"]
    assert "is a directory" in error("write_file", {"path": "deep", "content": "x"}, ctx)


# edit_file


def test_edit_file_replaces_a_unique_occurrence(
    ctx: ToolContext, empty_workspace: Path, files_seen: list[str]
) -> None:
    (empty_workspace / "m.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    edit = {"path": "m.py", "old_str": "    return 2\n", "new_str": "    x = 2\n    return x\n"}
    text = ok("edit_file", edit, ctx)
    assert text == "Edited m.py: replaced 1 occurrence at line 6 (1 lines -> 2 lines)"
    assert (empty_workspace / "m.py").read_text().endswith("def g():\n    x = 2\n    return x\n")
    assert files_seen == ["m.py"]


def test_edit_file_refuses_ambiguous_and_missing_matches(
    ctx: ToolContext, empty_workspace: Path
) -> None:
    (empty_workspace / "m.py").write_text("return 1\nreturn 1\n")
    many = error("edit_file", {"path": "m.py", "old_str": "return 1", "new_str": "x"}, ctx)
    assert "2 times" in many and "surrounding lines" in many
    none = error("edit_file", {"path": "m.py", "old_str": "return 3", "new_str": "x"}, ctx)
    assert "0 occurrences" in none
    assert (empty_workspace / "m.py").read_text() == "return 1\nreturn 1\n"


def test_edit_file_empty_old_str_creates_only_new_files(
    ctx: ToolContext, empty_workspace: Path, files_seen: list[str]
) -> None:
    created = ok("edit_file", {"path": "new/f.txt", "old_str": "", "new_str": "a\nb\n"}, ctx)
    assert created == "Created new/f.txt (2 lines)"
    assert (empty_workspace / "new" / "f.txt").read_text() == "a\nb\n"
    again = error("edit_file", {"path": "new/f.txt", "old_str": "", "new_str": "z"}, ctx)
    assert "already exists" in again
    assert (empty_workspace / "new" / "f.txt").read_text() == "a\nb\n"
    assert files_seen == ["new/f.txt"]


def test_edit_file_missing_file_and_binary(ctx: ToolContext, empty_workspace: Path) -> None:
    missing = error("edit_file", {"path": "nope.txt", "old_str": "a", "new_str": "b"}, ctx)
    assert "does not exist" in missing and "write_file" in missing
    (empty_workspace / "b.bin").write_bytes(b"a\0b")
    assert "binary" in error("edit_file", {"path": "b.bin", "old_str": "a", "new_str": "c"}, ctx)


# bash


def test_bash_runs_in_workspace_and_reports_exit_code(
    ctx: ToolContext, empty_workspace: Path
) -> None:
    (empty_workspace / "here.txt").write_text("")
    assert ok("bash", {"command": "ls; echo err >&2"}, ctx) == "here.txt\nerr\n\n[exit code: 0]"
    assert ok("bash", {"command": "exit 3"}, ctx) == "(no output)\n[exit code: 3]"


def test_bash_timeout_kills_the_whole_process_group(
    ctx: ToolContext, empty_workspace: Path
) -> None:
    child = unique_sleep()
    command = f"echo started; {child} & touch child.started; sleep 100"
    started = time.monotonic()
    text = error("bash", {"command": command, "timeout": 1}, ctx)
    assert time.monotonic() - started < 5
    assert text.startswith("started\n") and "timed out after 1 s and was killed" in text
    assert (empty_workspace / "child.started").exists() and wait_gone(child)


def test_bash_timeout_is_capped_by_the_context(empty_workspace: Path) -> None:
    short = ToolContext(workspace=empty_workspace, bash_timeout=0.5)
    assert "timed out after 0.5 s" in error("bash", {"command": "sleep 5", "timeout": 60}, short)


def test_bash_kills_background_processes_when_the_command_ends(
    ctx: ToolContext, empty_workspace: Path
) -> None:
    child = unique_sleep()
    text = ok("bash", {"command": f"{child} & touch bg.started; echo done"}, ctx)
    assert text == "done\n\n[exit code: 0]"
    assert (empty_workspace / "bg.started").exists() and wait_gone(child)


def test_bash_interrupt_kills_the_group_and_propagates(
    ctx: ToolContext, empty_workspace: Path
) -> None:
    pid_file = empty_workspace / "child.started"
    child = unique_sleep()

    def interrupt() -> None:
        deadline = time.monotonic() + 5
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        call("bash", {"command": f"{child} & touch child.started; sleep 100"}, ctx)
    assert wait_gone(child)


def test_bash_output_cap_keeps_head_and_tail(ctx: ToolContext) -> None:
    command = "echo HEAD; seq 1 30000; echo TAIL"  # 168,904 characters
    text = ok("bash", {"command": command}, ctx)
    assert len(text) <= OUTPUT_CAP
    assert text.startswith("HEAD\n1\n2\n") and text.endswith("29999\n30000\nTAIL\n\n[exit code: 0]")
    assert "[... 120,904 characters cut from the middle of the output ...]" in text


def test_bash_reads_huge_output_with_bounded_memory(ctx: ToolContext) -> None:
    tracemalloc.start()
    try:
        text = ok("bash", {"command": "yes | head -c 50000000"}, ctx)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000
    assert "49,952,000 characters cut" in text


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /",
        "rm -fr /*",
        "rm -rf ~",
        "cd /tmp && rm -rf $HOME",
        "rm -r --no-preserve-root /",
        "sudo apt-get install x",
        "ls; sudo ls",
        "su -",
        "shutdown -h now",
        "reboot",
        "mkfs.ext4 /dev/sdb1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "cat img > /dev/sda",
        "chmod -R 777 /",
        ":(){ :|:& };:",
    ],
)
def test_bash_refuses_destructive_commands(
    ctx: ToolContext, empty_workspace: Path, command: str
) -> None:
    marker = empty_workspace / "ran"
    text = error("bash", {"command": f"touch {marker}; {command}"}, ctx)
    assert "refused" in text and "Nothing was run" in text
    assert not marker.exists()


@pytest.mark.parametrize(
    "command",
    ["rm -rf ./build", "rm -rf build/", "echo sudo reboot", "dd if=/dev/zero of=/dev/null count=1"],
)
def test_bash_runs_harmless_lookalikes(
    ctx: ToolContext, empty_workspace: Path, command: str
) -> None:
    (empty_workspace / "build").mkdir()
    assert ok("bash", {"command": command}, ctx).endswith("[exit code: 0]")


def test_bash_rm_of_a_build_directory_really_runs(ctx: ToolContext, empty_workspace: Path) -> None:
    (empty_workspace / "build" / "sub").mkdir(parents=True)
    ok("bash", {"command": "rm -rf ./build"}, ctx)
    assert not (empty_workspace / "build").exists()


def test_bash_hides_the_api_key(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token-secret")
    monkeypatch.setenv("EVO_VISIBLE", "yes")
    text = ok("bash", {"command": "env"}, ctx)
    assert "secret" not in text and "EVO_VISIBLE=yes" in text


# compact


def test_compact_requests_compaction(empty_workspace: Path) -> None:
    requested: list[str | None] = []
    ctx = ToolContext(workspace=empty_workspace, request_compaction=requested.append)
    assert ok("compact", {}, ctx) == "Compaction scheduled: it runs after this tool batch."
    text = ok("compact", {"focus": "the failing test"}, ctx)
    assert text.endswith("\nFocus: the failing test")
    assert requested == [None, "the failing test"]


# run_tool and the tool list


def test_default_tools_order_and_schemas() -> None:
    tools = default_tools()
    assert [tool.name for tool in tools] == [
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "compact",
    ]
    assert tools == [BASH, READ_FILE, WRITE_FILE, EDIT_FILE, COMPACT]
    for tool in tools:
        schema = tool.input_schema
        assert schema["type"] == "object" and set(schema["required"]) <= set(schema["properties"])
        assert all(spec.get("description") for spec in schema["properties"].values())
        assert tool.main_argument in schema["properties"]
        assert tool.definition()["name"] == tool.name


def test_run_tool_turns_failures_into_error_results(ctx: ToolContext) -> None:
    unknown = call("grep", {}, ctx)
    assert unknown.is_error and "grep" in unknown.content and "read_file" in unknown.content
    assert "missing required field(s): path" in error("read_file", {}, ctx)
    assert "must be a JSON object" in error("bash", "ls", ctx)
    assert "must be a integer" in error("bash", {"command": "ls", "timeout": "5"}, ctx)

    def crash(tool_input: dict[str, Any], ctx: ToolContext) -> str:
        raise ValueError("boom")

    broken = Tool("broken", "", {"type": "object", "properties": {}, "required": []}, crash)
    result = run_tool([broken], "toolu_9", "broken", {}, ctx)
    assert (result.is_error, result.content, result.tool_use_id) == (
        True,
        "ValueError: boom",
        "toolu_9",
    )
    assert result.duration >= 0
    assert result.block()["is_error"] is True


def test_run_tool_lets_keyboard_interrupt_through(ctx: ToolContext) -> None:
    def interrupted(tool_input: dict[str, Any], ctx: ToolContext) -> str:
        raise KeyboardInterrupt

    tool = Tool("stop", "", {"type": "object", "properties": {}, "required": []}, interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_tool([tool], "toolu_2", "stop", {}, ctx)


def test_run_tool_measures_duration(ctx: ToolContext) -> None:
    result = call("bash", {"command": "sleep 0.2"}, ctx)
    assert 0.2 <= result.duration < 2


def test_a_sessions_bash_settings_reach_every_command(
    empty_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bash settings given to Session apply to the commands its agent runs."""
    from evo_magic.models import FunctionModel, ModelRequest
    from evo_magic.session import Session

    monkeypatch.setenv("EVO_SESSION_KEEP_TOKEN", "kept")
    monkeypatch.setenv("EVO_SESSION_DROPPED", "dropped")
    command = "ulimit -v; ulimit -f; env | grep EVO_SESSION | sort"

    def agent(request: ModelRequest) -> list[dict[str, Any]]:
        if len(request.messages) == 1:
            return [
                {"type": "tool_use", "id": "toolu_s", "name": "bash", "input": {"command": command}}
            ]
        return [{"type": "text", "text": "done"}]

    session = Session(
        empty_workspace,
        model=FunctionModel(agent),
        sandbox=sandbox_here(),
        bash_env_keep=["*_KEEP_*"],
        bash_env_drop=["*TOKEN*", "*DROPPED"],
        bash_memory=256 << 20,
        bash_file_size=8 << 20,
    )
    session.ask("Show the limits.")
    session.close()
    output = session.messages[2]["content"][0]["content"]
    assert output.startswith("262144\n8192\nEVO_SESSION_KEEP_TOKEN=kept\n"), output
    assert "EVO_SESSION_DROPPED" not in output
    with pytest.raises(ValueError, match="sandbox_network must be 'on' or 'off'"):
        Session(empty_workspace, model=FunctionModel(agent), sandbox_network="no")  # type: ignore[arg-type]
