"""The settings timeline of an evo_magic session: every `session_start`, `policy`,
`strategies`, `cache`, `prices`, `pin` and `unpin` record, where it was written, read as data.

A session writes a record whenever a setting changes (between asks, e.g. through `%config`);
replay applies each from that place on. What a record means is `evo_magic.records` (the one
module that writes and reads them); this finds the records of a session and reads only their
lines.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.analysis.datafiles import open_regular
from evo_magic.analysis.errors import TranscriptError
from evo_magic.records import SETTINGS_KINDS, Change, changes_of

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Change", "read_records", "read_timeline", "session_file"]


def read_timeline(events: pd.DataFrame, session_id: str, files: Collection[str]) -> list[Change]:
    """The settings changes of `session_id`, in file order (its `events` rows name the
    records' files and lines; each must be one of the session's `files`, see `session_file`)."""
    import pandas as pd

    mine = events[
        (events["session_id"].astype(object) == session_id)
        & events["kind"].astype(object).isin(SETTINGS_KINDS)
    ]
    wanted: dict[str, set[int]] = {}
    for row in mine.itertuples():
        if not pd.isna(row.line):
            wanted.setdefault(str(row.file), set()).add(int(row.line))
    changes: list[Change] = []
    for file, lines in wanted.items():
        for line, record in read_records(session_file(file, files), lines):
            changes += changes_of(line, record)
    return sorted(changes, key=lambda change: change.line)


def session_file(name: str, files: Collection[str]) -> Path:
    """The file a frame's row names, when it is one of the session's `files` (those it was
    loaded from); else `TranscriptError`: frames read back from a lake are data, and a row
    naming another file would make replay read records from anywhere."""
    if name not in files:
        raise TranscriptError(
            f"a row of the session's frames names {name!r}, which is not one of the files it "
            "was loaded from (a changed lake?): replay reads no other file"
        )
    return Path(name)


def read_records(path: Path, lines: set[int]) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects at `lines` (1-based) of `path`; unreadable ones are left out. The file
    is opened only when it is a regular file, through no link at its end, never blocking
    (`NotInside` otherwise)."""
    found = []
    last = max(lines)
    try:
        with io.TextIOWrapper(open_regular(path), encoding="utf-8") as handle:
            for number, text in enumerate(handle, start=1):
                if number in lines:
                    try:
                        record = json.loads(text)
                    except (ValueError, RecursionError):
                        continue
                    if isinstance(record, dict):
                        found.append((number, record))
                if number >= last:
                    break
    except OSError as exc:
        warnings.warn(f"cannot read the settings of {path}: {exc}", stacklevel=4)
    return found
