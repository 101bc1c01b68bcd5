"""The engine: finds transcript files and reads their records with DuckDB.

All the files of one format are parsed in one `read_json` call (yyjson, on all cores, straight
into typed columns), which keeps the order of the files and of their lines and yields one row
per line that is not blank. Each file's bytes, read once here, give those rows their line numbers
and their raw text (an Arrow view of the bytes, no copy): SQL checks tool inputs against it (they
are kept as the file spells them), and a row whose format key is missing is checked against its
line: a line that is not a JSON object (a torn last line after a crash, a corrupt one) is
dropped and reported with one `TranscriptWarning` per file naming the line numbers.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from evo_magic.analysis import edges
from evo_magic.analysis.edges import deep_rows, edge_rows
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.formats.registry import HEAD_BYTES, TAIL_BYTES, Sniff, suffixes
from evo_magic.analysis.head import Head

LOG_NAME = "session.jsonl"
BATCH = 16_384
"""Rows per Arrow batch: DuckDB scans the batches of a table in parallel."""
AT_ONCE_BYTES = 8 << 20
"""Below this many bytes of files read, a batch's statements run at once (see `Engine.fetch`):
a load's batches of sessions (`groups.BATCH_BYTES`) are."""


@dataclass
class SourceFile:
    """One file being read: its bytes, and where its non-blank lines start."""

    file_id: int
    path: Path
    data: bytes = field(repr=False)
    bad: list[int] = field(default_factory=list)
    """Line numbers that are not a JSON object (torn, corrupt, or nested too deep)."""
    too_long: list[int] = field(default_factory=list)
    """Line numbers longer than `edges.MAX_LINE_BYTES` (also in `bad`)."""
    bad_usage: list[int] = field(default_factory=list)
    """Line numbers of usage counts that are not counts (set to NA), one entry per count."""
    copy: bool = False
    """Whether its lines differ from the file's (deep lines dropped): read from `data`."""

    def __post_init__(self) -> None:
        self._index()

    def _index(self) -> None:
        """Where the non-blank lines start, their numbers, and the longest line."""
        buffer = np.frombuffer(self.data, dtype=np.uint8)
        starts = np.concatenate(([0], np.flatnonzero(buffer == 10) + 1)).astype(np.int64)
        ends = np.append(starts[1:] - 1, len(self.data))
        numbers = np.arange(1, len(starts) + 1, dtype=np.int64)
        # Blank lines (JSON whitespace only) are not rows of read_json; only a line that does
        # not start with "{" needs a look.
        first = np.zeros(len(starts), dtype=np.uint8)
        filled = starts < ends
        first[filled] = buffer[starts[filled]]
        blank = np.zeros(len(starts), dtype=bool)
        for i in np.flatnonzero(first != ord("{")).tolist():
            blank[i] = not self.data[starts[i] : ends[i]].strip(b" \t\r\n")
        self.numbers, self.starts = numbers[~blank], starts[~blank]
        self.longest = int((ends - starts).max()) if len(starts) else 0

    def drop_deep_lines(self) -> bool:
        """Drop, and count as bad, every line nested deeper than `MAX_DEPTH` (DuckDB's JSON
        functions and Python's decoder refuse them); its other lines keep their numbers. True
        when a line was dropped. Read through a copy (`copy`) from then on."""
        deep = deep_rows(self.data, self.starts, list(range(len(self.starts))))
        self._drop(deep)
        return bool(deep)

    def drop_edge_lines(self) -> None:
        """Before the engine reads the file: drop, and count as bad, every line longer than
        `MAX_LINE_BYTES` (also listed in `too_long`) and every long line nested too deep (see
        `evo_magic.analysis.edges`)."""
        too_long, deep = edge_rows(self.data, self.starts)
        self.too_long += [int(self.numbers[row]) for row in too_long]
        self._drop(sorted(too_long + deep))

    def _drop(self, rows: list[int]) -> None:
        """The file's bytes without the content of `rows` (their newlines kept, so every other
        line keeps its number); the rows' lines counted as bad."""
        if not rows:
            return
        kept, at = [], 0
        for row in rows:
            start = int(self.starts[row])
            end = self.data.find(b"\n", start)
            kept.append(self.data[at:start])
            at = len(self.data) if end < 0 else end
            self.bad.append(int(self.numbers[row]))
        kept.append(self.data[at:])
        self.data, self.copy = b"".join(kept), True
        del kept
        self._index()

    @classmethod
    def read(cls, file_id: int, path: Path) -> SourceFile:
        """The file, its lines at the edges dropped before anything reads them."""
        source = cls(file_id, path, path.read_bytes())
        source.drop_edge_lines()
        return source

    def release(self) -> SourceFile:
        """This file without its bytes (its line numbers stay), once its records are read; a
        copy without its deep lines keeps them (it is what the file's records are read from)."""
        if not self.copy:
            self.data = b""
        return self

    @property
    def name(self) -> str:
        return str(self.path)

    def line(self, row: int) -> bytes:
        """The bytes of the `row`-th non-blank line (0-based), newline included."""
        end = self.starts[row + 1] if row + 1 < len(self.starts) else len(self.data)
        return self.data[int(self.starts[row]) : int(end)]

    def raw(self, count: int) -> pa.Array:
        """The first `count` non-blank lines as text, each up to the start of the next (so with
        its newline and any blank lines after it): a view of the bytes, not a copy."""
        offsets = np.append(self.starts[:count], len(self.data))
        if count < len(self.starts):
            offsets[-1] = self.starts[count]
        return pa.LargeStringArray.from_buffers(
            count, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(self.data)
        )

    def head(self, count: int = 50) -> Head:
        """The first `count` readable records (within the first MiB) and their line numbers,
        each parsed only when it is first looked at (a format is known by its first one or
        two records; parsing fifty long lines per file cost a load a tenth of its time)."""
        return Head(self._head_items(count))

    def _head_items(self, count: int) -> Iterator[tuple[int, dict[str, Any]]]:
        data, starts, numbers = self.data, self.starts.tolist(), self.numbers
        found = 0
        for row, start in enumerate(starts):
            if found >= count or (start > 1 << 20 and found):
                return
            if row >= HEAD_SCAN and not found:  # a JSON document's lines, not JSON lines
                return
            end = starts[row + 1] if row + 1 < len(starts) else len(data)
            line = data[start:end]
            if line.lstrip()[:1] != b"{":  # not an object (a line inside a JSON document)
                continue
            record = _parse(line)
            if record is not None:
                found += 1
                yield int(numbers[row]), record


