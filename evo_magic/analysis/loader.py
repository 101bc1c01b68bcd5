"""The engine: finds transcript files, reads their lines into DuckDB, checks every line, and lets
each format's reader turn the records into frames.

Each file is read as bytes once; its lines become an Arrow table (file, line number, text) with
no copy, which DuckDB reads in place. DuckDB's JSON functions (yyjson) then check every line and
flatten the messages to one row per block in SQL, on all cores; the per-format readers in
`formats/` decide, from a few columns per record, what each record is and where it sits in its
conversation. Lines that are not a JSON object (a torn last line after a crash, a corrupt one)
are skipped with one `TranscriptWarning` per file naming the line numbers.
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

from evo_magic.analysis.blocks import BLOCKS_SQL, PARTS_SQL, UNIT_COLUMNS, raw_inputs
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning
from evo_magic.analysis.frames import (
    BLOCK_COLUMNS,
    PART_COLUMNS,
    arrow_schema,
    empty_table,
)

_GLOB_CHARS = frozenset("*?[")
_HEAD_LINES = 50
"""A file's format is judged by its first readable records (up to this many)."""
LOG_NAME = "session.jsonl"


@dataclass
class SourceFile:
    """One file being read: its id in the `lines` table and its bytes."""

    file_id: int
    path: Path
    data: bytes
    bad: list[int] = field(default_factory=list)
    """Line numbers that are not a JSON object (torn or corrupt)."""

    @property
    def name(self) -> str:
        return str(self.path)

    def head(self, count: int = _HEAD_LINES) -> list[tuple[int, dict[str, Any]]]:
        """The first `count` readable records and their line numbers."""
        found: list[tuple[int, dict[str, Any]]] = []
        bad = set(self.bad)
        head = self.data[: 1 << 20]  # a file's first MiB, or its first line if longer
        if b"\n" not in head:
            head = self.data.split(b"\n", 1)[0]
        for number, line in enumerate(head.split(b"\n"), 1):
            if number in bad or not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                found.append((number, record))
                if len(found) >= count:
                    break
        return found


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
    """The lines of some files in DuckDB, and the SQL helpers the format readers share."""

    def __init__(self, files: list[SourceFile]):
        self.files = files
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute("SET enable_progress_bar = false")
        self.lines = _lines_table(files)
        self.con.register("lines", self.lines)
        self._check_lines()

    def _check_lines(self) -> None:
        """Mark every line that is a JSON object `ok`; note the others that are not blank as
        bad, per file (blankness is only checked on lines that are not JSON)."""
        ok = self.con.sql(
            """select case when json_valid(text)
                then starts_with(text, '{') or json_type(text) = 'OBJECT' else false end as ok
            from lines"""
        ).to_arrow_table()
        self.lines = self.lines.append_column("ok", ok.column("ok").combine_chunks())
        self.con.unregister("lines")
        self.con.register("lines", self.lines)
        bad = self.query(
            """select file_id, line from lines
            where not ok and trim(text, ' ' || chr(9) || chr(10) || chr(13)) <> ''"""
        )
        by_file = {f.file_id: f for f in self.files}
        for file_id, line in zip(
            bad.column("file_id").to_pylist(), bad.column("line").to_pylist(), strict=True
        ):
            by_file[file_id].bad.append(line)

    def query(self, sql: str, **tables: Any) -> pa.Table:
        """Run `sql` with `tables` (Arrow tables) registered under their names."""
        for name, table in tables.items():
            self.con.register(name, table)
        try:
            return self.con.sql(sql).to_arrow_table()
        finally:
            for name in tables:
                self.con.unregister(name)

    def execute(self, sql: str, **tables: Any) -> None:
        """Run a statement (e.g. `create temp table ...`) with `tables` registered."""
        for name, table in tables.items():
            self.con.register(name, table)
        try:
            self.con.execute(sql)
        finally:
            for name in tables:
                self.con.unregister(name)

    def readable(self, file_ids: list[int], columns: str) -> str:
        """SQL selecting file_id, line and `columns` (SQL over `text`, the line) of every
        readable record of the files, in file order."""
        listed = ", ".join(str(int(i)) for i in file_ids) or "-1"
        return f"""select file_id, line, {columns} from (
                select file_id, line, case when ok then text else '{{}}' end as text
                from lines where ok and file_id in ({listed})
            ) order by file_id, line"""

    def blocks(
        self,
        units: pa.Table,
        compacted: pa.Table | None = None,
        originals: pa.Table | None = None,
    ) -> tuple[pa.Table, pa.Table]:
        """The blocks and parts frames' rows of `units` (see `UNIT_COLUMNS`; plus `ord`, the
        unit's sort group). `compacted` lists (file_id, tool_use_id) or (file_id, segment, epoch,
        message_index, block_index) of blocks a per-call strategy later edited; the tool results
        of `originals` (units too) replace those of the same message and id in `units`."""
        if units.num_rows == 0:
            return empty_table(BLOCK_COLUMNS), empty_table(PART_COLUMNS)
        units = _as_units(units)
        kept = _as_units(originals if originals is not None else units.slice(0, 0))
        rows = self.query(
            f"""with rows as ({BLOCKS_SQL.replace("{units}", "units")}),
            kept_rows as ({BLOCKS_SQL.replace("{units}", "kept")}),
            kept as (
                select any_value(text) as original, file_id, segment, epoch, message_index,
                    tool_use_id
                from kept_rows where block_type = 'tool_result' group by all
            ),
            named as (
                select file_id, agent_id, tool_use_id, any_value(tool_name) as named
                from rows where block_type = 'tool_use' group by all
            ),
            by_id as (select distinct file_id, tool_use_id from cleared
                where block_index is null),
            by_place as (select distinct file_id, segment, epoch, message_index, block_index
                from cleared where block_index is not null)
            select r.* exclude (tool_name, timestamp, ord, text, chars, status),
                coalesce(k.original, r.text) as text,
                coalesce(length(k.original), r.chars) as chars,
                coalesce(r.status, case when r.block_type = 'tool_result'
                    then case when r.is_error then 'error' else 'ok' end end) as status,
                coalesce(r.tool_name, n.named) as tool_name,
                try_cast(r.timestamp as TIMESTAMPTZ) as timestamp,
                (r.block_type = 'tool_result' and i.tool_use_id is not null)
                    or p.block_index is not null as compacted
            from rows r
            left join kept k on r.block_type = 'tool_result' and k.file_id = r.file_id
                and k.segment = r.segment and k.epoch = r.epoch
                and k.message_index = r.message_index and k.tool_use_id = r.tool_use_id
            left join named n on r.block_type = 'tool_result' and n.file_id = r.file_id
                and n.agent_id is not distinct from r.agent_id and n.tool_use_id = r.tool_use_id
            left join by_id i on i.file_id = r.file_id and i.tool_use_id = r.tool_use_id
            left join by_place p on p.file_id = r.file_id and p.segment = r.segment
                and p.epoch = r.epoch and p.message_index = r.message_index
                and p.block_index = r.block_index
            order by r.file_id, r.agent_id nulls first, r.ord, r.segment, r.epoch,
                r.message_index, r.block_index, r.line""",
            units=units,
            kept=kept,
            cleared=_edits_table(compacted if compacted is not None else _NO_EDITS),
        )
        rows = self._respell(rows)
        parts = self.query(PARTS_SQL.replace("{rows}", "rows"), rows=rows)
        return conform(rows, BLOCK_COLUMNS), conform(parts, PART_COLUMNS)

    def _respell(self, rows: pa.Table) -> pa.Table:
        """Tool inputs whose file spelling differs from DuckDB's canonical JSON (another writer's
        escapes or number format): replaced by the file's own bytes."""
        flagged = np.flatnonzero(rows.column("respelled").to_numpy(zero_copy_only=False))
        if len(flagged) == 0:
            return rows
        texts = rows.column("text").to_pylist()
        data = {f.file_id: f.data.split(b"\n") for f in self.files}
        cache: dict[tuple[int, int, str], list[bytes] | None] = {}
        file_ids, lines = rows.column("file_id"), rows.column("line")
        paths, firsts, indices = (
            rows.column("path"),
            rows.column("first_block"),
            rows["block_index"],
        )
        for row in flagged.tolist():
            key = (file_ids[row].as_py(), lines[row].as_py(), paths[row].as_py())
            if key not in cache:
                cache[key] = raw_inputs(data[key[0]][key[1] - 1], key[2])
            inputs = cache[key]
            k = indices[row].as_py() - firsts[row].as_py()
            if inputs is not None and 0 <= k < len(inputs) and inputs[k] is not None:
                texts[row] = inputs[k].decode("utf-8")
        position = rows.column_names.index("text")
        column = pa.array(texts, pa.large_string())
        rows = rows.set_column(position, "text", column)
        lengths = pc.utf8_length(column)
        chars = rows.column("chars")
        fixed = pc.if_else(pc.is_null(chars), chars, lengths.cast(pa.int64()))
        return rows.set_column(rows.column_names.index("chars"), "chars", fixed)

    def close(self) -> None:
        self.con.close()


