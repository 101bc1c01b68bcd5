"""What a lake's build reads of a batch of files: the read's Arrow tables as the lake keeps
them (`stored`). The events are their records' identities, as a load without a lake keeps
them until `events` is asked for: their own fields are read on first use (`lake_events`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from evo_magic.analysis.call_costs import Priced, price_calls
from evo_magic.analysis.events import events_table
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
    priced: Priced = field(default_factory=Priced)
    """What pricing the calls found (models without a price, partial usage): not warned
    about here, so that a build of many batches warns once."""


def stored(got: Read, prices: PriceTable | Overrides | None) -> Read:
    """`got` as a lake keeps it: every frame's table typed as its frame (`frames.typed`), the
    calls priced (as `read_files` prices them, what pricing found kept in `priced` for the
    caller to warn about) and `events` the records' identities (with the
    fields a reader of whole documents gives with them; see `lake_events`)."""
    tables = got.tables
    if tables["calls"] is not None:
        calls, got.priced = price_calls(to_pandas(tables.pop("calls"), FRAMES["calls"]), prices)
        tables["calls"] = pa.Table.from_pandas(calls, preserve_index=False)
    got.prices = prices_mark(prices)
    for name, spec in FRAMES.items():
        tables[name] = None if tables[name] is None else typed(tables[name], spec)
    events, spec = events_table(tables.pop("events"), [])  # no file read again here
    tables["events"] = None if events is None else typed(events, spec)
    return got


def read_for_lake(
    files: list[Path], read: Callable[[], Read], prices: PriceTable | Overrides | None
) -> Read:
    """`read()` (the Read of exactly `files`) as a lake keeps it (`stored`)."""
    return stored(read(), prices)
