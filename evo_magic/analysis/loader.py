"""The engine: finds transcript files and reads their records with DuckDB.

Each file is parsed once by DuckDB's own JSON reader (`read_json`: yyjson, on all cores, straight
into typed columns), with the fields a format asks for: a few per record, and each message's
blocks as a list of typed structs computed in the same pass (blocks.py). The reader keeps the
order of the file and yields one row per line that is not blank; the file's bytes, read once
here, give each row its line number, and a row with nothing in it is checked against its line:
a line that is not a JSON object (a torn last line after a crash, a corrupt one) is dropped and
reported with one `TranscriptWarning` per file naming the line numbers.
"""

from __future__ import annotations

import glob
import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.frames import arrow_schema

_GLOB_CHARS = frozenset("*?[")
_HEAD_LINES = 50
"""A file's format is judged by its first readable records (up to this many)."""
LOG_NAME = "session.jsonl"


@dataclass
class SourceFile:
    """One file being read: its bytes and where its lines are."""

    file_id: int
    path: Path
    data: bytes
    bad: list[int] = field(default_factory=list)
    """Line numbers that are not a JSON object (torn or corrupt)."""
    numbers: np.ndarray = field(init=False, repr=False)
    """1-based numbers of the lines that are not blank: the rows of `read_json`."""
    starts: np.ndarray = field(init=False, repr=False)
    ends: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        buffer = np.frombuffer(self.data, dtype=np.uint8)
        breaks = np.flatnonzero(buffer == 10)
        starts = np.concatenate(([0], breaks + 1)).astype(np.int64)
        ends = np.append(breaks, len(self.data)).astype(np.int64)
        numbers = np.arange(1, len(starts) + 1, dtype=np.int64)
        # A line is blank when it holds only JSON whitespace; only lines that do not start
        # with "{" need a look.
        first = np.full(len(starts), 0, dtype=np.uint8)
        filled = starts < ends
        first[filled] = buffer[starts[filled]]
        suspects = np.flatnonzero(first != ord("{"))
        blank = np.zeros(len(starts), dtype=bool)
        for i in suspects.tolist():
            blank[i] = not self.data[starts[i] : ends[i]].strip(b" \t\r\n")
        keep = ~blank
        self.numbers, self.starts, self.ends = numbers[keep], starts[keep], ends[keep]

    @property
    def name(self) -> str:
        return str(self.path)

    def line(self, number: int) -> bytes:
        """The bytes of line `number` (1-based), without its newline."""
        at = int(np.searchsorted(self.numbers, number))
        return self.data[int(self.starts[at]) : int(self.ends[at])]

    @property
    def longest(self) -> int:
        return int((self.ends - self.starts).max()) if len(self.ends) else 0

    def head(self, count: int = _HEAD_LINES) -> list[tuple[int, dict[str, Any]]]:
        """The first `count` readable records and their line numbers."""
        found: list[tuple[int, dict[str, Any]]] = []
        for number, start, end in zip(self.numbers, self.starts, self.ends, strict=True):
            if start > 1 << 20 and found:  # the first MiB is enough
                break
            record = _parse(self.data[int(start) : int(end)])
            if record is not None:
                found.append((int(number), record))
                if len(found) >= count:
                    break
        return found


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


@dataclass
class Part:
    """What a format reader produced from its files: Arrow tables of the frames' columns."""

    blocks: list[pa.Table] = field(default_factory=list)
    parts: list[pa.Table] = field(default_factory=list)
    calls: list[pa.Table] = field(default_factory=list)
    compactions: list[pa.Table] = field(default_factory=list)
    identities: list[pa.Table] = field(default_factory=list)
    """Identity, kind, file and line of every record (the leading columns of `events`)."""
    records: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str, count: int = 1) -> None:
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + count


