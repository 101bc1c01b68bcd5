"""What a lake's build reads of a batch of files: the read's Arrow tables as the lake keeps
them (`stored`), with the records' own fields of the events read by DuckDB in a thread of their
own while the batch's records are parsed (`read_for_lake`): DuckDB works without Python's lock,
so the two overlap, and the events cost a build little beyond the load."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from evo_magic.analysis.call_costs import price_calls
from evo_magic.analysis.errors import TranscriptError
from evo_magic.analysis.events import Fields, event_fields, events_table
from evo_magic.analysis.frames import FRAMES, to_pandas, typed
from evo_magic.analysis.lake_manifest import prices_mark
from evo_magic.analysis.loader import SourceFile

if TYPE_CHECKING:
    from evo_magic.cost import Overrides, PriceTable


@dataclass
class Read:
    """What reading files gave before its frames are DataFrames (a lake writes them as they
    are): each frame's rows as one Arrow table (None: no rows; `events`: every record's
    identity), the files read, what was left out, and the files' sources (which
    `events_table` reads again)."""

    tables: dict[str, pa.Table | None]
    files: list[Path]
    skipped: dict[str, int]
    sources: list[SourceFile]
    prices: str = ""
    """The mark of the prices the calls were priced at (`lake_manifest.prices_mark`; "": not
    priced)."""


def stored(got: Read, prices: PriceTable | Overrides | None, fields: Fields | None) -> Read:
    """`got` as a lake keeps it: every frame's table typed as its frame (`frames.typed`), the
    calls priced (as `read_files` prices them) and `events` the events' rows, not only their
    identities (`events_table`, given the `fields` read already, if any)."""
    tables = got.tables
    if tables["calls"] is not None:
        calls, found = price_calls(to_pandas(tables.pop("calls"), FRAMES["calls"]), prices)
        found.warn(stacklevel=5)
        tables["calls"] = pa.Table.from_pandas(calls, preserve_index=False)
    got.prices = prices_mark(prices)
    for name, spec in FRAMES.items():
        tables[name] = None if tables[name] is None else typed(tables[name], spec)
    events, spec = events_table(tables.pop("events"), got.sources, fields)
    tables["events"] = None if events is None else typed(events, spec)
    return got


def read_for_lake(
    files: list[Path], read: Callable[[], Read], prices: PriceTable | Overrides | None
) -> Read:
    """`read()` (the Read of exactly `files`) as a lake keeps it (`stored`), the events' own
    fields of the files read meanwhile in a thread."""
    with ThreadPoolExecutor(1, thread_name_prefix="evo-lake-events") as pool:
        early = pool.submit(_fields_of, files)
        got = read()
        return stored(got, prices, _result(early))


def _fields_of(files: list[Path]) -> Fields | None:
    """The own fields of the records of the JSON-lines `files` (None: none, or one could not be
    read: then the events are read after the load, as without a lake)."""
    try:
        sources = [
            SourceFile.read(i, file)
            for i, file in enumerate(files)
            if file.suffix.lower() == ".jsonl"
        ]
        return event_fields(sources) if sources else None
    except (OSError, RecursionError, TranscriptError, duckdb.Error, pa.ArrowException):
        return None


def _result(early: Future[Fields | None]) -> Fields | None:
    with contextlib.suppress(Exception):  # whatever it was, the events are read again after
        return early.result()
    return None
