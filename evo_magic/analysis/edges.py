"""Lines at the edges, found before the engine reads a file: a line longer than
`MAX_LINE_BYTES` (no transcript record is; the engine would ask for gigabytes of memory and
fail naming neither file nor line), and a long line nested deeper than `MAX_DEPTH` (the
engine's JSON functions refuse it, but only after parsing it: a 20 MB line nested 10^7 deep
costs gigabytes). Both are skipped and named in the load's warning. A short line nested too
deep costs little and is found when the engine refuses it (`SourceFile.drop_deep_lines`)."""

from __future__ import annotations

import numpy as np

MAX_DEPTH = 128
"""The deepest nesting of a readable line (DuckDB's JSON functions refuse deeper ones)."""
MAX_LINE_BYTES = 128 << 20
"""The longest line read; a longer one is skipped with a warning naming its file and line."""
CHECKED_BYTES = 1 << 20
"""Lines at least this long are checked for nesting before the engine reads them."""
_CHUNK = 1 << 20
"""Bytes of a line checked at a time."""


def edge_rows(data: bytes | bytearray, starts: np.ndarray) -> tuple[list[int], list[int]]:
    """The rows (0-based, of the lines starting at `starts`) that are too long, and those
    long enough to check that are nested too deep."""
    lengths = _ends(data, starts) - starts
    too_long = np.flatnonzero(lengths > MAX_LINE_BYTES).tolist()
    checked = np.flatnonzero((lengths >= CHECKED_BYTES) & (lengths <= MAX_LINE_BYTES)).tolist()
    return too_long, deep_rows(data, starts, checked)


def deep_rows(data: bytes | bytearray, starts: np.ndarray, rows: list[int]) -> list[int]:
    """Those of `rows` (0-based, of the lines starting at `starts`) nested too deep."""
    ends = _ends(data, starts)
    found = []
    with memoryview(data) as view:
        for row in rows:
            start, end = int(starts[row]), int(ends[row])
            # Brackets counted in place (nothing allocated); only then looked at closely.
            if data.count(b"[", start, end) + data.count(b"{", start, end) <= MAX_DEPTH:
                continue
            with view[start:end] as line:
                if nested_deeper(line):
                    found.append(row)
    return found


def _ends(data: bytes | bytearray, starts: np.ndarray) -> np.ndarray:
    return np.append(starts[1:], len(data)).astype(np.int64)


def nested_deeper(line: bytes | bytearray | memoryview, limit: int = MAX_DEPTH) -> bool:
    """Whether a JSON line nests arrays and objects deeper than `limit` (brackets inside
    strings, escaped quotes included, do not count). Vectorised, a chunk at a time: linear in
    the line's length, its memory bounded by the chunk, whatever the depth."""
    b = np.frombuffer(line, dtype=np.uint8)
    quotes = _unescaped_quotes(b)
    depth, inside = 0, 0
    for start in range(0, len(b), _CHUNK):
        marks = b[start : start + _CHUNK] | 0x20
        step = (marks == 0x7B).astype(np.int32) - (marks == 0x7D)  # "]" and "}": 0x7D
        low, high = np.searchsorted(quotes, [start, start + len(marks)])
        if high > low:  # inside a string: an odd number of quotes up to here
            toggles = np.zeros(len(marks), dtype=np.int32)
            toggles[quotes[low:high] - start] = 1
            parity = (np.cumsum(toggles, dtype=np.int32) + inside) & 1
            step[parity == 1] = 0
            inside = int(parity[-1])
        elif inside:
            continue
        running = np.cumsum(step, dtype=np.int64) + depth
        if running.max() > limit:
            return True
        depth = int(running[-1])
    return False


def _unescaped_quotes(b: np.ndarray) -> np.ndarray:
    """The positions of the quotes of `b` that are not escaped (an even run of backslashes,
    or none, before them)."""
    quotes = np.flatnonzero(b == 34)
    escaped = np.zeros(len(quotes), dtype=bool)
    which, at = np.arange(len(quotes)), quotes - 1
    while len(which):  # one step back per backslash of the longest run
        inside = at >= 0
        which, at = which[inside], at[inside]
        hit = b[at] == 92
        which, at = which[hit], at[hit] - 1
        escaped[which] ^= True
    return quotes[~escaped]
