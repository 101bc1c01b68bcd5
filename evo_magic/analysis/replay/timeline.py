"""The settings timeline of an evo_magic session: every `session_start`, `policy`,
`strategies`, `cache`, `prices`, `pin` and `unpin` record, where it was written, read as data.

A session writes a record whenever a setting changes (between asks, e.g. through `%config`);
replay applies each from that place on. What a record means is `evo_magic.records` (the one
module that writes and reads them); this finds the records of a session and reads only their
lines.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.records import SETTINGS_KINDS, Change, changes_of

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Change", "read_records", "read_timeline"]


def read_timeline(events: pd.DataFrame, session_id: str) -> list[Change]:
    """The settings changes of `session_id`, in file order (its `events` rows name the
    records' files and lines)."""
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
        for line, record in read_records(Path(file), lines):
            changes += changes_of(line, record)
    return sorted(changes, key=lambda change: change.line)


def read_records(path: Path, lines: set[int]) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects at `lines` (1-based) of `path`; unreadable ones are left out."""
    found = []
    last = max(lines)
    try:
        with open(path, encoding="utf-8") as handle:
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