HEAD_SCAN = 200
"""Lines looked at for a first record: a file none of whose first lines is a JSON object is
not JSON lines (a pretty-printed document has thousands of lines, none of them a record)."""


_GLOB_CHARS = frozenset("*?[]{}\\")
"""Characters that make a name a pattern to DuckDB's file reader."""


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # a line nested too deep is as unreadable as a torn one
        return None
    return record if isinstance(record, dict) else None


_DATABASE: dict[int, duckdb.DuckDBPyConnection] = {}
_ARROW_COPIED = "Arrow output on a DB-API result"


class Engine:
    """A DuckDB connection that reads transcript files and runs SQL over Arrow tables (a
    cursor of one in-memory database per process: opening a database costs more than a load
    of a small file; what a cursor registers is its own). A forked child opens its own."""

    def __init__(self) -> None:
        pid = os.getpid()
        if pid not in _DATABASE:  # a parent's database is left alone: closing it would hang
            _DATABASE[pid] = duckdb.connect()
        self.con = _DATABASE[pid].cursor()
        self._links: str | None = None
        self.at_once = False
        """Whether the statements run now are over a small read (see `fetch`)."""
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute("SET enable_progress_bar = false")
        self.con.execute("SET arrow_large_buffer_size = true")  # large_string, as pandas keeps

    def read(
        self, sources: list[SourceFile], columns: dict[str, Any], select: str, key: str
    ) -> pa.Table:
        """One row per readable record of `sources`, in order: `file_id`, then `select` over
        `read_json` reading `columns` (name -> DuckDB type, or a dict for a struct), then
        `line` and `raw` (the line's text). A row whose `key` is null is checked against its
        line and dropped, as bad, when the line is not a JSON object."""
        self._sized(sources)
        size = max(16 << 20, max(s.longest for s in sources) + 1)
        sql = f"""select file_index as file_id, {select} from read_json(?,
            format = 'newline_delimited', ignore_errors = true, maximum_object_size = {size},
            columns = {_struct(columns)})"""
        table = self.fetch(sql, [self.names(sources)])
        files = table.column("file_id").to_numpy()
        if np.any(np.diff(files) < 0):  # files come in order; be sure
            table = table.take(np.argsort(files, kind="stable"))
            files = table.column("file_id").to_numpy()
        rows = np.bincount(files, minlength=len(sources))
        keep = np.ones(len(files), dtype=bool)
        lines: list[np.ndarray] = []
        raws: list[pa.Array] = []
        at = 0
        for source, count in zip(sources, rows.tolist(), strict=True):
            mine = min(count, len(source.numbers))  # the file may have grown since
            keep[at + mine : at + count] = False
            lines.append(np.pad(source.numbers[:mine], (0, count - mine)))
            raws += [source.raw(mine), pa.nulls(count - mine, pa.large_string())]
            empty = table.column(key).slice(at, mine).is_null().to_numpy(zero_copy_only=False)
            for row in np.flatnonzero(empty).tolist():
                if _parse(source.line(row)) is None:
                    source.bad.append(int(source.numbers[row]))
                    keep[at + row] = False
            at += count
        ids = np.array([s.file_id for s in sources], dtype=np.int64)[files]
        table = table.set_column(0, "file_id", pa.array(ids))  # from the position in `sources`
        table = table.append_column("line", pa.array(np.concatenate(lines), pa.int64()))
        table = table.append_column("raw", pa.chunked_array(raws, pa.large_string()))
        return table if keep.all() else table.filter(keep)

    def fetch(self, sql: str, params: list[Any] | None = None) -> pa.Table:
        """The result of `sql` as an Arrow table in batches (scanned in parallel later).

        After a read of less than `AT_ONCE_BYTES` (`at_once`), run at once (`execute`), not
        as a relation (`sql`): a relation binds its statement once to describe it and again
        to run it, and binding a `read_json` over typed columns costs about what reading a
        small batch does (a third of a small load). Arrow taken from a statement run at once
        is copied once more (DuckDB warns so), which costs more than the bind from a few MB
        of rows on: larger reads run as relations."""
        if not self.at_once:
            return self.con.sql(sql, params=params).to_arrow_table(BATCH)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _ARROW_COPIED, UserWarning)
            return self.con.execute(sql, params).to_arrow_table(BATCH)

    def _sized(self, sources: list[SourceFile]) -> None:
        self.at_once = sum(len(s.data) for s in sources) < AT_ONCE_BYTES

    def query(self, sql: str, **tables: Any) -> pa.Table:
        """Run `sql` with `tables` (Arrow tables) registered under their names."""
        for name, table in tables.items():
            self.con.register(name, table)
        try:
            return self.fetch(sql)
        finally:
            for name in tables:
                self.con.unregister(name)

    def detected(self, sources: list[SourceFile]) -> pa.Table:
        """Every readable record of `sources` with the schema DuckDB detects over all of them,
        lightly flattened: scalar fields as they are, the scalar keys of nested objects as
        `<field>_<key>`, lists and deeper objects left out, a field whose type varies kept
        where it is a string; with each record's `file_id` and `line`. Text is never read as
        a date."""
        self._sized(sources)
        size = max(16 << 20, max(s.longest for s in sources) + 1)
        reader = f"""read_json(?, format = 'newline_delimited', ignore_errors = true,
            maximum_object_size = {size}{{}})"""
        params = [self.names(sources)]
        detect = ", sample_size = -1, maximum_depth = 3, union_by_name = true, "
        detect += "timestampformat = 'x', dateformat = 'x'"
        relation = self.con.sql(f"select * from {reader.format(detect)}", params=params)
        types, picks = {}, []  # the second read is told the types: no second detection
        for name, kind in zip(relation.columns, relation.types, strict=True):
            fields = kind.children if kind.id == "struct" else [(None, kind)]
            kept = {}
            for child, inner in fields:
                path = f'"{name}"' + (f'."{child}"' if child else "")
                column = _scalar_sql(path, inner)
                if column:
                    kept[child] = str(inner)
                    picks.append(f'{column} as "{name}' + (f"_{child}" if child else "") + '"')
            if kept:
                types[name] = kept if kind.id == "struct" else kept[None]
        columns = ", ".join(["file_index as file_id", *picks])
        reader = reader.format(f", columns = {_struct(types)}" if types else "")
        table = self.fetch(f"select {columns} from {reader}", params)
        files = table.column("file_id").to_numpy()
        rows = np.bincount(files, minlength=len(sources)).tolist()
        lines = [
            np.pad(s.numbers[:n], (0, max(0, n - len(s.numbers))))
            for s, n in zip(sources, rows, strict=True)
        ]
        ids = np.array([s.file_id for s in sources], dtype=np.int64)[files]
        table = table.set_column(0, "file_id", pa.array(ids))
        return table.append_column("line", pa.array(np.concatenate(lines), pa.int64()))

    def names(self, sources: list[SourceFile]) -> list[str]:
        """The names to give `read_json` for `sources`, each naming that file and no other.
        DuckDB reads every name as a glob pattern: a folder called `run*` or `q[ab]` would
        match other files, so such a file is read through a link of a plain name."""
        names = []
        for source in sources:
            name = source.name
            if source.copy or set(name) & _GLOB_CHARS:
                if self._links is None:
                    self._links = tempfile.mkdtemp(prefix="evo-magic-read-")
                link = os.path.join(self._links, f"{source.file_id}.jsonl")
                if source.copy:  # its deep lines blanked: DuckDB reads the copy
                    Path(link).write_bytes(source.data)
                elif not os.path.lexists(link):
                    os.symlink(os.path.abspath(name), link)
                name = link
            names.append(name)
        return names

    def close(self) -> None:
        self.con.close()
        if self._links is not None:
            shutil.rmtree(self._links, ignore_errors=True)
            self._links = None


