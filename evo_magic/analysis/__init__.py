"""Transcripts as pandas DataFrames: evo_magic sessions and Claude Code sessions alike.

    from evo_magic import load_transcripts
    t = load_transcripts("workspace/.evo_magic")      # every session under the root
    t.blocks.groupby(["session_id", "block_type"], observed=True).chars.sum()

`load_transcripts` reads a session directory, a transcripts root, a `session.jsonl`, a Claude Code
session `.jsonl`, or a glob of any of these, and returns a `Transcripts` of typed frames (columns
and dtypes: docs/transcripts.md). pandas is imported here and nowhere else in evo_magic, so that
`import evo_magic` stays cheap.

How it is fast (measured in benchmarks/bench_transcripts.py; every step below paid for itself):
each file is read as bytes once and split into lines; lines of kinds the frames do not use are
dropped unparsed (their kind found by a byte search; the last line, where a crash leaves a torn
one, is always parsed), and the small, frequent `model_response` and `micro_compaction` lines
are matched against the writer's exact layout instead of parsed (any line that does not match
is parsed). The rest is parsed in batches, one `json.loads` of a JSON array per 64 lines
(sharing the decoder's key cache and call overhead; a batch that fails is re-read line by line
to find the bad lines), while the records are still in the CPU cache. Rows are collected as
lists (a message's identity once, its blocks as tuples) and each frame is built once, numeric
columns from numpy arrays. The cyclic garbage collector is paused meanwhile: parsed records
hold no cycles, and its passes over the growing heap would cost about as much as the parsing.
The `events` frame parses and flattens every record, so it is only built when first used.
"""

from __future__ import annotations

import gc
import glob
import json
import re
import warnings
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from sys import intern
from typing import Any

import numpy as np
import pandas as pd

from evo_magic.transcript import LOG_NAME, SCHEMA_VERSION

__all__ = [
    "Transcripts",
    "TranscriptError",
    "TranscriptWarning",
    "history_frame",
    "load_transcripts",
]

EVO_MAGIC = "evo_magic"
CLAUDE_CODE = "claude_code"
BATCH_LINES = 64
"""Lines parsed by one `json.loads` (measured: 50-100 is fastest, far more or fewer is slower)."""

_GLOB_CHARS = frozenset("*?[")
# The format is judged by the records in a file's first MiB (or its first 50 lines).
_HEAD_BYTES = 1 << 20
_HEAD_LINES = 50


class TranscriptError(ValueError):
    """A transcript cannot be loaded: no such path, nothing in it, an unknown format, or a record
    written by a newer evo_magic (schema version above `SCHEMA_VERSION`)."""


class TranscriptWarning(UserWarning):
    """Part of a transcript was skipped (torn or corrupt lines); the rest was loaded."""


@dataclass
class Transcripts:
    """Typed DataFrames of one or more sessions. See docs/transcripts.md for every column."""

    blocks: pd.DataFrame
    """One row per content block of every message of every epoch: the last record of a message
    wins, and a micro-compacted tool result keeps its original text with ``compacted=True``."""
    calls: pd.DataFrame
    """One row per model call: model, stop reason, usage, duration, context size."""
    compactions: pd.DataFrame
    """One row per full compaction (evo_magic `compaction` records, Claude Code boundaries)."""
    files: list[Path] = field(default_factory=list)
    """The files read, in order."""
    skipped: dict[str, int] = field(default_factory=dict)
    """What was left out, by reason ("unreadable line", Claude Code record types, ...)."""
    _extents: dict[Path, int] = field(default_factory=dict, repr=False)
    _bad: dict[Path, list[int]] = field(default_factory=dict, repr=False)
    _events: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def events(self) -> pd.DataFrame:
        """One row per record of any kind, lightly flattened; built on first use from the same
        bytes the other frames were built from (a live session's later records are not in it).

        It parses every line, so it can find a corrupt line in a record the other frames did
        not need: that one is warned about then, and counted in `skipped`.
        """
        if self._events is None:
            rows = _Events()
            builder = _Builder(events=rows)
            builder.reported = self._bad
            with _gc_paused():
                for path, extent in self._extents.items():
                    builder.add_file(path, extent)
                self._events = rows.frame()
            found = builder.skipped.get("unreadable line", 0)
            if found > self.skipped.get("unreadable line", 0):
                self.skipped["unreadable line"] = found
                self._bad = builder.bad
        return self._events

    def __repr__(self) -> str:
        sessions = self.blocks["session_id"].nunique() if len(self.blocks) else 0
        skipped = f" skipped={self.skipped}" if self.skipped else ""
        return (
            f"<Transcripts files={len(self.files)} sessions={sessions} blocks={len(self.blocks)} "
            f"calls={len(self.calls)} compactions={len(self.compactions)}{skipped}>"
        )


def load_transcripts(path: str | Path) -> Transcripts:
    """Load transcripts into typed DataFrames.

    `path` is a session directory, a transcripts root (every `session.jsonl` below it; a directory
    without any is read as a folder of Claude Code sessions), a single `.jsonl` file of either
    format, or a glob pattern of any of these. The format is detected per file.

    Torn or corrupt lines are skipped with one `TranscriptWarning` per file naming the file, the
    line numbers and the count. Raises `TranscriptError` when the path does not exist, a glob
    matches nothing, there are no records, a file is in neither format, or a record has a schema
    version newer than this evo_magic reads.
    """
    files = _resolve(path)
    builder = _Builder()
    with _gc_paused():
        for file in files:
            builder.add_file(file)
        if builder.records == 0:
            raise TranscriptError(f"no transcript records in {path} (read {_names(files)})")
        return builder.transcripts(files)


