"""`load_transcripts` and what it returns: `Transcripts`, typed DataFrames of many sessions."""

from __future__ import annotations

import html
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pandas as pd
import pyarrow as pa

from evo_magic.analysis import lake
from evo_magic.analysis.call_costs import Priced, price_calls, session_totals
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.events import events_frame, files_table
from evo_magic.analysis.formats import Part
from evo_magic.analysis.formats.registry import reader
from evo_magic.analysis.frames import (
    FRAMES,
    LEADING,
    to_pandas,
)
from evo_magic.analysis.groups import BATCH_BYTES, batches, groups
from evo_magic.analysis.lake_read import Read
from evo_magic.analysis.loader import (
    Engine,
    SourceFile,
    resolve,
    too_deep,
    warn_bad_lines,
    warn_bad_usage,
)
from evo_magic.analysis.memory import cycles_unchecked, drained, give_back, young_cycles_freed
from evo_magic.analysis.recognition import count_skipped, format_of, recognisable
from evo_magic.analysis.session_index import SessionRows, cut, taken
from evo_magic.cost import price_table

if TYPE_CHECKING:
    from collections.abc import Callable

    from evo_magic.analysis.lake_transcripts import LakeTranscripts
    from evo_magic.cost import Overrides, PriceTable

_HINTS = {
    "blocks": "one row per content block of every message",
    "parts": "one row per part of a tool result whose content is a list",
    "calls": "one row per model call",
    "compactions": "one row per full compaction",
    "events": "one row per record of any kind (built on first use)",
}