class Engine:
    """A DuckDB connection that reads transcript files and runs SQL over Arrow tables."""

    def __init__(self) -> None:
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute("SET enable_progress_bar = false")

    def read(self, source: SourceFile, columns: dict[str, Any], select: str = "*") -> pa.Table:
        """One row per readable record of `source`, in file order, with its `line`: `select`
        over `read_json` reading `columns` (name -> DuckDB type, or a dict for a struct).
        A row whose `select`ed values are all null is checked against its line, and dropped
        (as bad) when the line is not a JSON object."""
        size = max(16 << 20, source.longest + 1)
        sql = f"""select {select} from read_json(?, format = 'newline_delimited',
            ignore_errors = true, maximum_object_size = {size}, columns = {_struct(columns)})"""
        table = self.con.sql(sql, params=[source.name]).to_arrow_table()
        count = min(table.num_rows, len(source.numbers))  # the file may have grown since
        table = table.slice(0, count).combine_chunks()
        numbers = source.numbers[:count]
        empty = np.ones(count, dtype=bool)
        for column in table.columns:
            empty &= column.is_null().to_numpy(zero_copy_only=False)
        bad = [int(n) for n in numbers[empty] if _parse(source.line(int(n))) is None]
        source.bad.extend(bad)
        table = table.append_column("line", pa.array(numbers, pa.int64()))
        if bad:
            table = table.filter(pc.invert(pc.is_in(table.column("line"), pa.array(bad))))
        return table

    def detected(self, source: SourceFile) -> pa.Table:
        """Every readable record of `source` with the schema DuckDB detects over the whole file,
        lightly flattened: scalar fields as they are, the scalar keys of nested objects as
        `<field>_<key>`, lists and deeper objects left out, a field whose type varies between
        records kept where it is a string; and each record's `line`. Text that looks like a
        date stays text."""
        size = max(16 << 20, source.longest + 1)
        reader = f"""read_json(?, format = 'newline_delimited', ignore_errors = true,
            sample_size = -1, maximum_depth = 3, maximum_object_size = {size},
            timestampformat = 'x', dateformat = 'x')"""
        relation = self.con.sql(f"select * from {reader}", params=[source.name])
        picks = []
        for name, kind in zip(relation.columns, relation.types, strict=True):
            if kind.id == "struct":
                for child, inner in kind.children:
                    column = _scalar_sql(f'"{name}"."{child}"', inner)
                    if column:
                        picks.append(f'{column} as "{name}_{child}"')
            elif column := _scalar_sql(f'"{name}"', kind):
                picks.append(f'{column} as "{name}"')
        picks = picks or ["null as _"]
        table = self.con.sql(
            f"select {', '.join(picks)} from {reader}", params=[source.name]
        ).to_arrow_table()
        count = min(table.num_rows, len(source.numbers))
        table = table.slice(0, count)
        return table.append_column("line", pa.array(source.numbers[:count], pa.int64()))

    def query(self, sql: str, **tables: Any) -> pa.Table:
        """Run `sql` with `tables` (Arrow tables) registered under their names."""
        for name, table in tables.items():
            self.con.register(name, table)
        try:
            return self.con.sql(sql).to_arrow_table()
        finally:
            for name in tables:
                self.con.unregister(name)

    def close(self) -> None:
        self.con.close()


def _scalar_sql(expression: str, kind: Any) -> str | None:
    """SQL for one detected field as a scalar column, or None to leave it out."""
    if kind.id in ("struct", "list", "map", "array", "union"):
        return None
    if str(kind) == "JSON":  # its type varies between records: keep the strings
        return (
            f"case when json_type({expression}) = 'VARCHAR' "
            f"then json_extract_string({expression}, '$') end"
        )
    if kind.id in ("uuid", "hugeint", "uhugeint", "blob", "bit", "interval"):
        return f"{expression}::VARCHAR"
    return expression


def _struct(columns: dict[str, Any]) -> str:
    """`columns` as DuckDB's `columns = {...}` argument (nested dicts are structs)."""

    def kind(value: Any) -> str:
        if isinstance(value, dict):
            inner = ", ".join(f'"{k}" {kind(v)}' for k, v in value.items())
            return f"STRUCT({inner})"
        return str(value)

    return "{" + ", ".join(f"'{name}': '{kind(v)}'" for name, v in columns.items()) + "}"


def conform(table: pa.Table, spec: dict[str, str]) -> pa.Table:
    """`table` with exactly the columns of `spec`, in order and of the frame's Arrow types (a
    missing column is null)."""
    schema = arrow_schema(spec)
    columns = []
    for target in schema:
        if target.name in table.column_names:
            column = table.column(target.name)
            if column.type != target.type:
                column = column.cast(target.type)
        else:
            column = pa.nulls(table.num_rows, target.type)
        columns.append(column)
    return pa.table(columns, schema=schema)


# -- finding files ---------------------------------------------------------------------------


def resolve(path: str | Path) -> tuple[list[Path], bool]:
    """The transcript files that `path` names, in a stable order, and whether `path` named a
    single file; TranscriptError if there are none."""
    text = str(path)
    if not text.strip():
        raise TranscriptError("no transcript path given (an empty string)")
    candidate = Path(text).expanduser()
    if candidate.exists():
        found = files_under(candidate)
        if not found:
            raise TranscriptError(f"no transcript files (*.jsonl) in {candidate}")
        return found, candidate.is_file()
    if _GLOB_CHARS & set(text):
        matches = sorted(glob.glob(str(candidate), recursive=True))
        found = [file for match in matches for file in files_under(Path(match))]
        if not found:
            raise TranscriptError(f"no transcript files match {text!r}")
        return list(dict.fromkeys(found)), False
    raise TranscriptError(f"no such transcript file or directory: {candidate}")


def files_under(path: Path) -> list[Path]:
    """`path` itself if it is a file, else every `*.jsonl` below it except the history snapshots
    that evo_magic keeps beside each `session.jsonl` (they are copies, not records)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.rglob("*.jsonl") if p.is_file() and not _is_snapshot(p))


def _is_snapshot(path: Path) -> bool:
    return path.parent.name == "snapshots" and (path.parent.parent / LOG_NAME).is_file()


def names(files: Iterable[Path]) -> str:
    files = list(files)
    shown = ", ".join(str(f) for f in files[:3])
    return shown + (f" and {len(files) - 3} more" if len(files) > 3 else "")


def spans(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7' (the first ten spans)."""
    result: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        result.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(result[:10]) + (", ..." if len(result) > 10 else "")


def warn_bad_lines(source: SourceFile, stacklevel: int) -> None:
    if source.bad:
        bad = sorted(set(source.bad))
        plural = "s" if len(bad) > 1 else ""
        warnings.warn(
            f"{source.path}: skipped {len(bad)} unreadable (torn or corrupt) line{plural}: "
            f"{spans(bad)}",
            TranscriptWarning,
            stacklevel=stacklevel,
        )
