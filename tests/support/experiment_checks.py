"""Checks for the experiment tests: module-level, so worker processes can import them."""

from __future__ import annotations

from pathlib import Path


def wrote_hello(workspace: Path) -> bool:
    """Success when the agent wrote `out.txt` starting with "hello"."""
    path = workspace / "out.txt"
    return path.is_file() and path.read_text().startswith("hello")


def half(workspace: Path) -> float:
    """A score of one half, whatever the agent did."""
    return 0.5


def broken(workspace: Path) -> bool:
    """A check that crashes."""
    raise RuntimeError("the check itself is broken")


def dotted(workspace: Path) -> str:
    """A check that returns neither a bool nor a score."""
    return "yes"