def _scalar_sql(expression: str, kind: Any) -> str | None:
    """SQL for one detected field as a scalar column, or None to leave it out."""
    if kind.id in ("struct", "list", "map", "array", "union"):
        return None
    if str(kind) == "JSON":  # its type varies between records: keep the strings
        return (
            f"case when json_type({expression}) = 'VARCHAR' "
            f"then json_extract_string({expression}, '$') end"
        )
    if kind.id in ("boolean", "bigint", "integer", "ubigint", "double", "float", "decimal"):
        return expression
    return f"{expression}::VARCHAR"


def _struct(columns: dict[str, Any]) -> str:
    """`columns` as DuckDB's `columns = {...}` argument (nested dicts are structs)."""
    items = [f"'{_quote(name)}': '{_quote(duckdb_type(v))}'" for name, v in columns.items()]
    return "{" + ", ".join(items) + "}"


def _quote(text: str) -> str:
    return text.replace("'", "''")


def duckdb_type(value: Any) -> str:
    """A type written as a dict (a struct), a one-item list (a list of it) or a string."""
    if isinstance(value, dict):
        return "STRUCT(" + ", ".join(f'"{k}" {duckdb_type(v)}' for k, v in value.items()) + ")"
    if isinstance(value, list):
        return duckdb_type(value[0]) + "[]"
    return str(value)


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
            endings = ", ".join(f"*{s}" for s in sorted(suffixes()))
            raise TranscriptError(f"no transcript files ({endings}) in {candidate}")
        return found, candidate.is_file()
    if set("*?[") & set(text):
        matches = sorted(glob.glob(str(candidate), recursive=True))
        found = [file for match in matches for file in files_under(Path(match))]
        if not found:
            raise TranscriptError(f"no transcript files match {text!r}")
        return list(dict.fromkeys(found)), False
    raise TranscriptError(f"no such transcript file or directory: {candidate}")