def history_frame(messages: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per content block of a history in Messages API shape (e.g. `session.messages`,
    as it is now: micro-compacted results show the placeholder), with the columns of
    `HISTORY_COLUMNS`, typed as in `Transcripts.blocks`."""
    columns: dict[str, list[Any]] = {name: [] for name in HISTORY_COLUMNS}
    names: dict[Any, Any] = {}
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        role = message.get("role") if isinstance(message, dict) else None
        for position, (kind, name, tool_use_id, is_error, text) in enumerate(_block_rows(content)):
            if kind == "tool_use" and tool_use_id is not None:
                names[tool_use_id] = name
            elif kind == "tool_result":
                name = names.get(tool_use_id)
            chars = None if text is None else len(str(text))
            row = (index, role, position, kind, name, tool_use_id, is_error, text, chars)
            for column, value in zip(columns.values(), row, strict=True):
                column.append(value)
    return _frame(columns, HISTORY_COLUMNS)


# -- finding files ---------------------------------------------------------------------------


def _resolve(path: str | Path) -> list[Path]:
    """The transcript files that `path` names, in a stable order; TranscriptError if none."""
    text = str(path)
    if not text.strip():
        raise TranscriptError("no transcript path given (an empty string)")
    candidate = Path(text).expanduser()
    if candidate.exists():
        found = _files_under(candidate)
        if not found:
            raise TranscriptError(f"no transcript files (*.jsonl) in {candidate}")
        return found
    if _GLOB_CHARS & set(text):
        matches = sorted(glob.glob(str(candidate), recursive=True))
        found = [file for match in matches for file in _files_under(Path(match))]
        if not found:
            raise TranscriptError(f"no transcript files match {text!r}")
        return list(dict.fromkeys(found))
    raise TranscriptError(f"no such transcript file or directory: {candidate}")


def _files_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    own = path / LOG_NAME
    if own.is_file():
        return [own]
    sessions = sorted(p for p in path.rglob(LOG_NAME) if p.is_file())
    if sessions:
        return sessions
    # No evo_magic session below: a folder of Claude Code sessions (~/.claude/projects/<dir>/).
    return sorted(p for p in path.rglob("*.jsonl") if p.is_file() and "snapshots" not in p.parts)


def _names(files: list[Path]) -> str:
    shown = ", ".join(str(f) for f in files[:3])
    return shown + (f" and {len(files) - 3} more" if len(files) > 3 else "")


# -- reading lines ---------------------------------------------------------------------------


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_V_PREFIX = b'{"v":%d,' % SCHEMA_VERSION
_KIND = b'"kind":"'
# What the frames need; other evo_magic records are only parsed for `events`.
_NEEDED_KINDS = frozenset(
    {b"message", b"model_response", b"micro_compaction", b"compaction", b"ask_started", b"reset"}
)
# The two small, frequent kinds the frames need are matched against the writer's exact layout
# instead of parsed (about twice as fast; the numbers are converted a column at a time). A line
# that does not match (another layout, non-ASCII text, a torn line) is parsed as JSON instead.
# Strings: printable ASCII without quote or backslash; numbers: JSON's grammar.
_STR = rb'"([\x20\x21\x23-\x5b\x5d-\x7e]*)"'
_INT = rb"(-?\d{1,18})"  # fits an int64
_SIZE_RX = rb'\{"messages":%s,"chars":%s,"tokens":%s,"tokens_exact":(true|false)\}' % (
    _INT,
    _INT,
    _INT,
)
_HEADER_RX = rb'\{"v":%d,"session_id":%s,"seq":%s,"ts":%s,"kind":' % (
    SCHEMA_VERSION,
    _STR,
    _INT,
    _STR,
)
_MODEL_RESPONSE = re.compile(
    _HEADER_RX
    + rb'"model_response","call":%s,"turn":%s,"model":%s,"stop_reason":(?:%s|null),'
    % (_INT, _INT, _STR, _STR)
    + rb'"usage":\{"input_tokens":%s,"output_tokens":%s,"cache_creation_input_tokens":%s,'
    rb'"cache_read_input_tokens":%s\},'
    % (_INT, _INT, _INT, _INT)
    + rb'"duration":(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?),"context_before_micro":'
    + _SIZE_RX
    + rb',"context_sent":'
    + _SIZE_RX
    + rb"\}\s*"
)
_MICRO = re.compile(
    _HEADER_RX
    + rb'"micro_compaction","cleared_ids":\[((?:%s(?:,%s)*)?)\],"chars_freed":%s,"before":'
    % (_STR, _STR, _INT)
    + _SIZE_RX
    + rb',"after":'
    + _SIZE_RX
    + rb"\}\s*"
)
_FAST_KINDS = {b"model_response": "model_response", b"micro_compaction": "micro_compaction"}
_Lines = tuple[list[int], list[bytes]]


def _split(data: bytes) -> tuple[list[int], list[bytes]]:
    """The non-blank lines of `data` and their 1-based numbers."""
    numbers: list[int] = []
    lines: list[bytes] = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if line[:1] == b"{" or line.strip():
            numbers.append(number)
            lines.append(line)
    return numbers, lines


def _split_evo(data: bytes) -> tuple[list[int], list[bytes], int, dict[str, _Lines]]:
    """`_split`, minus the lines the frames do not need, found without parsing them: current
    schema version, a whole object, a kind outside `_NEEDED_KINDS`. The last line is always
    kept (that is where a crash leaves a torn line, which only parsing can tell). Lines of
    `_FAST_KINDS` are set apart, by kind, to be matched rather than parsed.

    Returns the numbers and lines to parse, how many lines were dropped, and the set-apart ones.
    """
    numbers: list[int] = []
    lines: list[bytes] = []
    matched: dict[str, _Lines] = {kind: ([], []) for kind in _FAST_KINDS.values()}
    dropped = 0
    last: tuple[int, bytes] | None = None
    needed, fast, prefix, marker, skip = _NEEDED_KINDS, _FAST_KINDS, _V_PREFIX, _KIND, len(_KIND)
    for number, line in enumerate(data.split(b"\n"), 1):
        start = line.find(marker, 0, 512) + skip
        if start >= skip and line.startswith(prefix) and line.endswith(b"}"):
            kind = line[start : line.find(b'"', start)]
            if kind not in needed:
                dropped += 1
                last = (number, line)
                continue
            if kind in fast:
                numbers_of, lines_of = matched[fast[kind]]
                numbers_of.append(number)
                lines_of.append(line)
                continue
        elif not line.strip():
            continue
        numbers.append(number)
        lines.append(line)
    kept_last = max([0, *(n[-1] for n in (numbers, *(n for n, _ in matched.values())) if n)])
    if last is not None and last[0] > kept_last:  # the last line was dropped: parse it after all
        numbers.append(last[0])
        lines.append(last[1])
        dropped -= 1
    return numbers, lines, dropped, matched


def _batches(
    numbers: list[int], lines: list[bytes], bad: list[int]
) -> Iterator[tuple[list[int], list[dict[str, Any]]]]:
    """Parse `lines` a batch at a time: yields (line numbers, records); bad lines go to `bad`.

    Yielding batch by batch lets the reader use each record while it is still in the CPU cache
    and drop the ones it does not keep at once.
    """
    for start in range(0, len(lines), BATCH_LINES):
        batch = lines[start : start + BATCH_LINES]
        batch_numbers = numbers[start : start + BATCH_LINES]
        parsed = _parse_batch(batch)
        if parsed is not None:
            yield batch_numbers, parsed
            continue
        good_numbers: list[int] = []
        good: list[dict[str, Any]] = []
        for number, line in zip(batch_numbers, batch, strict=True):
            record = _parse_line(line)
            if record is None:
                bad.append(number)
            else:
                good_numbers.append(number)
                good.append(record)
        yield good_numbers, good


def _spans(numbers: list[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7' (the first ten spans)."""
    spans: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(spans[:10]) + (", ..." if len(spans) > 10 else "")


def _parse_batch(lines: list[bytes]) -> list[dict[str, Any]] | None:
    """The lines as one JSON array, or None when any line is bad (the caller then goes line by
    line). A bad line cannot hide in a batch: it fails the parse or changes the count, short of
    a corruption that splits one line into exactly two objects and merges two others into one."""
    try:
        parsed = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None
    if len(parsed) != len(lines) or not all(type(r) is dict for r in parsed):
        return None
    return parsed


def _parse_line(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


# -- typed columns ---------------------------------------------------------------------------

_IDENTITY = {
    "source": "category",
    "session_id": "category",
    "seq": "Int64",
    "timestamp": "datetime",
    "turn": "Int64",
    "epoch": "Int64",
    "segment": "Int64",
}

BLOCK_COLUMNS = {
    **_IDENTITY,
    "message_index": "Int64",
    "role": "category",
    "block_index": "Int64",
    "block_type": "category",
    "tool_name": "category",
    "tool_use_id": "string",
    "is_error": "boolean",
    "text": "string",
    "chars": "Int64",
    "compacted": "boolean",
}
"""Columns of `Transcripts.blocks` and their dtypes ("datetime" is datetime64[us, UTC])."""

HISTORY_COLUMNS = {
    name: BLOCK_COLUMNS[name]
    for name in (
        "message_index",
        "role",
        "block_index",
        "block_type",
        "tool_name",
        "tool_use_id",
        "is_error",
        "text",
        "chars",
    )
}
"""Columns of `history_frame`: those of `blocks` that need no transcript."""

_USAGE = {
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "cache_creation_input_tokens": "Int64",
    "cache_read_input_tokens": "Int64",
}
_SIZE = {"messages": "Int64", "chars": "Int64", "tokens": "Int64", "tokens_exact": "boolean"}

CALL_COLUMNS = {
    **_IDENTITY,
    "call": "Int64",
    "model": "category",
    "stop_reason": "category",
    **_USAGE,
    "duration": "Float64",
    **{f"context_before_micro_{name}": dtype for name, dtype in _SIZE.items()},
    **{f"context_sent_{name}": dtype for name, dtype in _SIZE.items()},
}
"""Columns of `Transcripts.calls` and their dtypes."""

COMPACTION_COLUMNS = {
    **_IDENTITY,
    "trigger": "category",
    "focus": "string",
    "success": "boolean",
    "error": "string",
    "duration": "Float64",
    **{f"before_{name}": dtype for name, dtype in _SIZE.items()},
    **{f"after_{name}": dtype for name, dtype in _SIZE.items()},
    "summary_chars": "Int64",
    **{f"summary_{name}": dtype for name, dtype in _USAGE.items()},
    "snapshot_path": "string",
}
"""Columns of `Transcripts.compactions` and their dtypes."""

EVENT_COLUMNS = {**_IDENTITY, "kind": "category", "file": "category", "line": "Int64"}
"""The leading columns of `Transcripts.events`; each record's own fields follow."""

_CATEGORICAL_FIELDS = frozenset(
    {"name", "model", "reason", "trigger", "code", "type", "subtype", "role", "kind"}
)
_SCALARS = (str, int, float, bool)
_EMPTY: dict[str, Any] = {}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _unencodable(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _encoder() -> Callable[[Any], str]:
    """`to_json` (compact, not ASCII-escaped), made once: `json.dumps` with options builds a new
    encoder per call, which costs more than encoding a tool's input. Parsed JSON has no cycles,
    so the C encoder runs without the circular-reference check."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # not CPython's accelerated json
        return json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    encode = make(
        None, _unencodable, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    return lambda value: "".join(encode(value, 0))


_ENCODE = _encoder()
_ROLES = {"user": "user", "assistant": "assistant"}  # shared strings, as the block types


def _typed(values: list[Any], dtype: str) -> Any:
    """A typed pandas array of `values`; None, and a value of the wrong JSON type (a record
    edited by hand), is missing."""
    if dtype == "category":
        first = values[0] if values else None
        if type(first) is str and values.count(first) == len(values):
            # One value throughout (a file's source, a session's id): no need to factorise.
            codes = np.zeros(len(values), dtype=np.int8)
            return pd.Categorical.from_codes(codes, categories=[first])
        try:
            return pd.Categorical(values)
        except TypeError:  # unhashable values
            return pd.Categorical([v if type(v) is str else None for v in values])
    if dtype == "datetime":
        try:
            stamps = pd.to_datetime(values, format="ISO8601", utc=True, errors="coerce")
        except (TypeError, ValueError):
            texts = [v if type(v) is str else None for v in values]
            stamps = pd.to_datetime(texts, format="ISO8601", utc=True, errors="coerce")
        return stamps.as_unit("us").array
    if dtype == "Int64":
        return _int_array(values)
    if dtype == "boolean":
        mask = np.array([type(v) is not bool for v in values], dtype=bool)
        return pd.arrays.BooleanArray(np.array([v is True for v in values], dtype=bool), mask)
    if dtype == "Float64":
        numbers = [float(v) if type(v) in (int, float) else None for v in values]
        return pd.array(numbers, dtype="Float64")
    try:  # "string": other values become their str()
        return pd.array(values, dtype=dtype)
    except (TypeError, ValueError):
        return pd.array([v if v is None else str(v) for v in values], dtype=dtype)


def _int_array(values: list[Any]) -> Any:
    """An Int64 array; fast when every value is an int or None."""
    if None not in values:
        try:
            data = np.array(values)
        except (ValueError, OverflowError):  # ragged lists, huge numbers
            data = np.array([], dtype=object)
        if data.dtype == np.int64 and data.ndim == 1:  # every value an int (or a bool)
            return pd.arrays.IntegerArray(data, np.zeros(len(values), dtype=bool))
    kept = [v if type(v) is int and _INT64_MIN <= v <= _INT64_MAX else None for v in values]
    mask = np.array([v is None for v in kept], dtype=bool)
    data = np.array([0 if v is None else v for v in kept], dtype=np.int64)
    return pd.arrays.IntegerArray(data, mask)


def _dict(value: Any) -> dict[str, Any]:
    return value if type(value) is dict else _EMPTY


def _frame(columns: dict[str, list[Any]], spec: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({name: _typed(list(columns[name]), dtype) for name, dtype in spec.items()})


def _transpose(rows: list[tuple[Any, ...]], names: list[str]) -> dict[str, list[Any]]:
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    return {name: list(column) for name, column in zip(names, columns, strict=True)}


# -- blocks ----------------------------------------------------------------------------------

# One block as a row: (block_type, tool_name, tool_use_id, is_error, text).
_Row = tuple[Any, Any, Any, Any, Any]
_UNIT = [*_IDENTITY, "message_index", "role"]


def _block_rows(content: Any) -> list[_Row]:
    """The rows of a message's content (a string is one text block)."""
    if isinstance(content, str):
        return [("text", None, None, None, content)]
    if not isinstance(content, list):
        return []
    rows: list[_Row] = []
    append = rows.append
    for block in content:
        if type(block) is not dict:
            append((type(block).__name__, None, None, None, None))
            continue
        kind = block.get("type")
        # The literal types below are shared strings: categorising them later is cheap.
        if kind == "tool_result":
            text = block.get("content", "")
            if type(text) is not str:
                text = _result_text(text)
            tool_use_id = block.get("tool_use_id")
            if type(tool_use_id) is not str:
                tool_use_id = _str_or_none(tool_use_id)
            is_error = bool(block.get("is_error"))
            append(("tool_result", None, tool_use_id, is_error, text))
        elif kind == "text":
            append(("text", None, None, None, block.get("text")))
        elif kind == "tool_use":
            name, tool_use_id = block.get("name"), block.get("id")
            name = intern(name) if type(name) is str else _str_or_none(name)
            if type(tool_use_id) is not str:
                tool_use_id = _str_or_none(tool_use_id)
            text = _ENCODE(block.get("input", _EMPTY))
            append(("tool_use", name, tool_use_id, None, text))
        elif kind == "thinking":
            append(("thinking", None, None, None, block.get("thinking")))
        else:
            text = block.get("text")
            append((kind, None, block.get("id"), None, text if type(text) is str else None))
    return rows


def _str_or_none(value: Any) -> str | None:
    """An id or name of a hand-edited record that is not a string, as one (hashable)."""
    return None if value is None else str(value)


def _result_text(content: Any) -> str | None:
    """A tool_result's text, whether its content is a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return None


def _keep_original_results(old: list[_Row], new: list[_Row]) -> list[_Row]:
    """A message recorded again (a user turn merged into it) may carry results that were
    micro-compacted in memory since: keep the text its first record had."""
    originals = {row[2]: row[4] for row in old if row[0] == "tool_result"}
    if not originals:
        return new
    return [
        (*row[:4], originals[row[2]]) if row[0] == "tool_result" and row[2] in originals else row
        for row in new
    ]


class _Blocks:
    """Rows of `blocks`: each message record's identity once (its "unit"), and its blocks."""

    def __init__(self) -> None:
        self.units: list[tuple[Any, ...]] = []
        self.counts: list[int] = []
        self.first_block: list[int] = []
        self.file_rows: list[_Row] = []
        self.columns: dict[str, list[Any]] = {
            name: [] for name in ("block_type", "tool_name", "tool_use_id", "is_error", "text")
        }
        # (first block, end, cleared tool_use ids) of each file read.
        self.files: list[tuple[int, int, set[str]]] = []

    def add(self, unit: tuple[Any, ...], rows: list[_Row], first_block: int = 0) -> int:
        """Queue one message record's rows; returns how many there are."""
        if rows:
            self.units.append(unit)
            self.counts.append(len(rows))
            self.first_block.append(first_block)
            self.file_rows += rows
        return len(rows)

    def add_messages(self, messages: Iterable[tuple[tuple[Any, ...], list[_Row]]]) -> None:
        """Queue many (unit, rows) at once, each message's blocks from 0 (`add`, in a loop)."""
        units, counts, first, queued = self.units, self.counts, self.first_block, self.file_rows
        for unit, rows in messages:
            if rows:
                units.append(unit)
                counts.append(len(rows))
                first.append(0)
                queued += rows

    def finish_file(self, cleared: set[str]) -> None:
        """Close the file just read: its results are named after their calls and its cleared
        results marked when the frame is built (tool_use ids are unique within a session, not
        across sessions, hence per file)."""
        rows, self.file_rows = self.file_rows, []
        if not rows:
            return
        start = len(self.columns["text"])
        for name, values in zip(self.columns, zip(*rows, strict=True), strict=True):
            self.columns[name] += values
        self.files.append((start, start + len(rows), cleared))

    def frame(self) -> pd.DataFrame:
        counts = np.array(self.counts, dtype=np.int64)
        take = np.repeat(np.arange(len(counts)), counts)
        data: dict[str, Any] = {
            name: _typed(values, BLOCK_COLUMNS[name]).take(take)
            for name, values in _transpose(self.units, _UNIT).items()
        }
        starts = np.cumsum(counts) - counts
        first = np.repeat(np.array(self.first_block, dtype=np.int64), counts)
        index = first + np.arange(len(take), dtype=np.int64) - np.repeat(starts, counts)
        data["block_index"] = pd.arrays.IntegerArray(index, np.zeros(len(index), dtype=bool))
        columns = self.columns
        types = data["block_type"] = _typed(columns["block_type"], "category")
        data["tool_use_id"] = _typed(columns["tool_use_id"], "string")
        data["is_error"] = _typed(columns["is_error"], "boolean")
        texts = columns["text"]
        data["text"] = _typed(texts, "string")
        try:
            lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
            data["chars"] = pd.arrays.IntegerArray(lengths, np.zeros(len(texts), dtype=bool))
        except TypeError:  # a block without text (an image), or a hand-edited one
            data["chars"] = _int_array(
                [None if t is None else len(t if type(t) is str else str(t)) for t in texts]
            )
        results = np.asarray(types == "tool_result")
        data["tool_name"] = _typed(
            self._tool_names(results, np.asarray(types == "tool_use")), "category"
        )
        data["compacted"] = pd.arrays.BooleanArray(
            self._compacted(results), np.zeros(len(texts), dtype=bool)
        )
        return pd.DataFrame({name: data[name] for name in BLOCK_COLUMNS})

    def _tool_names(self, results: np.ndarray, uses: np.ndarray) -> list[Any]:
        """tool_name, with each result named after its call in the same file."""
        names = np.array(self.columns["tool_name"], dtype=object)
        ids = self.columns["tool_use_id"]
        for start, end, _ in self.files:
            name_of = {ids[i]: names[i] for i in np.flatnonzero(uses[start:end]) + start}
            if name_of:
                positions = np.flatnonzero(results[start:end]) + start
                names[positions] = [name_of.get(ids[i]) for i in positions]
        return names.tolist()

    def _compacted(self, results: np.ndarray) -> np.ndarray:
        compacted = np.zeros(len(results), dtype=bool)
        ids = self.columns["tool_use_id"]
        for start, end, cleared in self.files:
            if cleared:
                positions = np.flatnonzero(results[start:end]) + start
                compacted[positions] = [ids[i] in cleared for i in positions]
        return compacted


# -- calls, compactions, events --------------------------------------------------------------


def _call_row(identity: tuple[Any, ...], call: Any, record: dict[str, Any]) -> tuple[Any, ...]:
    """A `calls` row from a model_response record (or a Claude Code assistant message)."""
    usage = _dict(record.get("usage"))
    before = _dict(record.get("context_before_micro"))
    sent = _dict(record.get("context_sent"))
    return (
        *identity,
        call,
        record.get("model"),
        record.get("stop_reason"),
        usage.get("input_tokens"),
        usage.get("output_tokens"),
        usage.get("cache_creation_input_tokens"),
        usage.get("cache_read_input_tokens"),
        record.get("duration"),
        before.get("messages"),
        before.get("chars"),
        before.get("tokens"),
        before.get("tokens_exact"),
        sent.get("messages"),
        sent.get("chars"),
        sent.get("tokens"),
        sent.get("tokens_exact"),
    )


def _add_cleared(cleared: set[str], record: dict[str, Any]) -> None:
    ids = record.get("cleared_ids")
    if isinstance(ids, list):
        cleared.update(i for i in ids if type(i) is str)


def _compaction_row(identity: tuple[Any, ...], record: dict[str, Any]) -> dict[str, Any]:
    summary = record.get("summary")
    row: dict[str, Any] = dict(zip(_IDENTITY, identity, strict=True))
    row.update(
        trigger=record.get("trigger"),
        focus=record.get("focus"),
        success=record.get("success"),
        error=record.get("error"),
        duration=record.get("duration"),
        summary_chars=len(summary) if isinstance(summary, str) else None,
        snapshot_path=record.get("snapshot_path"),
    )
    for prefix, name in (("before", "before"), ("after", "after"), ("summary", "summary_usage")):
        for key, value in _dict(record.get(name)).items():
            row[f"{prefix}_{key}"] = value
    return row


def _fast_calls_frame(fast: list[tuple[int, tuple[bytes, ...], int, int]]) -> pd.DataFrame:
    """The `calls` rows matched by `_MODEL_RESPONSE`: its groups converted a column at a time."""
    groups = list(zip(*(row[1] for row in fast), strict=True))
    n = len(fast)
    valid = np.zeros(n, dtype=bool)

    def ints(i: int) -> Any:
        return pd.arrays.IntegerArray(np.array(groups[i], dtype="S").astype(np.int64), valid)

    def categories(i: int) -> Any:
        values = pd.Categorical(groups[i])
        return values.rename_categories([c.decode("ascii") for c in values.categories])

    def exact(i: int) -> Any:
        return pd.arrays.BooleanArray(np.array(groups[i], dtype="S") == b"true", valid)

    def sizes(prefix: str, first: int) -> dict[str, Any]:
        names = ("messages", "chars", "tokens")
        return {
            **{f"{prefix}_{name}": ints(first + k) for k, name in enumerate(names)},
            f"{prefix}_tokens_exact": exact(first + 3),
        }

    stamps = [t.decode("ascii") for t in groups[2]]
    data = {
        "source": pd.Categorical([EVO_MAGIC] * n),
        "session_id": categories(0),
        "seq": ints(1),
        "timestamp": _typed(stamps, "datetime"),
        "turn": ints(4),
        "epoch": _int_array([row[2] for row in fast]),
        "segment": _int_array([row[3] for row in fast]),
        "call": ints(3),
        "model": categories(5),
        "stop_reason": categories(6),
        **{name: ints(7 + k) for k, name in enumerate(_USAGE)},
        "duration": pd.arrays.FloatingArray(
            np.array(groups[11], dtype="S").astype(np.float64), valid
        ),
        **sizes("context_before_micro", 12),
        **sizes("context_sent", 16),
    }
    return pd.DataFrame({name: data[name] for name in CALL_COLUMNS})


class _Rows:
    """Named columns filled row by row (for the small frames)."""

    def __init__(self, spec: dict[str, str]):
        self.spec = spec
        self.columns: dict[str, list[Any]] = {name: [] for name in spec}

    def add(self, values: dict[str, Any]) -> None:
        for name, column in self.columns.items():
            column.append(values.get(name))

    def frame(self) -> pd.DataFrame:
        return _frame(self.columns, self.spec)


class _Events:
    """Rows of `events`: fixed leading columns, then each record's scalar fields (one level of
    nested objects flattened as `<field>_<key>`; lists left out)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.fields: dict[str, dict[int, Any]] = {}

    def add(
        self,
        identity: tuple[Any, ...],
        kind: Any,
        file: str,
        line: int,
        record: dict[str, Any],
        skip: frozenset[str],
    ) -> None:
        row = len(self.rows)
        self.rows.append((*identity, kind, file, line))
        fields = self.fields
        for key, value in record.items():
            if key in skip:
                continue
            if type(value) is dict:
                for sub, item in value.items():
                    if item is None or isinstance(item, _SCALARS):
                        fields.setdefault(f"{key}_{sub}", {})[row] = item
            elif value is None or isinstance(value, _SCALARS):
                fields.setdefault(key, {})[row] = value

    def frame(self) -> pd.DataFrame:
        frame = _frame(_transpose(self.rows, list(EVENT_COLUMNS)), EVENT_COLUMNS)
        n = len(frame)
        extra = {
            name: _field_column(name, cells, n)
            for name, cells in self.fields.items()
            if name not in frame.columns
        }
        if not extra:
            return frame
        return pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1)


def _field_column(name: str, cells: dict[int, Any], n: int) -> Any:
    """A record field as a typed column: boolean, Int64, Float64, category or string."""
    values: list[Any] = [None] * n
    for row, value in cells.items():
        values[row] = value
    kinds = {type(v) for v in cells.values() if v is not None}
    if kinds == {bool}:
        return _typed(values, "boolean")
    if kinds == {int}:
        return _int_array(values)
    if kinds and kinds <= {int, float}:
        return pd.array([None if v is None else float(v) for v in values], dtype="Float64")
    if kinds == {str} and name.rpartition("_")[2] in _CATEGORICAL_FIELDS:
        return pd.Categorical(values)
    if kinds <= {str}:
        return pd.array(values, dtype="string")
    return pd.array([v if v is None or type(v) is str else _ENCODE(v) for v in values], "string")


# -- the loader ------------------------------------------------------------------------------


class _Builder:
    """Reads files one by one into the row accumulators, then builds the frames."""

    def __init__(self, *, events: _Events | None = None):
        self.blocks = _Blocks()
        # Calls parsed from records, and their sort keys (see `key`).
        self.calls: list[tuple[Any, ...]] = []
        self.call_keys: list[int] = []
        # (sort key, groups of _MODEL_RESPONSE, epoch, segment) of each matched call.
        self.fast_calls: list[tuple[int, tuple[bytes, ...], int, int]] = []
        self.file_index = 0
        self.compactions = _Rows(COMPACTION_COLUMNS)
        self.events = events  # rows of `events`, when they are wanted
        self.skipped: dict[str, int] = {}
        self.extents: dict[Path, int] = {}
        # Unreadable line numbers by file; `reported` ones are not warned about again.
        self.bad: dict[Path, list[int]] = {}
        self.reported: dict[Path, list[int]] = {}
        self.records = 0

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count

    def key(self, line: int) -> int:
        """Where a record is, as one sortable number: (file read, line)."""
        return (self.file_index << 32) | line

    def add_call(self, row: tuple[Any, ...], line: int) -> None:
        self.calls.append(row)
        self.call_keys.append(self.key(line))

    def calls_frame(self) -> pd.DataFrame:
        """Parsed and matched calls, in the order of their records."""
        parsed = _frame(_transpose(self.calls, list(CALL_COLUMNS)), CALL_COLUMNS)
        if not self.fast_calls:
            return parsed
        fast = _fast_calls_frame(self.fast_calls)
        keys = np.array(self.call_keys + [row[0] for row in self.fast_calls], dtype=np.int64)
        if not self.calls:
            return fast
        frame = pd.concat([parsed, fast], ignore_index=True)
        for name, dtype in CALL_COLUMNS.items():  # concat of different categories gives objects
            if dtype == "category" and frame[name].dtype != "category":
                frame[name] = frame[name].astype("category")
        if np.all(keys[1:] >= keys[:-1]):
            return frame
        return frame.iloc[np.argsort(keys, kind="stable")].reset_index(drop=True)

    def add_file(self, path: Path, extent: int | None = None) -> None:
        self.file_index += 1
        with open(path, "rb") as f:
            data = f.read() if extent is None else f.read(extent)
        self.extents[path] = len(data)
        bad: list[int] = []
        reader = self._reader(path, data, bad)
        if reader is not None:
            self.records += reader(self, path).read(data, bad)
        self.bad[path] = bad = sorted(set(bad))
        if bad:
            self.skip("unreadable line", len(bad))
        new = [n for n in bad if n not in self.reported.get(path, ())]
        if new:
            plural = "s" if len(new) > 1 else ""
            warnings.warn(
                f"{path}: skipped {len(new)} unreadable (torn or corrupt) line{plural}: "
                f"{_spans(new)}",
                TranscriptWarning,
                stacklevel=3,  # the caller of load_transcripts
            )

    def _reader(
        self, path: Path, data: bytes, bad: list[int]
    ) -> type[_EvoFile | _ClaudeCodeFile] | None:
        """The reader for the file's format, judged by its first readable records (None for a
        file with none: empty, or only unreadable lines, which go to `bad`)."""
        numbers, lines = _split(data[:_HEAD_BYTES])
        first = [(n, r) for n, r in zip(numbers, map(_parse_line, lines), strict=True) if r]
        if not first:  # rare: a first line longer than the head, or nothing readable
            numbers, lines = _split(data)
            head = zip(numbers[:_HEAD_LINES], map(_parse_line, lines[:_HEAD_LINES]), strict=True)
            first = [(n, r) for n, r in head if r]
        if not first:
            if not lines:
                self.skip("empty file")
                return None
            if len(lines) <= _HEAD_LINES:
                bad += numbers  # a few lines, none readable: torn or corrupt throughout
                return None
            raise TranscriptError(f"{path}: none of its first {_HEAD_LINES} lines is a JSON object")
        number, record = first[0]
        if "kind" in record and "v" in record:
            return _EvoFile
        if any("type" in r and ("sessionId" in r or "uuid" in r) for _, r in first):
            return _ClaudeCodeFile
        raise TranscriptError(
            f"{path} is neither an evo_magic transcript nor a Claude Code session "
            f"(the record at line {number} has keys {sorted(record)[:8]})"
        )

    def transcripts(self, files: list[Path]) -> Transcripts:
        return Transcripts(
            blocks=self.blocks.frame(),
            calls=self.calls_frame(),
            compactions=self.compactions.frame(),
            files=list(files),
            skipped=dict(self.skipped),
            _extents=dict(self.extents),
            _bad=dict(self.bad),
        )


class _EvoFile:
    """One evo_magic `session.jsonl` (record kinds: docs/transcripts.md)."""

    HEADER = frozenset({"v", "session_id", "seq", "ts", "kind", "turn", "epoch"})

    def __init__(self, builder: _Builder, path: Path):
        self.builder = builder
        self.path = path

    def read(self, data: bytes, bad: list[int]) -> int:
        """Read the file into the builder; returns how many records it has."""
        builder = self.builder
        events = builder.events
        matched: dict[str, _Lines] = {}
        if events is None:
            numbers, lines, dropped, matched = _split_evo(data)
        else:
            (numbers, lines), dropped = _split(data), 0
        default_id = self.path.parent.name
        file = str(self.path)
        # (segment, epoch, index) -> (unit, rows) of the LAST record of that message.
        messages: dict[tuple[Any, Any, Any], tuple[tuple[Any, ...], list[_Row]]] = {}
        cleared: set[str] = set()
        segment = epoch = turn = 0
        changes = [(0, 0, 0)]  # (line, epoch, segment) from that line on
        count = dropped + sum(len(n) for n, _ in matched.values())
        for batch_numbers, batch in _batches(numbers, lines, bad):
            count += len(batch)
            for number, record in zip(batch_numbers, batch, strict=True):
                version = record.get("v")
                if version != SCHEMA_VERSION:
                    self._check_version(version, number)
                kind = record.get("kind")
                if kind == "message":
                    message, index = record.get("message"), record.get("index")
                    if type(message) is dict and type(index) is int:
                        message_epoch = record.get("epoch", epoch)
                        if type(message_epoch) is not int:
                            message_epoch = epoch
                        key = (segment, message_epoch, index)
                        rows = _block_rows(message.get("content"))
                        if key in messages:
                            rows = _keep_original_results(messages[key][1], rows)
                        role = message.get("role")
                        unit = (
                            EVO_MAGIC,
                            record.get("session_id") or default_id,
                            record.get("seq"),
                            record.get("ts"),
                            record.get("turn", turn),
                            message_epoch,
                            segment,
                            index,
                            _ROLES.get(role, role) if type(role) is str else role,
                        )
                        messages[key] = (unit, rows)
                elif kind == "model_response":
                    identity = self._identity(record, default_id, turn, epoch, segment)
                    builder.add_call(_call_row(identity, record.get("call"), record), number)
                elif kind == "micro_compaction":
                    _add_cleared(cleared, record)
                elif kind == "compaction":
                    identity = self._identity(record, default_id, turn, epoch, segment)
                    builder.compactions.add(_compaction_row(identity, record))
                    if record.get("success") is True:
                        epoch += 1
                        changes.append((number, epoch, segment))
                elif kind == "ask_started":
                    turn += 1
                elif kind == "reset":
                    segment += 1
                    epoch = 0
                    changes.append((number, epoch, segment))
                if events is not None:
                    record_epoch = record.get("epoch", epoch)
                    identity = self._identity(record, default_id, turn, record_epoch, segment)
                    events.add(identity, kind, file, number, record, self.HEADER)
        if matched:
            self._read_matched(matched, changes, cleared, bad)
        builder.blocks.add_messages(messages.values())
        builder.blocks.finish_file(cleared)
        return count

    def _read_matched(
        self,
        matched: dict[str, _Lines],
        changes: list[tuple[int, int, int]],
        cleared: set[str],
        bad: list[int],
    ) -> None:
        """The lines `_split_evo` set apart: matched against the writer's layout, or else
        parsed (epoch and segment come from the line's place among the `changes`)."""
        builder = self.builder
        change_lines = [line for line, _, _ in changes]

        def parsed(number: int, line: bytes) -> dict[str, Any] | None:
            record = _parse_line(line)
            if record is None:
                bad.append(number)
            else:
                self._check_version(record.get("v"), number)
            return record

        numbers, lines = matched["micro_compaction"]
        for number, line in zip(numbers, lines, strict=True):
            match = _MICRO.fullmatch(line)
            if match is not None:
                ids = match.group(4)
                if ids:
                    cleared.update(ids[1:-1].decode("ascii").split('","'))
            elif (record := parsed(number, line)) is not None:
                _add_cleared(cleared, record)
        numbers, lines = matched["model_response"]
        default_id = self.path.parent.name
        for number, line in zip(numbers, lines, strict=True):
            _, epoch, segment = changes[bisect_right(change_lines, number) - 1]
            match = _MODEL_RESPONSE.fullmatch(line)
            if match is not None:
                builder.fast_calls.append((builder.key(number), match.groups(), epoch, segment))
            elif (record := parsed(number, line)) is not None:
                identity = self._identity(record, default_id, 0, epoch, segment)
                builder.add_call(_call_row(identity, record.get("call"), record), number)

    @staticmethod
    def _identity(
        record: dict[str, Any], default_id: str, turn: int, epoch: Any, segment: int
    ) -> tuple[Any, ...]:
        sid = record.get("session_id") or default_id
        seq, ts = record.get("seq"), record.get("ts")
        return (EVO_MAGIC, sid, seq, ts, record.get("turn", turn), epoch, segment)

    def _check_version(self, version: Any, line: int) -> None:
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise TranscriptError(
                f"{self.path} line {line}: record schema version {version} is newer than this "
                f"evo_magic reads (version {SCHEMA_VERSION}); upgrade evo_magic to load it"
            )


class _ClaudeCodeFile:
    """One Claude Code session file (`~/.claude/projects/<project>/<session>.jsonl`).

    Consecutive records of the same role form one message (the API merges them, and Claude Code
    writes each block of a streamed response as its own record); a `compact_boundary` starts a
    new epoch whose first message is the summary (`isCompactSummary`).
    """

    HEADER = frozenset({"sessionId", "timestamp", "type"})

    def __init__(self, builder: _Builder, path: Path):
        self.builder = builder
        self.path = path

    def read(self, data: bytes, bad: list[int]) -> int:
        """Read the file into the builder; returns how many records it has."""
        numbers, lines = _split(data)
        builder = self.builder
        default_id = self.path.stem
        file = str(self.path)
        seen: set[Any] = set()
        calls: dict[Any, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        epoch = turn = count = 0
        index = -1
        last_role: Any = None
        next_block = 0
        summary_row: int | None = None  # the compactions row awaiting its summary's length
        for batch_numbers, batch in _batches(numbers, lines, bad):
            count += len(batch)
            for number, record in zip(batch_numbers, batch, strict=True):
                kind = record.get("type")
                uuid = record.get("uuid")
                if type(uuid) is str:
                    if uuid in seen:  # a resumed session can repeat records
                        builder.skip("claude_code: repeated uuid")
                        continue
                    seen.add(uuid)
                if record.get("isSidechain"):
                    builder.skip("claude_code: sidechain (subagent) record")
                    continue
                message = record.get("message")
                sid = record.get("sessionId") or default_id
                ts = record.get("timestamp")
                if kind in ("user", "assistant") and type(message) is dict:
                    role = message.get("role")
                    role = role if type(role) is str else kind
                    if kind == "user" and _is_prompt(record, message):
                        turn += 1
                    if role != last_role:
                        index, next_block, last_role = index + 1, 0, role
                    rows = _block_rows(message.get("content"))
                    if record.get("isCompactSummary") and summary_row is not None:
                        chars = sum(len(row[4]) for row in rows if isinstance(row[4], str))
                        builder.compactions.columns["summary_chars"][summary_row] = chars
                        summary_row = None
                    unit = (CLAUDE_CODE, sid, number, ts, turn, epoch, 0, index, role)
                    next_block += builder.blocks.add(unit, rows, next_block)
                    if kind == "assistant" and type(message.get("usage")) is dict:
                        identity = (CLAUDE_CODE, sid, number, ts, turn, epoch, 0)
                        message_id = message.get("id")
                        calls[message_id if type(message_id) is str else number] = (
                            identity,
                            message,
                        )
                elif kind == "system" and record.get("subtype") == "compact_boundary":
                    identity = (CLAUDE_CODE, sid, number, ts, turn, epoch, 0)
                    builder.compactions.add(_boundary_row(identity, record))
                    summary_row = len(builder.compactions.columns["summary_chars"]) - 1
                    epoch += 1
                    index, last_role = -1, None
                elif kind != "summary":  # a summary record is the session's title: an event only
                    label = f"system:{record.get('subtype')}" if kind == "system" else kind
                    builder.skip(f"claude_code: {label} record")
                    continue
                if builder.events is not None:
                    identity = (CLAUDE_CODE, sid, number, ts, turn, epoch, 0)
                    builder.events.add(identity, kind, file, number, record, self.HEADER)
        for call, (identity, message) in enumerate(calls.values(), 1):
            builder.add_call(_call_row(identity, call, message), identity[2])
        builder.blocks.finish_file(set())
        return count


def _boundary_row(identity: tuple[Any, ...], record: dict[str, Any]) -> dict[str, Any]:
    meta = _dict(record.get("compactMetadata"))
    row: dict[str, Any] = dict(zip(_IDENTITY, identity, strict=True))
    row.update(trigger=meta.get("trigger"), success=True, before_tokens=meta.get("preTokens"))
    return row


def _is_prompt(record: dict[str, Any], message: dict[str, Any]) -> bool:
    """A real user prompt: not a tool result, not a compaction summary, not a meta message."""
    if record.get("isCompactSummary") or record.get("isMeta"):
        return False
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    if not isinstance(content, list):
        return False
    types = [b.get("type") for b in content if isinstance(b, dict)]
    return bool(types) and "tool_result" not in types
