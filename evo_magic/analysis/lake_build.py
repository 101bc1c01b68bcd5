"""A lake's build: the transcript files under a path read into the lake's Parquet parts, only
the sessions with a new or changed file (see `lake_transcripts` for the lake itself).

The files are grouped by session (a Claude Code session with its subagents' files, one
evo_magic or Codex file each) and groups are read a batch at a time, so the memory a build
needs is bounded by a batch or by the largest session, not the folder; each group's rows are
written as one Parquet file per frame under `<lake>/<frame>/source=<source>/<group>.parquet`.
A manifest (`lake_manifest`) records what was read: each file's path, size, modification
time and a hash of its head and tail. A later build reads only the groups with a new or
changed file (an appended session is read again, an unchanged one is not) and drops the
groups whose files disappeared. The manifest is written every few seconds of a build and at
its end, so a build that was interrupted goes on about where it stopped. The small frames
(`calls`, `compactions`) are also kept as one file of the whole lake, brought up to date at
the build's end (`lake_consolidated`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evo_magic.analysis.atomic import id_name
from evo_magic.analysis.datafiles import locked, not_regular_inside
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.frames import FRAMES
from evo_magic.analysis.groups import batches, groups
from evo_magic.analysis.lake_consolidated import CONSOLIDATED, Fresh, write_built
from evo_magic.analysis.lake_events import PENDING, marked, waits
from evo_magic.analysis.lake_manifest import (
    Hashes,
    checked,
    columns_mark,
    drop,
    known_files,
    read_manifest,
    same_content,
    write_manifest,
    written,
)
from evo_magic.analysis.lake_parts import Writes, note_sessions, ranks_of, split, write_part
from evo_magic.analysis.loader import resolve

Reader = Callable[[list[Path]], Any]
"""Reads exactly these files as a lake keeps them: a `transcripts.Read` whose tables are
typed as their frames, calls priced, `events` whole (`transcripts.stored`)."""

STORED = (*FRAMES, "events")
"""The frames a lake holds for every group."""
NO_CALLS = "no calls"
"""A group's prices mark when it has no calls to price."""
BATCH_BYTES = 8 << 20
"""A build reads sessions together up to this many bytes of files (one larger is read alone):
each batch has a fixed cost beside the parse (a DuckDB pass per format, the calls priced and
every frame typed, a wait for the writer), which at 4 MiB made a build of 100 MB 1.6 times a
plain load. 16 MiB made it 1.5 times, but a build of 1 GB then peaked at 651 MB (465 MB at
4 MiB), over the build's 600 MB target; 8 MiB is between the two."""
SAVE_SECONDS = 2.0
"""A build writes its manifest when it has read for this long since it last did (and at its
end): writing the whole manifest after every batch cost more than the batches at thousands
of sessions, and an interrupted build reads again at most these seconds of work."""


@dataclass
class LakeUpdate:
    """What a load did to the lake: groups read (new or changed), kept, dropped."""

    read: int = 0
    kept: int = 0
    dropped: int = 0
    files_read: list[str] = field(default_factory=list)


def update_lake(path: str | Path, lake: str | Path, read: Reader) -> LakeUpdate:
    """Bring the lake at `lake` up to date with the transcript files under `path`, reading
    each new or changed session's files with `read`.

    A file whose size and modification time are those of the manifest is not opened; one
    whose time changed but whose size and head-and-tail hash did not (touched, not written)
    is not read again either."""
    files, _ = resolve(path)
    root = Path(lake).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    with locked(root):  # another build of this lake waits, then finds it up to date
        return _update(root, files, read)


def _update(root: Path, files: list[Path], read: Reader) -> LakeUpdate:
    manifest = read_manifest(root)
    renewed = _renew_columns(root, manifest)
    known = known_files(manifest)
    stamps: dict[str, dict[str, Any]] = {}
    keys: dict[str, str] = {}
    with Hashes() as hashes:  # a new file's hash is made while the build parses
        for file in files:
            name = str(file)
            stamps[name], keys[name] = checked(file, known.get(name), hashes)
        return _build(root, manifest, files, stamps, keys, read, hashes, renewed)