def files_under(path: Path) -> list[Path]:
    """`path` itself if it is a file, else every file below it whose name ends as a registered
    reader's files do (`*.jsonl`, `*.json`, ...; which format each is in is decided by its
    content) except the history snapshots that evo_magic keeps beside each `session.jsonl`
    (they are copies, not records)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    endings = suffixes()
    return sorted(
        p
        for p in path.rglob("*")
        if p.suffix.lower() in endings and p.is_file() and not _is_snapshot(p)
    )


def sniff_file(path: Path) -> Sniff:
    """What a reader's `detect` hook sees of `path`, read from its ends only (its first
    `HEAD_BYTES` and last `TAIL_BYTES`; the first records of its first whole lines)."""
    with open(path, "rb") as handle:
        head = handle.read(HEAD_BYTES)
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(len(head), size - TAIL_BYTES))
        tail = head[-TAIL_BYTES:] if size <= len(head) else handle.read(TAIL_BYTES)
    lines = head[: head.rfind(b"\n") + 1] if b"\n" in head else head
    return Sniff(path, head, SourceFile(0, path, lines).head().records, tail)


def _is_snapshot(path: Path) -> bool:
    return path.parent.name == "snapshots" and (path.parent.parent / LOG_NAME).is_file()


def too_deep(error: BaseException) -> bool:
    """Whether `error` is a reader refusing a line nested too deep (DuckDB or Python)."""
    return isinstance(error, RecursionError) or (
        isinstance(error, duckdb.Error) and "recursion depth" in str(error)
    )


def warn_bad_usage(source: SourceFile, stacklevel: int) -> None:
    """One warning naming the file and the lines of its usage counts set to NA."""
    if not source.bad_usage:
        return
    lines = sorted(set(source.bad_usage))
    shown = ", ".join(str(n) for n in lines[:10]) + (", ..." if len(lines) > 10 else "")
    count = len(source.bad_usage)
    warnings.warn(
        f"{source.path}: {count} usage count{'s' if count > 1 else ''} that are not token "
        f"counts (negative, not a whole number, text, or over 10^12) set to NA; line"
        f"{'s' if len(lines) > 1 else ''} {shown}",
        TranscriptWarning,
        stacklevel=stacklevel,
    )


def warn_bad_lines(source: SourceFile, stacklevel: int) -> None:
    """One warning naming the file and its unreadable lines ("2-4, 9", the first ten spans)."""
    if not source.bad:
        return
    bad = sorted(set(source.bad))
    spans: list[str] = []
    start = prev = bad[0]
    for n in [*bad[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    shown = ", ".join(spans[:10]) + (", ..." if len(spans) > 10 else "")
    plural = "s" if len(bad) > 1 else ""
    longer = ""
    if source.too_long:
        lines = ", ".join(str(n) for n in sorted(set(source.too_long))[:10])
        longer = f" (longer than {edges.MAX_LINE_BYTES >> 20} MiB: line {lines})"
    warnings.warn(
        f"{source.path}: skipped {len(bad)} unreadable (torn, corrupt, nested too deep or too "
        f"long) line{plural}: {shown}{longer}",
        TranscriptWarning,
        stacklevel=stacklevel,
    )