_NO_EDITS = pa.table(
    {
        "file_id": pa.array([], pa.int32()),
        "tool_use_id": pa.array([], pa.string()),
        "segment": pa.array([], pa.int64()),
        "epoch": pa.array([], pa.int64()),
        "message_index": pa.array([], pa.int64()),
        "block_index": pa.array([], pa.int64()),
    }
)


def _edits_table(table: pa.Table) -> pa.Table:
    columns = {}
    for name in _NO_EDITS.column_names:
        kind = _NO_EDITS.schema.field(name).type
        if name in table.column_names:
            columns[name] = table.column(name).cast(kind)
        else:
            columns[name] = pa.nulls(table.num_rows, kind)
    return pa.table(columns)


_UNIT_TYPES = {
    "file_id": pa.int32(),
    "line": pa.int64(),
    "first_block": pa.int64(),
    "sidechain": pa.bool_(),
    "seq": pa.int64(),
    "turn": pa.int64(),
    "epoch": pa.int64(),
    "segment": pa.int64(),
    "message_index": pa.int64(),
    "abandoned": pa.bool_(),
    "ord": pa.int64(),
}


def _as_units(table: pa.Table) -> pa.Table:
    """`table` with every unit column, typed (a missing one is null)."""
    columns = {}
    for name in (*UNIT_COLUMNS, "ord"):
        kind = _UNIT_TYPES.get(name, pa.string())
        if name in table.column_names:
            columns[name] = table.column(name).cast(kind)
        else:
            columns[name] = pa.nulls(table.num_rows, kind)
    return pa.table(columns)