@dataclass
class Transcripts:
    """Typed DataFrames of one or more sessions. See docs/transcripts.md for every column."""

    blocks: pd.DataFrame
    """One row per content block of every message of every epoch, agent and branch."""
    calls: pd.DataFrame
    """One row per model call: model, stop reason, usage, cost, duration, context size."""
    compactions: pd.DataFrame
    """One row per full compaction (evo_magic `compaction` records, Claude Code boundaries,
    Codex `compacted` records)."""
    parts: pd.DataFrame = field(default_factory=pd.DataFrame)
    """One row per part (text, image, ...) of a tool result whose content is a list."""
    files: list[Path] = field(default_factory=list)
    """The files read, in order."""
    skipped: dict[str, int] = field(default_factory=dict)
    """What was left out, by reason ("unreadable line", Claude Code record types, ...)."""
    _identities: pa.Table | None = field(default=None, repr=False)
    _sources: list[SourceFile] = field(default_factory=list, repr=False)
    _events: pd.DataFrame | None = field(default=None, repr=False)
    _events_of: Callable[[], pd.DataFrame] | None = field(default=None, repr=False, compare=False)
    """Makes `events` on first use when given (a lake's session: read from the lake)."""
    _rows: SessionRows = field(default_factory=SessionRows, repr=False, compare=False)

    @property
    def sessions(self) -> pd.DataFrame:
        """One row per session: source, calls, cost (NA when a call had no price), calls
        without a price, calls with partial usage, files (`call_costs.session_totals`)."""
        return session_totals(self.calls)

    @property
    def events(self) -> pd.DataFrame:
        """One row per readable record of any kind: the identity columns, `kind`, `file`,
        `line`, then the record's own fields lightly flattened (scalars, and one level of
        nested objects as `<field>_<key>`). Built on first use: the files are read again, for
        the records that were there at load."""
        if self._events is None and self._events_of is not None:
            self._events = self._events_of()
        if self._events is None:
            self._events = events_frame(self._identities, self._sources)
        return self._events

    def session_ids(self) -> list[str]:
        """The sessions' ids, in the order their records were read."""
        if not len(self.blocks):
            return []
        return list(self._rows.positions("blocks", self.blocks))

    def session(self, session_id: str) -> Transcripts:
        """One session's Transcripts (its subagents included): every frame cut to its rows.
        Each frame is scanned once for all its sessions (the first cut builds an index), so
        cutting every session out of the frames is linear in their rows."""
        rows = self._rows
        if not len(self.blocks) or session_id not in rows.positions("blocks", self.blocks):
            raise KeyError(f"no session {session_id!r} in these transcripts")
        identities = self._identities
        names: list[str] = []
        if identities is not None and identities.num_rows:
            positions = rows.table_positions("identities", identities).get(session_id)
            identities = taken(identities, positions)
            names = list(dict.fromkeys(identities.column("file").to_pylist()))
        paths = rows.named("files", self.files, str)
        sources = rows.named("sources", self._sources, lambda source: source.name)
        return Transcripts(
            blocks=cut(rows, "blocks", self.blocks, session_id),
            calls=cut(rows, "calls", self.calls, session_id),
            compactions=cut(rows, "compactions", self.compactions, session_id),
            parts=cut(rows, "parts", self.parts, session_id),
            files=[paths[n] for n in names if n in paths] or list(self.files),
            skipped=dict(self.skipped),
            _identities=identities,
            _sources=[sources[n] for n in names if n in sources],
            _events=cut(rows, "events", self.events, session_id)
            if self._events is not None or self._events_of is not None
            else None,
        )

    def frames(self) -> dict[str, pd.DataFrame]:
        """The frames by name (`events` included only once it has been built)."""
        found = {name: getattr(self, name) for name in FRAMES}
        if self._events is not None:
            found["events"] = self._events
        return found

    def to_parquet(self, directory: str | Path) -> Path:
        """Write every frame (events included) as Parquet under `directory`, partitioned by
        source and session: `<directory>/<frame>/source=<source>/session_id=<id>/*.parquet`.
        Query them with `evo_magic.analysis.lake.connect(directory)`. Returns the directory."""
        frames = {**self.frames(), "events": self.events}
        return lake.write(frames, Path(directory))

    def sql(self, query: str) -> pd.DataFrame:
        """Run a DuckDB SQL query over these frames (`blocks`, `parts`, `calls`, `compactions`,
        `events`) and return the result as a DataFrame."""
        return lake.query({**self.frames(), "events": self.events}, query)

    def _summary(self) -> tuple[int, list[tuple[str, int | None, str]]]:
        """Sessions, and per frame: its name, rows (None: not built yet) and key columns."""
        sessions = 0
        if len(self.blocks):
            sessions = self.blocks["session_id"].nunique()
        frames = self.frames()
        rows = []
        for name in (*FRAMES, "events"):
            frame = frames.get(name)
            count = len(frame) if frame is not None else None
            rows.append((name, count, _key_columns(name, frame)))
        return sessions, rows

    def __repr__(self) -> str:
        sessions, rows = self._summary()
        lines = [f"<Transcripts: {len(self.files)} file(s), {sessions} session(s)"]
        for name, count, columns in rows:
            shown = f"{count:>8,} rows" if count is not None else f"{'(on use)':>13}"
            lines.append(f"  .{name:<12} {shown}  {_HINTS[name]}")
            lines.append(f"  {'':<13} {'':>13}  {columns}")
        if self.skipped:
            lines.append(f"  .skipped      {self.skipped}")
        lines.append("  .sql('select ...'), .to_parquet(dir); every column: docs/transcripts.md>")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        sessions, rows = self._summary()
        body = "".join(
            f"<tr><td><code>.{name}</code></td><td style='text-align:right'>"
            f"{'' if count is None else f'{count:,}'}</td><td>{html.escape(_HINTS[name])}</td>"
            f"<td><small>{html.escape(columns)}</small></td></tr>"
            for name, count, columns in rows
        )
        skipped = ""
        if self.skipped:
            items = ", ".join(f"{html.escape(k)}: {v}" for k, v in self.skipped.items())
            skipped = f"<p>Skipped: {items}</p>"
        return (
            f"<div><b>Transcripts</b>: {len(self.files)} file(s), {sessions} session(s)"
            "<table><tr><th>frame</th><th>rows</th><th>what</th>"
            "<th>the columns to look at first</th></tr>"
            f"{body}</table>{skipped}<p>Every frame also has where each row comes from: source, "
            "session_id, agent_id, sidechain, seq, timestamp, turn, epoch, segment, file, line. "
            "SQL over all frames: <code>t.sql('select ...')</code>; Parquet: "
            "<code>t.to_parquet(dir)</code>; every column: docs/transcripts.md.</p></div>"
        )


def _key_columns(name: str, frame: pd.DataFrame | None) -> str:
    """ "a, b, c (+ N more)": the frame's leading columns, as many as it has."""
    leading = [c for c in LEADING[name] if frame is None or c in frame.columns]
    more = len(frame.columns) - len(leading) if frame is not None else 0
    return ", ".join(leading) + (f" (+ {more} more)" if more > 0 else "")


