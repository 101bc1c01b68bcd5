"""A lake's groups by session, and the reads of their parts: which groups hold a session,
which files they came from, and a frame's rows of some groups read back from the lake (a
damaged part read again from its session's files).

The groups are the manifest's (`lake_manifest`): data, checked as they are read; a part is
opened inside the lake, through no link.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.datafiles import NotInside, locked, parts_of
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.frames import FRAMES
from evo_magic.analysis.lake_build import Reader, read_batch
from evo_magic.analysis.lake_consolidated import read_parquet_inside
from evo_magic.analysis.lake_events import PENDING, complete, complete_locked
from evo_magic.analysis.lake_manifest import checked, read_manifest, write_manifest, written
from evo_magic.analysis.memory import drained, gather

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


@dataclass(eq=False)
class LakeIndex:
    """The groups of the lake at `lake` (its manifest's, by key) and the sessions each holds.
    `reader` reads a group whose part is damaged again from its files (None: says it
    cannot)."""

    lake: Path
    groups: dict[str, dict[str, Any]]
    reader: Reader | None = None
    by_session: dict[str, list[str]] = field(default_factory=dict)
    """Each session's groups (a session's files may be read in more than one group)."""

    @classmethod
    def of(
        cls, lake: Path, groups: dict[str, dict[str, Any]], reader: Reader | None = None
    ) -> LakeIndex:
        """The index of the manifest's `groups` of the lake at `lake`."""
        by_session: dict[str, list[str]] = {}
        for key, entry in groups.items():
            for session in entry.get("sessions", []):
                by_session.setdefault(session, []).append(key)
        return cls(lake, groups, reader, by_session)

    def session_ids(self) -> list[str]:
        """The sessions, in the order of the lake."""
        return list(self.by_session)

    def keys(self, session_ids: list[str]) -> list[str]:
        """The groups holding the sessions, each once, in the sessions' order; KeyError names
        a session the lake does not hold."""
        found: dict[str, None] = {}
        for session_id in session_ids:
            keys = self.by_session.get(session_id)
            if not keys:
                raise KeyError(f"no session {session_id!r} in the lake {self.lake}")
            found.update(dict.fromkeys(keys))
        return list(found)

    def files(self, keys: list[str]) -> list[Path]:
        """The source files the groups were read from, in order."""
        return [Path(name) for key in keys for name in self.groups[key]["files"]]

    def source_bytes(self, session_id: str) -> int:
        """The size of the source files a session was read from, as the manifest records it
        (0 for a session the lake does not hold)."""
        total = 0
        for key in self.by_session.get(session_id, []):
            for stamp in (self.groups[key].get("files") or {}).values():
                size = stamp.get("size") if isinstance(stamp, dict) else None
                total += size if isinstance(size, int) and size > 0 else 0
        return total

    def read(self, name: str, keys: list[str], session_id: str | None = None) -> pd.DataFrame:
        """Frame `name` of the groups `keys` (in their order), typed as a load types it; only
        the rows of `session_id` when given."""
        import pandas as pd

        if name == "events":
            self.complete(keys)
        tables = gather(table for _, table in self.tables(name, keys))
        whole = drained(tables)
        if whole is None:
            return to_frame(name, None)
        frame = to_frame(name, whole)
        if session_id is not None and "session_id" in frame.columns:
            frame = frame[frame["session_id"].astype(object) == session_id]
        return pd.DataFrame(frame).reset_index(drop=True)

    def complete(self, keys: list[str]) -> None:
        """The groups' events made whole where they wait for their own fields (see
        `lake_events`)."""
        if any(self.groups[key].get(PENDING) is True for key in keys):
            self.groups.update(complete(self.lake, keys))

    def tables(self, name: str, keys: list[str]) -> Iterator[tuple[str, pa.Table]]:
        """The groups' files of frame `name`, in the order of `keys`."""
        for key in keys:
            for relative in written(self.groups[key]):
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
        entry = self.groups[key]
        files = [Path(n) for n in entry.get("files") or {}]
        shown = f"{self.lake / relative} ({why})"
        try:
            if self.reader is None or not files:
                raise OSError("no reader of its files was given: load the lake again")
            with locked(self.lake):
                fresh = read_batch(self.lake, [(key, files, _stamps(files))], self.reader)[key]
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
        self.groups[key] = fresh
        for other in written(fresh):
            table = _part(self.lake, other) if _frame_of(other) == name else None
            if table is not None and not isinstance(table, str):
                return table
        return None


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
