"""Transcripts kept in a lake: parsed once, updated incrementally, read in bounded memory.

    t = load_transcripts("~/.claude/projects", lake="~/evo-lake")   # builds or updates it
    t.calls; t.compactions; t.sessions        # small frames, in memory
    t.blocks                                  # large: read from the lake on use
    t.session("8f1c...")                      # one session's Transcripts
    t.sql("select model, sum(cost_usd) from calls group by 1")

The files under the path are grouped by session (a Claude Code session with its subagents'
files, one evo_magic or Codex file each). Each group is read on its own, so the memory a build
needs is bounded by the largest session, not the folder, and written as one Parquet file per
frame under `<lake>/<frame>/source=<source>/<group>.parquet`. A manifest (`lake_manifest`)
records what was read: each file's path, size, modification time and a hash of its head and
tail. A later load reads only the groups with a new or changed file (an appended session is
read again, an unchanged one is not) and drops the groups whose files disappeared. The
manifest is written every few seconds of a build and at its end, so a build that was
interrupted goes on about where it stopped. The small frames (`calls`, `compactions`) are
also kept as one file of the whole lake, brought up to date group by group: a load reads one
file, not thousands (`lake_consolidated`).

File and session names are data: the lake's own files are named by hashes.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.atomic import id_name
from evo_magic.analysis.datafiles import (
    NotInside,
    locked,
    not_regular_inside,
    parts_of,
)
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.frames import FRAMES
from evo_magic.analysis.groups import BATCH_BYTES, batches, groups
from evo_magic.analysis.lake_consolidated import (
    CONSOLIDATED,
    Fresh,
    consolidated,
    read_parquet_inside,
    write_built,
)
from evo_magic.analysis.lake_events import PENDING, complete, complete_locked, marked, waits
from evo_magic.analysis.lake_manifest import (
    checked,
    columns_mark,
    drop,
    known_files,
    prices_mark,
    read_manifest,
    same_content,
    write_manifest,
    written,
)
from evo_magic.analysis.lake_parts import Writes, note_sessions, ranks_of, split, write_part
from evo_magic.analysis.loader import resolve
from evo_magic.analysis.memory import drained, gather

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

Transcripts = Any
"""`evo_magic.analysis.transcripts.Transcripts`: given by the caller (it imports this module)."""
Reader = Callable[[list[Path]], Any]
"""Reads exactly these files as a lake keeps them: a `transcripts.Read` whose tables are
typed as their frames, calls priced, `events` whole (`transcripts.stored`)."""

STORED = (*FRAMES, "events")
NO_CALLS = "no calls"
"""A group's prices mark when it has no calls to price."""
SAVE_SECONDS = 2.0
"""A build writes its manifest when it has read for this long since it last did (and at its
end): writing the whole manifest after every batch cost more than the batches at thousands
of sessions, and an interrupted build reads again at most these seconds of work."""
"""The frames a lake holds for every group."""


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
    for file in files:
        name = str(file)
        stamps[name], keys[name] = checked(file, known.get(name))
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
            made = _read_batch(root, batch, read, writes, fresh)
            for entry in made.values():  # what a consolidated file of a later one lacks
                entry["generation"] = manifest["generation"]
            manifest["groups"].update(made)
            done.read += len(batch)
            done.files_read += [name for _, _, stamps in batch for name in stamps]
            if time.monotonic() - saved >= SAVE_SECONDS:
                writes.wait()  # the manifest names only parts written
                write_manifest(root, manifest)
                saved = time.monotonic()
    if todo:
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
                stacklevel=5,
            )
            return False
    return True


def _files_size(item: tuple[str, list[Path], dict[str, Any]]) -> int:
    return sum(stamp["size"] for stamp in item[2].values())