def conform(table: pa.Table, spec: dict[str, str]) -> pa.Table:
    """`table` with exactly the columns of `spec`, in order and of the frame's Arrow types."""
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


def _lines_table(files: list[SourceFile]) -> pa.Table:
    """(file_id, line, text) of every line of every file; each text keeps its newline. The
    strings are views of the files' bytes (no copy) unless a file is not valid UTF-8, whose
    undecodable lines become empty and are marked bad."""
    tables = []
    for source in files:
        data = source.data
        buffer = np.frombuffer(data, dtype=np.uint8)
        starts = np.concatenate(([0], np.flatnonzero(buffer == 10) + 1)).astype(np.int64)
        if len(starts) and starts[-1] == len(data):
            starts = starts[:-1]
        offsets = np.append(starts, len(data)).astype(np.int64)
        count = len(starts)
        text = pa.LargeStringArray.from_buffers(
            count, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)
        )
        try:
            text.validate(full=True)
        except pa.ArrowInvalid:
            text, undecodable = _decoded(data)
            source.bad.extend(undecodable)
        numbers = pa.array(np.arange(1, count + 1, dtype=np.int64))
        ids = pa.array(np.full(count, source.file_id, dtype=np.int32))
        tables.append(pa.table({"file_id": ids, "line": numbers, "text": text}))
    if not tables:
        return pa.table(
            {
                "file_id": pa.array([], pa.int32()),
                "line": pa.array([], pa.int64()),
                "text": pa.array([], pa.large_string()),
            }
        )
    return pa.concat_tables(tables)


def _decoded(data: bytes) -> tuple[pa.Array, list[int]]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    texts, bad = [], []
    for number, line in enumerate(lines, 1):
        try:
            texts.append(line.decode("utf-8") + "\n")
        except UnicodeDecodeError:
            texts.append("")
            bad.append(number)
    return pa.array(texts, pa.large_string()), bad


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
