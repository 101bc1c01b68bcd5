"""A lake's `events` as a load without a lake keeps them: each record's identity at the build,
its own fields read from its files on first use, then kept in the lake.

A load without a lake reads the events' own fields (DuckDB reading the files again with their
schema detected: two more passes over every byte) only when `events` is asked for; a lake's
build did it for every batch, which made the build cost twice a load. Now the build writes a
group's events part with the identities only, marks the part (`IDENTITIES` in its Parquet
metadata) and the group's manifest entry (`PENDING`); the first read of a group's events
(`LakeTranscripts.events`, `session(id)`, SQL over `events`) reads its files' fields a batch
of groups at a time, writes the whole part over the marked one, and clears the mark. A part
whose own mark is gone is whole already (written before a build was interrupted): it is kept.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.datafiles import NotInside, locked, open_regular, parts_of
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.events import events_table
from evo_magic.analysis.frames import typed
from evo_magic.analysis.groups import BATCH_BYTES, batches
from evo_magic.analysis.lake_consolidated import read_parquet_inside
from evo_magic.analysis.lake_manifest import MANIFEST, read_manifest, write_manifest, written
from evo_magic.analysis.lake_parts import split, write_part
from evo_magic.analysis.loader import SourceFile
from evo_magic.analysis.memory import drained

if TYPE_CHECKING:
    import pyarrow as pa

PENDING = "events_pending"
"""A manifest entry's key: True when its events part holds the identities only."""
IDENTITIES = b"evo_magic_events"
"""A part's metadata key (value `b"identities"`) saying it holds the events' identities only."""


def marked(table: pa.Table) -> pa.Table:
    """`table` (a group's events identities) marked as waiting for its own fields."""
    return table.replace_schema_metadata(
        {**(table.schema.metadata or {}), IDENTITIES: b"identities"}
    )


def waits(entry: dict[str, Any], events: pa.Table | None) -> bool:
    """Whether a group just read has events whose own fields are read later: its files are
    JSON lines (a reader of whole documents gives the fields with the identities)."""
    files = entry.get("files") or {}
    return events is not None and bool(files) and all(n.lower().endswith(".jsonl") for n in files)


def pending(groups: dict[str, dict[str, Any]], keys: list[str]) -> list[str]:
    """The groups among `keys` whose events part waits for its own fields."""
    return [key for key in keys if key in groups and groups[key].get(PENDING) is True]


def complete(root: Path, keys: list[str]) -> dict[str, dict[str, Any]]:
    """The events of the groups `keys` of the lake at `root` made whole (see the module
    docstring), under the lake's lock; the manifest's entries of the groups completed (none
    when none was waiting)."""
    with locked(root):
        manifest = read_manifest(root)
        return complete_locked(root, manifest, keys)


def complete_lake(root: Path) -> None:
    """Every group's events of the lake at `root` made whole, for SQL over its folder; a
    folder without a manifest (written by `Transcripts.to_parquet`), or a lake that cannot
    be written or whose manifest is refused, keeps its events as they are."""
    if not (root / MANIFEST).is_file():
        return
    with contextlib.suppress(OSError, NotInside, TranscriptError), locked(root):
        manifest = read_manifest(root)
        complete_locked(root, manifest, list(manifest["groups"]))


def complete_locked(
    root: Path, manifest: dict[str, Any], keys: list[str]
) -> dict[str, dict[str, Any]]:
    """`complete` with the lake's lock held and its `manifest` read (written here when a group
    was completed: after each batch, so an interrupted read keeps what it did)."""
    groups = manifest["groups"]
    todo = pending(groups, keys)
    for batch in batches(todo, lambda key: _size(groups[key]), BATCH_BYTES):
        _complete_batch(root, groups, batch)
        write_manifest(root, manifest)
    return {key: groups[key] for key in todo}


def _size(entry: dict[str, Any]) -> int:
    stamps = entry.get("files") or {}
    return sum(int(s.get("size") or 0) for s in stamps.values() if isinstance(s, dict))


def _events_parts(entry: dict[str, Any]) -> list[str]:
    found = []
    for relative in written(entry):
        with contextlib.suppress(NotInside):
            if parts_of(relative)[0] == "events":
                found.append(relative)
    return found


def _complete_batch(root: Path, groups: dict[str, dict[str, Any]], batch: list[str]) -> None:
    """Read the own fields of the batch's groups' files at once, and write each group's whole
    events part. A group whose part cannot be read is left as it is (its read finds it
    damaged and reads the group again). Only the files the manifest lists for the group are
    read, never a name found in a part (a part is data, as the files it names)."""
    import numpy as np
    import pyarrow as pa

    identities: list[pa.Table] = []
    ranks: list[np.ndarray] = []
    stamps: dict[str, dict[str, Any]] = {}
    done: list[str] = []
    for key in batch:
        entry = groups[key]
        try:
            parts = [read_parquet_inside(root, relative) for relative in _events_parts(entry)]
        except (OSError, NotInside, pa.ArrowException):
            continue
        entry.pop(PENDING, None)
        waiting = [p for p in parts if (p.schema.metadata or {}).get(IDENTITIES)]
        if not waiting or len(waiting) != len(parts):
            continue  # whole already (an interrupted read wrote it), or nothing to add
        ranks += [np.full(p.num_rows, len(done)) for p in parts]
        identities += [p.replace_schema_metadata(None) for p in parts]
        stamps.update(_files(entry))
        done.append(key)
    whole = drained(identities)
    if whole is None:
        return
    table, spec = events_table(whole, _sources(stamps))
    del whole
    order = np.concatenate(ranks)
    if table is None or table.num_rows != len(order):
        return  # not the rows of the parts (never expected): they stay as they are
    for key, part in split(typed(table, spec), order, {key: key for key in done}):
        entry = groups[key]
        old = set(_events_parts(entry))  # written again under the same names
        entry["written"] = [r for r in written(entry) if r not in old]
        write_part(root, "events", entry, part)


def _files(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    files = entry.get("files")
    if not isinstance(files, dict):
        return {}
    return {name: stamp for name, stamp in files.items() if isinstance(stamp, dict)}


def _sources(stamps: dict[str, dict[str, Any]]) -> list[SourceFile]:
    """The files as the load read them: regular files only, opened without following a
    link or blocking, of the size the lake read (a file gone or changed since is left out,
    with a warning naming it: its records keep their identities, without fields)."""
    sources = []
    for name, stamp in stamps.items():
        path = Path(name)
        try:
            with open_regular(path) as handle:
                data = handle.read()
        except (OSError, NotInside):
            _fields_lost(path, "is gone or no longer a regular file")
            continue
        if len(data) != stamp.get("size"):
            _fields_lost(path, "changed")
            continue
        source = SourceFile(len(sources), path, data)
        source.drop_edge_lines()
        sources.append(source)
    return sources


def _fields_lost(path: Path, what: str) -> None:
    # The lake keeps every record's identity, but its own fields are read from the file on
    # first use: say so rather than give events that silently lack them.
    warnings.warn(
        f"{path}: the file {what} since the lake read it; its events keep their identities "
        "only (load the folder again to read it anew)",
        TranscriptWarning,
        stacklevel=2,
    )
