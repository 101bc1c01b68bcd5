"""Transcript files grouped by session, and groups packed into batches of bounded size.

A load reads a batch of sessions at a time (the lake's build, and a load without a lake), so
its memory is bounded by a batch or by the largest session, not by the folder; the files of
one session are always read together (a Claude Code session's subagents and compactions are
linked to it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from evo_magic.analysis.formats.registry import Sniff, group_of, recognise
from evo_magic.analysis.loader import SourceFile

BATCH_BYTES = 4 << 20
"""Sessions are read together up to this many bytes of files (one larger is read alone): a
read has a fixed cost, and memory stays bounded by this or by the largest session."""

T = TypeVar("T")


def groups(
    files: list[Path], key: Callable[[Path], str] | None = None
) -> Iterator[tuple[str, list[Path]]]:
    """The files by session, in the order of each group's first file: a Claude Code file goes
    with the other files of its directory tree that carry its `sessionId` (its subagents);
    every other file is a group of its own. `key`: each file's group when it is known already
    (default: `group_key`, which reads the file's first records)."""
    found: dict[str, list[Path]] = {}
    for file in files:
        found.setdefault((key or group_key)(file), []).append(file)
    yield from found.items()


def group_key(file: Path) -> str:
    """The session `file` belongs to, by its first records."""
    data = _head_bytes(file)
    records = SourceFile(0, file, data).head(20).records
    sniff = Sniff(file, data, records)
    kind = recognise(sniff)
    if kind == "claude_code":
        session = next((r["sessionId"] for r in records if isinstance(r.get("sessionId"), str)), "")
        if session:
            project = file.parent
            while project.name in ("subagents", session) and project.parent != project:
                project = project.parent
            return f"claude_code\0{project}\0{session}"
    together = group_of(kind, sniff) if kind is not None else None
    if together is not None:  # a session of several files (an OpenHands conversation folder)
        return f"{kind}\0{together}"
    return f"file\0{file}"


def batches(items: list[T], size: Callable[[T], int], limit: int) -> Iterator[list[T]]:
    """`items` in order, in consecutive batches of up to `limit` bytes by `size` (an item larger
    than `limit` is a batch of its own)."""
    batch: list[T] = []
    total = 0
    for item in items:
        grows = size(item)
        if batch and total + grows > limit:
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += grows
    if batch:
        yield batch


def _head_bytes(file: Path) -> bytes:
    """The file's first whole lines: within 64 KiB when they hold enough records, else within
    1 MiB (a first line can be long)."""
    with open(file, "rb") as handle:
        data = handle.read(1 << 16)
        if data.count(b"\n") < 20 and len(data) == 1 << 16:
            data += handle.read((1 << 20) - len(data))
    return data[: data.rfind(b"\n") + 1] if b"\n" in data else data
