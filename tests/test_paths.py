"""The file tools stay inside the workspace against races, symlinks and hardlinks: real files, a
real second process swapping a directory for a symlink while the tools run."""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from evo_magic.tools import ToolContext, ToolResult, default_tools, run_tool
from evo_magic.tools.paths import open_beneath


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    other = tmp_path / "outside"
    other.mkdir()
    (other / "f.txt").write_text("outside-secret\n")
    return other


@pytest.fixture
def ctx(empty_workspace: Path) -> ToolContext:
    return ToolContext(workspace=empty_workspace, bash_timeout=10)


def call(name: str, tool_input: Any, ctx: ToolContext) -> ToolResult:
    return run_tool(default_tools(), "toolu_1", name, tool_input, ctx)


# A second process swaps `d` (a real directory) and `d.link` (a symlink to the outside) with
# renameat2(RENAME_EXCHANGE), as fast as it can: `d` always exists, and is either.
SWAPPER = textwrap.dedent(
    """
    import ctypes, os, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    a, b, seconds = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), float(sys.argv[3])
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
            sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
    """
)


def renameat2_exchange_works(directory: Path) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        return False
    (directory / "probe.a").mkdir()
    (directory / "probe.b").symlink_to("probe.a")
    try:
        a, b = (os.fsencode(directory / name) for name in ("probe.a", "probe.b"))
        return libc.renameat2(-100, a, -100, b, 2) == 0
    finally:
        for name in ("probe.a", "probe.b"):
            path = directory / name
            path.unlink() if path.is_symlink() else path.rmdir()


def start_swapper(workspace: Path, outside: Path, seconds: float) -> subprocess.Popen[str]:
    (workspace / "d").mkdir()
    (workspace / "d" / "f.txt").write_text("inside\n")
    (workspace / "d.link").symlink_to(outside)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, "d", "d.link", str(seconds)],
        cwd=workspace,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
    return swapper


@pytest.mark.slow
def test_racing_swaps_never_read_or_write_outside(
    empty_workspace: Path, outside: Path, ctx: ToolContext, tmp_path: Path
) -> None:
    if not renameat2_exchange_works(tmp_path):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available to drive the race")
    swapper = start_swapper(empty_workspace, outside, seconds=60)
    reads = writes = refused = 0
    try:
        deadline = time.monotonic() + 8
        while (reads < 3000 or writes < 3000) and time.monotonic() < deadline:
            result = call("read_file", {"path": "d/f.txt"}, ctx)
            assert "outside-secret" not in result.content
            refused += result.is_error
            reads += 1
            result = call("write_file", {"path": "d/f.txt", "content": "pwned\n"}, ctx)
            refused += result.is_error
            writes += 1
            assert (outside / "f.txt").read_text() == "outside-secret\n"
    finally:
        swapper.kill()
        swapper.wait()
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "outside-secret\n"
    assert reads >= 1000 and writes >= 1000
    assert refused > 0, "the swap never raced the tools: the test proved nothing"


def test_a_hardlink_to_an_outside_file_is_not_written_through(
    empty_workspace: Path, outside: Path, ctx: ToolContext
) -> None:
    os.link(outside / "f.txt", empty_workspace / "h.txt")
    result = call("write_file", {"path": "h.txt", "content": "pwned\n"}, ctx)
    assert result.is_error and "h.txt has 2 hard links" in result.content
    assert "Nothing was written" in result.content
    edit = {"path": "h.txt", "old_str": "outside", "new_str": "pwned"}
    result = call("edit_file", edit, ctx)
    assert result.is_error and "2 hard links" in result.content
    assert (outside / "f.txt").read_text() == "outside-secret\n"
    # Reading through a hardlink is allowed: bash could read the file anyway.
    assert call("read_file", {"path": "h.txt"}, ctx).content == "outside-secret\n"


def test_a_fifo_is_refused_without_hanging(empty_workspace: Path, ctx: ToolContext) -> None:
    os.mkfifo(empty_workspace / "pipe")
    result = call("read_file", {"path": "pipe"}, ctx)
    assert result.is_error and "pipe is not a regular file" in result.content
    result = call("write_file", {"path": "pipe", "content": "x"}, ctx)
    assert result.is_error and "pipe is not a regular file" in result.content


@pytest.mark.parametrize("use_openat2", [True, False])
def test_open_beneath_follows_no_link(
    empty_workspace: Path, outside: Path, use_openat2: bool
) -> None:
    (empty_workspace / "real").mkdir()
    (empty_workspace / "real" / "f.txt").write_text("inside\n")
    (empty_workspace / "link").symlink_to(outside)
    (empty_workspace / "inner").symlink_to("real")  # a link inside the workspace
    (empty_workspace / "file-link").symlink_to("real/f.txt")
    root = os.open(empty_workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = open_beneath(root, "real/f.txt", os.O_RDONLY, use_openat2=use_openat2)
        assert os.read(fd, 100) == b"inside\n"
        os.close(fd)
        for path in ("link/f.txt", "inner/f.txt", "file-link"):
            with pytest.raises(OSError) as caught:
                open_beneath(root, path, os.O_RDONLY, use_openat2=use_openat2)
            assert caught.value.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR)
        for bad in ("../outside/f.txt", "/etc/passwd", ""):
            with pytest.raises(ValueError):
                open_beneath(root, bad, os.O_RDONLY, use_openat2=use_openat2)
        flags = os.O_WRONLY | os.O_CREAT
        fd = open_beneath(root, "new/deep/g.txt", flags, create_dirs=True, use_openat2=use_openat2)
        os.close(fd)
        assert (empty_workspace / "new" / "deep" / "g.txt").is_file()
        with pytest.raises(OSError):
            open_beneath(root, "link/new.txt", flags, create_dirs=True, use_openat2=use_openat2)
    finally:
        os.close(root)
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]


def test_symlinks_inside_the_workspace_still_work(empty_workspace: Path, ctx: ToolContext) -> None:
    # The path is resolved first (links inside are followed), then opened without links.
    (empty_workspace / "real").mkdir()
    (empty_workspace / "alias").symlink_to(empty_workspace / "real")
    result = call("write_file", {"path": "alias/f.txt", "content": "via alias\n"}, ctx)
    assert result.content == "Wrote 10 bytes to real/f.txt"
    assert call("read_file", {"path": "alias/f.txt"}, ctx).content == "via alias\n"


def test_a_path_through_a_file_is_a_clear_error(empty_workspace: Path, ctx: ToolContext) -> None:
    (empty_workspace / "plain").write_text("x")
    result = call("write_file", {"path": "plain/f.txt", "content": "y"}, ctx)
    assert result.is_error and "cannot write plain/f.txt: Not a directory" in result.content