def _read_batch(
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


def _frame_of(relative: str) -> str | None:
    try:
        return parts_of(relative)[0]
    except NotInside:
        return None


def _part(lake: Path, relative: str) -> pa.Table | str:
    """The part `relative` of the lake (opened inside it, through no link), or why it cannot
    be read."""
    import pyarrow as pa

    try:
        return read_parquet_inside(lake, relative)
    except FileNotFoundError:
        return "missing"
    except (OSError, NotInside, pa.ArrowException) as exc:
        return f"unreadable: {exc}"


def _stamps(files: list[Path]) -> dict[str, dict[str, Any]]:
    return {str(file): checked(file, None)[0] for file in files}


def to_frame(name: str, table: pa.Table | None) -> pd.DataFrame:
    """Frame `name` (a stored one) of `table`, typed exactly as a load without a lake types
    it (categories of `string` whose missing values are <NA>, not `str` and NaN); None: no
    rows. The table's columns are freed as they convert (the caller keeps no other table of
    the same columns)."""
    import pyarrow as pa

    from evo_magic.analysis.frames import EVENT_COLUMNS, to_pandas

    spec = dict(FRAMES.get(name, EVENT_COLUMNS))
    for column in table.schema if table is not None else []:  # an event's own fields
        if column.name not in spec and pa.types.is_dictionary(column.type):
            spec[column.name] = "category"
    return to_pandas(table, spec)


class LakeTranscripts:
    """The frames of a lake (see the module docstring), each read on first use and kept:
    `calls`, `compactions` and `sessions` are small; `blocks`, `parts` and `events` are
    large, and `session(id)` reads one session's rows only."""

    def __init__(
        self,
        lake: str | Path,
        make: Callable[..., Any],
        update: LakeUpdate | None = None,
        read: Reader | None = None,
        *,
        prices: Any = None,
    ):
        self.lake = Path(lake).expanduser()
        self.prices = prices
        """The prices the calls are shown at (`evo_magic.cost.price_table`'s argument): the
        lake's calls are priced again as they are read, so a session read under other prices
        (or an older catalog) shows the same costs as a fresh load."""
        self._make = make  # the Transcripts class
        self._reader = read  # re-reads a group whose part is damaged (None: says it cannot)
        manifest = read_manifest(self.lake)
        self.update = update or LakeUpdate(kept=len(manifest["groups"]))
        """What the load that opened the lake did (groups read, kept, dropped)."""
        self._groups: dict[str, dict[str, Any]] = manifest["groups"]
        self._by_session: dict[str, list[str]] = {}
        for key, entry in self._groups.items():
            for session in entry.get("sessions", []):
                self._by_session.setdefault(session, []).append(key)
        self._cache: dict[str, pd.DataFrame] = {}
        self._generation = str(manifest.get("generation") or 0)

    @property
    def calls(self) -> pd.DataFrame:
        if "calls" not in self._cache:
            from evo_magic.analysis.call_costs import price_calls

            calls = self._frame("calls")
            mark = prices_mark(self.prices)
            if any(e.get("prices") not in (mark, NO_CALLS) for e in self._groups.values()):
                calls = price_calls(calls, self.prices)[0]  # priced at other prices: again
            self._cache["calls"] = calls
        return self._cache["calls"]

    @property
    def compactions(self) -> pd.DataFrame:
        return self._frame("compactions")

    @property
    def files(self) -> list[Path]:
        return [Path(name) for entry in self._groups.values() for name in entry["files"]]

    @property
    def skipped(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for entry in self._groups.values():
            for reason, count in (entry.get("skipped") or {}).items():
                total[reason] = total.get(reason, 0) + int(count)
        return total

    @property
    def sessions(self) -> pd.DataFrame:
        """One row per session: its source, calls, cost (NA when a call had no price), calls
        without a price or with partial usage, and the files it came from."""
        from evo_magic.analysis.call_costs import session_totals

        files = {
            session: sum(len(self._groups[key]["files"]) for key in keys)
            for session, keys in self._by_session.items()
        }
        return session_totals(self.calls, files)

    @property
    def blocks(self) -> pd.DataFrame:
        return self._frame("blocks")

    @property
    def parts(self) -> pd.DataFrame:
        return self._frame("parts")

    @property
    def events(self) -> pd.DataFrame:
        return self._frame("events")

    def session_ids(self) -> list[str]:
        return list(self._by_session)

    def session(self, session_id: str) -> Transcripts:
        """One session's Transcripts, read from its group's files in the lake."""
        keys = self._by_session.get(session_id)
        if not keys:
            raise KeyError(f"no session {session_id!r} in the lake {self.lake}")
        frames = {name: self._read(name, keys, session_id) for name in ("blocks", "parts", "calls")}
        frames["compactions"] = self._read("compactions", keys, session_id)
        files = [Path(name) for key in keys for name in self._groups[key]["files"]]
        # Its events are read when asked for (their own fields may wait: `lake_events`).
        events = partial(self._read, "events", keys, session_id)
        return self._make(**frames, files=files, skipped={}, _events_of=events)

    def sql(self, query: str) -> pd.DataFrame:
        """Run a DuckDB SQL query over the lake's frames (`blocks`, `parts`, `calls`,
        `compactions`, `events`); DuckDB reads only the files and columns it needs."""
        from evo_magic.analysis import lake

        if "events" in query.lower():
            self._complete(list(self._groups))
        con = lake.connect(self.lake)
        try:
            return con.sql(query).df()
        finally:
            con.close()

    def _frame(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            if name in CONSOLIDATED:
                self._cache[name] = self._consolidated(name)
            else:
                self._cache[name] = self._read(name, list(self._groups), None)
        return self._cache[name]

    def _consolidated(self, name: str) -> pd.DataFrame:
        """A small frame from the one file of the whole lake (see `lake_consolidated`)."""
        table = consolidated(
            self.lake, name, self._groups, self._generation, lambda keys: self._tables(name, keys)
        )
        return to_frame(name, table)

    def _read(self, name: str, keys: list[str], session_id: str | None) -> pd.DataFrame:
        import pandas as pd

        if name == "events":
            self._complete(keys)
        tables = gather(table for _, table in self._tables(name, keys))
        whole = drained(tables)
        if whole is None:
            return to_frame(name, None)
        frame = to_frame(name, whole)
        if session_id is not None and "session_id" in frame.columns:
            frame = frame[frame["session_id"].astype(object) == session_id]
        return pd.DataFrame(frame).reset_index(drop=True)

    def _complete(self, keys: list[str]) -> None:
        """The groups' events made whole where they wait for their own fields (see
        `lake_events`)."""
        if any(self._groups[key].get(PENDING) is True for key in keys):
            self._groups.update(complete(self.lake, keys))

    def _tables(self, name: str, keys: list[str]) -> Iterator[tuple[str, pa.Table]]:
        """The groups' files of frame `name`, in the order of `keys`."""
        for key in keys:
            for relative in written(self._groups[key]):
                if _frame_of(relative) != name:
                    continue
                table = _part(self.lake, relative)
                if isinstance(table, str):
                    table = self._reread(key, name, relative, table)
                if table is not None:
                    yield key, table

    def _reread(self, key: str, name: str, relative: str, why: str) -> pa.Table | None:
        """The rows of frame `name` of the group `key`, whose part `relative` is missing or
        damaged (`why`): its files read again into the lake, with a warning naming the part;
        or None, with a warning saying its rows are missing, when they cannot be read."""
        entry = self._groups[key]
        files = [Path(n) for n in entry.get("files") or {}]
        shown = f"{self.lake / relative} ({why})"
        try:
            if self._reader is None or not files:
                raise OSError("no reader of its files was given: load the lake again")
            with locked(self.lake):
                fresh = _read_batch(self.lake, [(key, files, _stamps(files))], self._reader)[key]
                manifest = read_manifest(self.lake)
                manifest["generation"] = int(manifest.get("generation") or 0) + 1
                fresh["generation"] = manifest["generation"]
                manifest["groups"][key] = fresh
                write_manifest(self.lake, manifest)
                if name == "events":
                    fresh = complete_locked(self.lake, manifest, [key]).get(key, fresh)
        except (OSError, TranscriptError) as exc:
            warnings.warn(
                f"{shown}: its session cannot be read again from its files ({exc}); its rows "
                f"are missing from {name}",
                TranscriptWarning,
                stacklevel=5,
            )
            return None
        warnings.warn(
            f"{shown}: its session was read again from its files", TranscriptWarning, stacklevel=5
        )
        self._groups[key] = fresh
        for other in written(fresh):
            table = _part(self.lake, other) if _frame_of(other) == name else None
            if table is not None and not isinstance(table, str):
                return table
        return None

    def __repr__(self) -> str:
        u = self.update
        return (
            f"<LakeTranscripts at {self.lake}: {len(self._by_session):,} session(s), "
            f"{len(self.calls):,} calls; this load read {u.read} group(s), kept {u.kept}, "
            f"dropped {u.dropped}>"
        )
