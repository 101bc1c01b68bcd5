"""A lake's manifest: what it read (each file's path, size, modification time and a hash of its
head and tail, by group) and what it wrote for each group. It is data: read back, checked, and
never a reason to touch a file outside the lake."""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evo_magic.analysis.datafiles import LOCK, NotInside, open_inside, remove_inside, write_inside
from evo_magic.analysis.errors import TranscriptError
from evo_magic.analysis.frames import EVENT_COLUMNS, FRAMES
from evo_magic.analysis.groups import group_key

MANIFEST = "manifest.json"
LAKE_VERSION = 1
_EDGE = 1 << 16
"""Bytes of a file's head and of its tail that its fingerprint hashes."""


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest of the lake at `root`: a new one when the folder is empty; refused when the
    folder holds other things, or a manifest that is damaged or of another version."""
    path = root / MANIFEST
    if not os.path.lexists(path):
        if any(entry.name != LOCK for entry in root.iterdir()):
            raise TranscriptError(
                f"{root} is not empty and holds no lake manifest: give an empty or new folder"
            )
        return {"version": LAKE_VERSION, "groups": {}}
    try:
        with open_inside(root, MANIFEST) as handle:  # a link or a FIFO in its place is refused
            manifest = json.loads(handle.read())
    except (OSError, ValueError, NotInside) as exc:
        raise TranscriptError(f"{path} is not a lake manifest ({exc})") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("groups"), dict):
        raise TranscriptError(f"{path} is not a lake manifest")
    if manifest.get("version") != LAKE_VERSION:
        raise TranscriptError(
            f"{path} is a lake of version {manifest.get('version')!r}; this evo_magic writes "
            f"version {LAKE_VERSION}: give a new folder"
        )
    return manifest


def columns_mark() -> str:
    """A short hash of every frame's declared columns and types. A lake whose manifest holds
    another (written by an evo_magic with other columns) has every session read again: its
    parts would lack a column the frames now have."""
    declared = {**FRAMES, "events": EVENT_COLUMNS}
    return hashlib.sha256(json.dumps(declared, sort_keys=True).encode()).hexdigest()[:16]


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    data = json.dumps(manifest).encode()
    write_inside(root, MANIFEST, lambda handle: handle.write(data))


def known_files(manifest: dict[str, Any]) -> dict[str, tuple[dict[str, Any], str]]:
    """Each file the manifest lists: its stamp and its group."""
    return {
        name: (stamp, key)
        for key, entry in manifest["groups"].items()
        for name, stamp in (entry.get("files") or {}).items()
        if isinstance(stamp, dict)
    }


def checked(
    file: Path, seen: tuple[dict[str, Any], str] | None, hashes: Hashes | None = None
) -> tuple[dict[str, Any], str]:
    """The file's stamp and group: the manifest's when its size and time are unchanged (the
    file is not opened), else made afresh. A file the manifest does not list is read whatever
    its hash: with `hashes`, its stamp's hash is filled in by their thread (see `Hashes`)."""
    info = file.stat()
    if seen is not None:
        stamp, key = seen
        if stamp.get("size") == info.st_size and stamp.get("mtime_ns") == info.st_mtime_ns:
            return stamp, key
    if seen is None and hashes is not None:
        return hashes.stamp(file, info), group_key(file)
    return _stamp(file, info), group_key(file)


class Hashes:
    """The hashes of new files' stamps made in a thread of their own while the build parses
    (reading and hashing release the interpreter's lock): a new file is read whatever its hash,
    which only the manifest needs. `wait` before the manifest is written; `close` at the end."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="evo-lake-hash")
        self._pending: list[Future[None]] = []

    def stamp(self, file: Path, info: os.stat_result) -> dict[str, Any]:
        """The file's stamp, its `hash` filled in later (by `wait` at the latest)."""
        stamp: dict[str, Any] = {"size": info.st_size, "mtime_ns": info.st_mtime_ns}
        self._pending.append(self._pool.submit(_hash_into, stamp, file, info))
        return stamp

    def wait(self) -> None:
        """Every stamp given so far has its hash (the first failure raised)."""
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Hashes:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.close()
        else:  # the build failed: its error is the one said, the hashes are not needed
            self._pool.shutdown(wait=True, cancel_futures=True)


def same_content(recorded: Any, now: dict[str, dict[str, Any]]) -> bool:
    """The same files with the same sizes and hashes (times aside)."""
    if not isinstance(recorded, dict) or recorded.keys() != now.keys():
        return False
    return all(
        isinstance(recorded[name], dict)
        and recorded[name].get("size") == stamp["size"]
        and recorded[name].get("hash") == stamp["hash"]
        for name, stamp in now.items()
    )


def _stamp(file: Path, info: os.stat_result) -> dict[str, Any]:
    """Size, modification time and a hash of the first and last 64 KiB."""
    stamp: dict[str, Any] = {"size": info.st_size, "mtime_ns": info.st_mtime_ns}
    _hash_into(stamp, file, info)
    return stamp


def _hash_into(stamp: dict[str, Any], file: Path, info: os.stat_result) -> None:
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        digest.update(handle.read(_EDGE))
        if info.st_size > _EDGE:
            handle.seek(max(info.st_size - _EDGE, _EDGE))
            digest.update(handle.read(_EDGE))
    stamp["hash"] = digest.hexdigest()


def generation(entry: dict[str, Any]) -> int:
    """The lake's generation when the group was written (0: before lakes said it)."""
    value = entry.get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def drop(root: Path, entry: dict[str, Any]) -> None:
    """Delete the files written for a group (only those inside the lake: the manifest is data
    too, and no link is followed)."""
    for relative in written(entry):
        remove_inside(root, relative)


def written(entry: dict[str, Any]) -> list[str]:
    """The names of the files written for a group, as its manifest entry lists them (names
    that are not text are left out: they were not written by a lake)."""
    found = entry.get("written") if isinstance(entry, dict) else None
    return [name for name in found if isinstance(name, str)] if isinstance(found, list) else []


def prices_mark(prices: Any) -> str:
    """A fingerprint of the prices `prices` describes (`evo_magic.cost.price_table`'s
    argument): a group records the one its calls were priced at, and calls priced at the
    prices asked for are not priced again (pricing is the most of reading 300,000 calls)."""
    from evo_magic.cost import price_table

    table = price_table(prices)
    rows = repr([(model, table.lookup(model)) for model in table.models()])
    return hashlib.sha256(rows.encode()).hexdigest()[:32]