def load_transcripts(
    path: str | Path,
    lake: str | Path | None = None,
    *,
    prices: PriceTable | Overrides | None = None,
) -> Transcripts | LakeTranscripts:
    """Load transcripts into typed DataFrames.

    `path` is a session directory, a transcripts root, a Claude Code project folder
    (`~/.claude/projects/<project>/`, subagent files included), a Codex sessions folder
    (`~/.codex/sessions/`), a folder of SWE-agent, mini-swe-agent, OpenHands or Inspect AI runs,
    a single file of any of these formats, or a glob pattern. Every file below a directory
    whose name ends as a registered reader's files do (`formats()`) is read (except
    evo_magic's history snapshots), and its format is decided by its content.

    Names are data: every file is read as itself, whatever characters its path holds (only a
    `path` that does not exist is a glob). Torn or corrupt lines, and lines nested too deep to
    read, are skipped with one `TranscriptWarning` per file naming the file, the line numbers
    and the count; so are usage counts that are not counts (set to NA). A file found in a
    folder that is in no known format is skipped with a warning; files without messages
    (empty, a title or session metadata only) give no rows, a `skipped` count and one warning
    for the load. Raises `TranscriptError` when the path does not exist, a glob matches
    nothing, there are no records, a file named on its own is in no known format, or a record
    has a schema version newer than this evo_magic reads.

    With `lake=DIR` the files are parsed once into a lake of Parquet files (built, or brought
    up to date: only new or changed sessions are read, one at a time) and a `LakeTranscripts`
    over it is returned: see `evo_magic.analysis.lake_transcripts`.

    Every call is priced at load (`cost_usd`), by the rule live sessions and replay use, from
    the catalog's prices or ``prices`` (a `PriceTable`, or overrides such as
    ``{"my-model": {"input": 1, "output": 5}}``, USD per million tokens); a cost an evo_magic
    transcript recorded is kept. Calls of a model without a price are NA, with one
    `TranscriptWarning` naming the models; calls whose recorded usage is not the reply's final
    usage (`usage_partial`) are priced as recorded, with one warning saying how many.
    """
    prices = price_table(prices)  # a bad rate is refused before anything is read
    if lake is not None:
        from evo_magic.analysis.lake_read import read_for_lake
        from evo_magic.analysis.lake_transcripts import LakeTranscripts, update_lake

        def read(files: list[Path]) -> Read:
            return read_for_lake(
                files,
                lambda: read_tables(files, single=False, label=str(files[0]), batched=True),
                prices,
            )

        def warned(files: list[Path]) -> Read:  # a later read of a group, on its own
            got = read(files)
            got.priced.warn(stacklevel=6)
            return got

        found = Priced()  # the build's batches, warned about once as a plain load is

        def building(files: list[Path]) -> Read:
            got = read(files)
            found.add(got.priced)
            return got

        update = update_lake(path, lake, building)
        found.warn(stacklevel=2)
        return LakeTranscripts(lake, Transcripts, update, warned, prices=prices)
    files, single = resolve(path)
    return read_files(files, single=single, label=str(path), prices=prices)


def read_files(
    files: list[Path],
    *,
    single: bool,
    label: str,
    prices: PriceTable | Overrides | None = None,
) -> Transcripts:
    """The Transcripts of exactly `files` (see `load_transcripts`; `label` names them in an
    error, `single` says a file was named on its own)."""
    with cycles_unchecked():
        got = read_tables(files, single=single, label=label)
        tables = got.tables
        frames = {name: _concat(tables.pop(name), spec) for name, spec in FRAMES.items()}
    transcripts = Transcripts(
        **frames,
        files=got.files,
        skipped=got.skipped,
        _identities=tables.pop("events"),
        _sources=got.sources,
    )
    transcripts.calls, found = price_calls(transcripts.calls, prices)
    found.warn(stacklevel=4)
    return transcripts


def read_tables(files: list[Path], *, single: bool, label: str, batched: bool = False) -> Read:
    """The rows of exactly `files`, warned about as `read_files` warns (its calls not priced
    yet). `batched`: the files are one batch of whole sessions already (a lake's), read at
    once rather than grouped again."""
    skipped: dict[str, int] = {}
    files = recognisable(files, single, skipped)
    with cycles_unchecked():  # see `cycles_unchecked`: a lake's batches come here directly
        sources, parts = _read_batches(files, single, skipped, batched)
    _note_bad_lines(sources, skipped)
    empty = [s.name for s in sources if len(s.numbers) == 0]
    empty += [name for part in parts for name in part.without_messages]
    _warn_without_messages(empty)
    if sum(part.records for part in parts) == 0 and not empty:
        shown = ", ".join(str(f) for f in files[:3]) + (" and more" if len(files) > 3 else "")
        raise TranscriptError(f"no transcript records in {label} (read {shown})")
    for part in parts:
        for reason, n in part.skipped.items():
            count_skipped(skipped, reason, n)
    return Read(_tables(parts), files, skipped, sources)


def _read_batches(
    files: list[Path], single: bool, skipped: dict[str, int], batched: bool
) -> tuple[list[SourceFile], list[Part]]:
    """Every file read, and the rows of each format together, formats in the order first met
    (as one read gives). A batch of sessions at a time, its files' bytes released once read:
    the memory a load needs beyond its frames is that of one batch, not of the folder."""
    sources: list[SourceFile] = []
    by_kind: dict[str, list[Part]] = {}
    engine = Engine()  # one for every batch: a cursor and its settings cost a batch of few files
    try:
        for batch in [list(range(len(files)))] if batched else _batches(files):
            read = [SourceFile.read(i, files[i]) for i in batch]
            engine.con.register("files", files_table(read))
            for kind, group in _by_format(read, single, skipped).items():
                by_kind.setdefault(kind, []).append(_read(engine, kind, group).settled())
            engine.con.unregister("files")
            sources += [source.release() for source in read]
            del read
            young_cycles_freed()
            give_back()
    finally:
        engine.close()
    return sources, [part for found in by_kind.values() for part in found]


