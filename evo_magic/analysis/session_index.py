"""Where each session's rows are in a frame, found in one pass: cutting every session out of
loaded frames costs one scan of each frame, not one scan per session.

A sweep over n sessions cuts n sessions out of the same frames; masking a whole frame for each
was quadratic (14 ms a session at 22 sessions, 300 ms at 2,200). The index is built the first
time a frame is cut and kept while that same frame object is in place; a frame replaced by
another object is indexed again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa


@dataclass
class SessionRows:
    """Row positions of each session in each frame it was asked about."""

    _by_frame: dict[str, tuple[int, dict[str, np.ndarray]]] = field(default_factory=dict)
    _names: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    rows_scanned: int = 0
    """Rows looked at to build the index so far: each row of each frame once (a test counts
    it to keep the cut linear)."""

    def positions(self, name: str, frame: pd.DataFrame) -> dict[str, np.ndarray]:
        """session id -> the positions of its rows in `frame`, in their order."""
        kept = self._by_frame.get(name)
        if kept is not None and kept[0] == id(frame):
            return kept[1]
        found = _grouped(frame["session_id"].astype(object).to_numpy())
        self.rows_scanned += len(frame)
        self._by_frame[name] = (id(frame), found)
        return found

    def table_positions(self, name: str, table: pa.Table) -> dict[str, np.ndarray]:
        """The same for an Arrow table's `session_id` column."""
        kept = self._by_frame.get(name)
        if kept is not None and kept[0] == id(table):
            return kept[1]
        column = table.column("session_id").cast(pa.string())
        found = _grouped(np.asarray(column.to_pylist(), dtype=object))
        self.rows_scanned += table.num_rows
        self._by_frame[name] = (id(table), found)
        return found

    def named(self, name: str, items: list[Any], key: Callable[[Any], str]) -> dict[str, Any]:
        """`items` by `key(item)` (the first of each), kept while the same list is in place."""
        kept = self._names.get(name)
        if kept is not None and kept[0] == id(items):
            return kept[1]
        found: dict[str, Any] = {}
        for item in items:
            found.setdefault(key(item), item)
        self._names[name] = (id(items), found)
        return found


def cut(rows: SessionRows, name: str, frame: pd.DataFrame, session_id: str) -> pd.DataFrame:
    """`frame`'s rows of `session_id`, renumbered from 0 (a frame without sessions as it is)."""
    if not len(frame) or "session_id" not in frame.columns:
        return frame
    positions = rows.positions(name, frame).get(session_id)
    if positions is None:
        return frame.iloc[0:0].reset_index(drop=True)
    first, last = int(positions[0]), int(positions[-1])
    if last - first + 1 == len(positions):
        # A session's rows are usually in one run (a load reads whole sessions): a slice
        # costs nothing per column, where a take on Arrow-backed columns costs about a
        # millisecond a column whatever it takes, and grows with the frame's chunks.
        return frame.iloc[first : last + 1].reset_index(drop=True)
    return frame.iloc[positions].reset_index(drop=True)


def taken(table: pa.Table, positions: np.ndarray | None) -> pa.Table:
    """`table`'s rows at `positions` (none: no rows), a slice when they are one run."""
    if positions is None or not len(positions):
        return table.slice(0, 0)
    first, last = int(positions[0]), int(positions[-1])
    if last - first + 1 == len(positions):
        # A take on a table of many chunks costs milliseconds whatever it takes.
        return table.slice(first, len(positions))
    return table.take(pa.array(positions, type=pa.int64()))


def _grouped(values: np.ndarray) -> dict[str, np.ndarray]:
    """Positions of each distinct non-missing value, in first-seen order of the values."""
    codes, uniques = pd.factorize(values)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    skipped = int((codes < 0).sum())  # missing ids sort first
    bounds = np.cumsum(counts) + skipped
    starts = bounds - counts
    return {
        str(value): order[start:end]
        for value, start, end in zip(uniques, starts, bounds, strict=True)
    }
