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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.datafiles import NotInside, locked, parts_of
from evo_magic.analysis.events import events_table
from evo_magic.analysis.frames import typed
from evo_magic.analysis.groups import BATCH_BYTES, batches
from evo_magic.analysis.lake_consolidated import read_parquet_inside
from evo_magic.analysis.lake_manifest import read_manifest, write_manifest, written
from evo_magic.analysis.lake_parts import ranks_of, split, write_part
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
    damaged and reads the group again)."""
    import pyarrow as pa

    identities: list[pa.Table] = []
    group_of: dict[str, str] = {}
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
        done.append(key)
        identities += [p.replace_schema_metadata(None) for p in parts]
        group_of.update({name: key for name in entry.get("files") or {}})
    whole = drained(identities)
    if whole is None:
        return
    table, spec = events_table(whole, _sources(group_of))
    del whole
    table = typed(table, spec)
    for key, part in split(table, ranks_of(table, group_of), group_of):
        entry = groups[key]
        old = set(_events_parts(entry))  # written again under the same names
        entry["written"] = [r for r in written(entry) if r not in old]
        write_part(root, "events", entry, part)


def _sources(group_of: dict[str, str]) -> list[SourceFile]:
    """The groups' files as the load read them (a file gone since is left out: its records
    keep their identities, without fields)."""
    sources = []
    for name in group_of:
        with contextlib.suppress(OSError):
            sources.append(SourceFile.read(len(sources), Path(name)))
    return sources
