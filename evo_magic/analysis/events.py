"""The events frame: one row per readable record of any kind, its identity (from the load)
then its own fields (the files read again by DuckDB with their schema detected)."""

from __future__ import annotations

import duckdb
import pandas as pd
import pyarrow as pa

from evo_magic.analysis.frames import EVENT_COLUMNS, to_pandas
from evo_magic.analysis.loader import Engine, SourceFile, too_deep

Fields = tuple[pa.Table, list[SourceFile]]
"""Records' own fields (`event_fields`), and the sources they were read from."""

_CATEGORICAL_FIELDS = frozenset(
    {"name", "model", "reason", "trigger", "code", "type", "subtype", "role", "kind", "strategy"}
)


def events_frame(identities: pa.Table | None, sources: list[SourceFile]) -> pd.DataFrame:
    """The identity of every record, then its own fields (see `events_table`)."""
    table, spec = events_table(identities, sources)
    return to_pandas(table, spec)


def events_table(
    identities: pa.Table | None, sources: list[SourceFile], fields: Fields | None = None
) -> tuple[pa.Table | None, dict[str, str]]:
    """The events' rows, and the dtypes of their frame: the identity of every record, then its
    own fields, the files read again by DuckDB with their schema detected (nested objects to
    one level; lists left out); a record's line is known from the load, and lines added since
    are left out. `fields`: those of the same files, read already (`event_fields`); read
    here when they are of other files."""
    if identities is None or identities.num_rows == 0:
        return None, EVENT_COLUMNS
    names = set(identities.column("file").to_pylist())
    # Only JSON-lines files are read again; a reader of whole documents (or zips) gives the
    # fields of its events with their identities.
    sources = [s for s in sources if s.name in names and s.path.suffix.lower() == ".jsonl"]
    if not sources:
        table = identities
        extra = [n for n in table.column_names if n not in EVENT_COLUMNS]
        return table, {**EVENT_COLUMNS, **{n: _dtype(n, table.column(n).type) for n in extra}}
    if fields is None or [s.name for s in fields[1]] != [s.name for s in sources]:
        fields = event_fields(sources)
    found, sources = fields
    own = [n for n in found.column_names if n not in EVENT_COLUMNS and n != "file_id"]
    picked = ", ".join(f'd."{n}"' for n in own)
    engine = Engine()
    try:
        engine.con.register("files", files_table(sources))
        table = engine.query(
            f"""select i.* exclude (n){", " + picked if picked else ""} from (
                select *, row_number() over () as n from identities) i
            left join (select * from fields join files using (file_id)) d using (file, line)
            order by i.n""",
            identities=identities,
            fields=found,
        )
    finally:
        engine.close()
    spec = {name: _dtype(name, table.column(name).type) for name in own}
    return table, {**EVENT_COLUMNS, **spec}


def event_fields(sources: list[SourceFile]) -> Fields:
    """The records' own fields of `sources` (`Engine.detected`), and the sources they were
    read from (a copy without its lines nested too deep for DuckDB where one has such lines)."""
    engine = Engine()
    try:
        try:
            return engine.detected(sources), sources
        except (RecursionError, duckdb.Error) as error:
            # A line readable at load but nested too deep for DuckDB's JSON functions.
            if not too_deep(error):
                raise
            sources = [_without_deep_lines(source) for source in sources]
            return engine.detected(sources), sources
    finally:
        engine.close()


def _without_deep_lines(source: SourceFile) -> SourceFile:
    """`source` read again, its lines nested too deep blanked (its line numbers kept)."""
    if source.copy:
        return source
    fresh = SourceFile.read(source.file_id, source.path)
    fresh.drop_deep_lines()
    return fresh


def _dtype(name: str, kind: pa.DataType) -> str:
    """The dtype of a record's field: boolean, Int64, Float64, category (names) or string."""
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_integer(kind):
        return "Int64"
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return "Float64"
    if name.rpartition("_")[2] in _CATEGORICAL_FIELDS:
        return "category"
    return "string"


def files_table(sources: list[SourceFile]) -> pa.Table:
    """Each file's id, name, and directory name (an evo_magic session's default id)."""
    return pa.table(
        {
            "file_id": pa.array([s.file_id for s in sources], pa.int64()),
            "file": pa.array([s.name for s in sources], pa.large_string()),
            "directory": pa.array([s.path.parent.name for s in sources], pa.large_string()),
        }
    )