def _by_format(
    sources: list[SourceFile], single: bool, skipped: dict[str, int]
) -> dict[str, list[SourceFile]]:
    """The files of each format (see `recognition.format_of`), formats in the order first
    met."""
    by_format: dict[str, list[SourceFile]] = {}
    for source in sources:
        kind = format_of(source, single, skipped)
        if kind is not None:
            by_format.setdefault(kind, []).append(source)
    return by_format


def _note_bad_lines(sources: list[SourceFile], skipped: dict[str, int]) -> None:
    """A warning per file with unreadable lines or usage counts that are not counts, and their
    counts in `skipped`."""
    for source in sources:
        warn_bad_lines(source, stacklevel=6)
        warn_bad_usage(source, stacklevel=6)
        if source.bad:
            count_skipped(skipped, "unreadable line", len(set(source.bad)))
        if source.bad_usage:
            count_skipped(skipped, "usage count not a count", len(source.bad_usage))


def _tables(parts: list[Part]) -> dict[str, pa.Table | None]:
    """Each frame's table of the formats' `parts` (the list emptied: each frame's tables are
    then held once, and converting one frees them)."""
    tables = {name: [getattr(part, name) for part in parts] for name in (*FRAMES, "events")}
    parts.clear()
    events = tables.pop("events")
    found: dict[str, pa.Table | None] = {name: drained(tables.pop(name)) for name in FRAMES}
    found["events"] = pa.concat_tables(events, promote_options="permissive") if events else None
    return found


def _batches(files: list[Path]) -> list[list[int]]:
    """The positions of `files` in batches of whole sessions (see `evo_magic.analysis.groups`),
    in order. When a session's files are not consecutive, one batch: the rows follow the
    order of the files."""
    if len(files) < 2:
        return [list(range(len(files)))]
    position = {file: i for i, file in enumerate(files)}
    grouped = [[position[file] for file in members] for _, members in groups(files)]
    sizes = [sum(files[i].stat().st_size for i in group) for group in grouped]
    packed = [
        sorted(i for group in batch for i in grouped[group])
        for batch in batches(list(range(len(grouped))), sizes.__getitem__, BATCH_BYTES)
    ]
    if [i for batch in packed for i in batch] != list(range(len(files))):
        return [list(range(len(files)))]
    return packed


def _warn_without_messages(names: list[str]) -> None:
    """One warning for every file that held no message (empty, a title only, metadata only):
    they give no rows, which should not pass unnoticed."""
    if not names:
        return
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    plural = "s" if len(names) > 1 else ""
    warnings.warn(
        f"{len(names)} file{plural} without messages (empty, a title or session metadata "
        f"only) gave no rows: {shown} (counted in .skipped)",
        TranscriptWarning,
        stacklevel=5,  # the caller of `read_files`, through `read_tables`
    )


def _read(engine: Engine, kind: str, sources: list[SourceFile]) -> Part:
    """The rows of `sources` (all of format `kind`). A line nested deeper than the readers go
    is found only when a reader refuses it (looking for one costs a pass over every byte):
    then such lines are dropped and counted as unreadable, and the files read again."""
    read = reader(kind).read
    try:
        return read(engine, sources)
    except (RecursionError, duckdb.Error) as error:
        dropped = [source.drop_deep_lines() for source in sources] if too_deep(error) else []
        if not any(dropped):
            raise
    return read(engine, sources)


def _concat(table: pa.Table | None, spec: dict[str, str]) -> pd.DataFrame:
    """One frame of the batches' `table` (the caller holds it no more: the frame owns what it
    keeps of it)."""
    frame = to_pandas(table, spec)
    young_cycles_freed()
    give_back()
    return frame


def sql(sql_text: str, where: Transcripts | str | Path) -> pd.DataFrame:
    """Run a DuckDB SQL query over the frames (`blocks`, `parts`, `calls`, `compactions`,
    `events`) of `where` and return a DataFrame. `where` is a `Transcripts`, a lake directory
    (written by `Transcripts.to_parquet`), or any path `load_transcripts` accepts (loaded
    first)."""
    if isinstance(where, Transcripts):
        return where.sql(sql_text)
    root = Path(where).expanduser()
    if lake.has_lake(root):
        if "events" in sql_text.lower():  # a lake's events read their own fields on first use
            from evo_magic.analysis.lake_events import complete_lake

            complete_lake(root)
        con = lake.connect(root)
        try:
            return con.sql(sql_text).df()
        finally:
            con.close()
    return load_transcripts(where).sql(sql_text)