def _build(
    root: Path,
    manifest: dict[str, Any],
    files: list[Path],
    stamps: dict[str, dict[str, Any]],
    keys: dict[str, str],
    read: Reader,
    hashes: Hashes,
    renewed: bool,
) -> LakeUpdate:
    """The groups of `files` (their `stamps` and `keys`) brought into the lake: the new or
    changed ones read, the gone ones dropped, `manifest` written."""
    by_group = dict(groups(files, key=lambda file: keys[str(file)]))
    done = LakeUpdate()
    gone = [k for k in manifest["groups"] if k not in by_group]
    for key in gone:
        drop(root, manifest["groups"].pop(key))
        done.dropped += 1
    todo: list[tuple[str, list[Path], dict[str, Any]]] = []
    touched = False
    parts = [name for entry in manifest["groups"].values() for name in written(entry)]
    broken = not_regular_inside(root, parts)
    for key, members in by_group.items():
        mine = {str(file): stamps[str(file)] for file in members}
        entry = manifest["groups"].get(key)
        if (
            entry is not None
            and same_content(entry.get("files"), mine)
            and _whole(root, entry, broken)
        ):
            touched = touched or entry["files"] != mine
            entry["files"] = mine  # a touched file's new time, so it is not hashed again
            done.kept += 1
            continue
        if entry is not None:
            drop(root, manifest["groups"].pop(key))
        todo.append((key, members, mine))
    if todo or gone or renewed:  # what the lake holds changes: its consolidated frames too
        manifest["generation"] = int(manifest.get("generation") or 0) + 1
    if todo or gone or touched or renewed:  # an unchanged lake is only read
        write_manifest(root, manifest)
    saved = time.monotonic()
    fresh: Fresh = {}  # the small frames' rows read, for their consolidated files
    with Writes() as writes:  # a batch's parts are written while the next one is read
        for batch in batches(todo, _files_size, BATCH_BYTES):
            made = read_batch(root, batch, read, writes, fresh)
            for entry in made.values():  # what a consolidated file of a later one lacks
                entry["generation"] = manifest["generation"]
            manifest["groups"].update(made)
            done.read += len(batch)
            done.files_read += [name for _, _, stamps in batch for name in stamps]
            if time.monotonic() - saved >= SAVE_SECONDS:
                writes.wait()  # the manifest names only parts written
                hashes.wait()  # and new files' hashes
                write_manifest(root, manifest)
                saved = time.monotonic()
    if todo:
        hashes.wait()
        write_manifest(root, manifest)
    if todo or gone or renewed:  # after the manifest: the file names its generation
        write_built(root, manifest["groups"], str(manifest["generation"]), fresh)
    return done


def _renew_columns(root: Path, manifest: dict[str, Any]) -> bool:
    """Drop every group of a lake written under other columns (see `columns_mark`), so that
    each is read again; whether any was dropped."""
    mark = columns_mark()
    stale = bool(manifest["groups"]) and manifest.get("columns") != mark
    if stale:
        warnings.warn(
            f"{root} was written by an evo_magic with other columns: every session is read again",
            TranscriptWarning,
            stacklevel=5,
        )
        for key in list(manifest["groups"]):
            drop(root, manifest["groups"].pop(key))
    manifest["columns"] = mark
    return stale


def _whole(root: Path, entry: dict[str, Any], broken: set[str]) -> bool:
    """Whether every file written for the group is in the lake (none of `broken`: see
    `not_regular_inside`); when one is not, a warning names it and the group is read again."""
    for relative in written(entry):
        if relative in broken:
            warnings.warn(
                f"{root / relative}: a part of the lake is missing or not a regular file; its "
                "session is read again from its files",
                TranscriptWarning,
                stacklevel=6,
            )
            return False
    return True


def _files_size(item: tuple[str, list[Path], dict[str, Any]]) -> int:
    return sum(stamp["size"] for stamp in item[2].values())


def read_batch(
    root: Path,
    batch: list[tuple[str, list[Path], dict[str, Any]]],
    read: Reader,
    writes: Writes | None = None,
    fresh: Fresh | None = None,
) -> dict[str, dict[str, Any]]:
    """Read the batch's files at once, then write each group's rows as its own files (the
    read's Arrow tables as they are: no DataFrame is made), by `writes` when given (the
    previous batch's parts written first), else at once; the small frames' rows written are
    kept in `fresh` when given."""
    entries = {}
    group_of: dict[str, str] = {}
    for key, members, stamps in batch:
        name = id_name(key)
        entries[key] = {"files": stamps, "name": name, "sessions": [], "written": []}
        group_of.update({str(file): key for file in members})
    try:
        got = read([file for _, members, _ in batch for file in members])
    except TranscriptError as exc:
        if "no transcript records" not in str(exc):
            raise
        for entry in entries.values():  # nothing to keep (empty files, ...): said, kept
            entry["skipped"] = {"file without records": len(entry["files"])}
            entry["prices"] = NO_CALLS
        return entries
    first = entries[batch[0][0]]
    first["skipped"] = dict(got.skipped)  # the batch's, counted once
    for entry in entries.values():
        entry["prices"] = got.prices
    tables = got.tables
    if writes is not None:
        writes.wait()  # one batch's parts waiting at most: memory stays that of two batches
    for frame_name in STORED:
        table = tables.pop(frame_name)  # the tables are freed frame by frame
        if table is None:
            continue
        ranks = ranks_of(table, group_of)
        if frame_name == "blocks":
            note_sessions(table, ranks, entries, list(dict.fromkeys(group_of.values())))
        for key, part in split(table, ranks, group_of):
            if frame_name == "events" and waits(entries[key], part):
                part = marked(part)  # its own fields are read on first use (`lake_events`)
                entries[key][PENDING] = True
            rows = write_part(root, frame_name, entries[key], part, writes)
            if fresh is not None and frame_name in CONSOLIDATED:
                fresh.setdefault(key, {})[frame_name] = rows
        del table
    return entries
