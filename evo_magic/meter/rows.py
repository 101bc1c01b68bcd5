"""A read-only window onto a run of a log's rows, without copying them.

A meter log only appends (a row, once written, never changes), so what a meter shows at one
moment is the log's rows up to that moment: a start and an end over the log's own list. A copy
of them cost every refresh a pass over the session (and its memory's caches) to keep what a
window keeps for free; a chart's column or mark likewise names its run of calls or rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

T = TypeVar("T")


class Rows(Sequence[T]):
    """Rows `start` to `stop` (not included) of `rows`, read in place: indexing and `len` as a
    list's, a slice a window of its own (nothing copied), equal to any sequence holding the
    same rows in order. It shows what `rows` holds: made over a log's list, it is the rows as
    they were as long as the log only appends (as a `MeterLog` does)."""

    __slots__ = ("_rows", "_start", "_stop")

    def __init__(self, rows: Sequence[T], start: int = 0, stop: int | None = None) -> None:
        count = len(rows)
        start = min(max(start, 0), count)
        stop = count if stop is None else min(max(stop, start), count)
        if type(rows) is Rows:  # a window of a window reads the list underneath
            start, stop = rows._start + start, rows._start + stop
            rows = rows._rows
        self._rows: Sequence[T] = rows
        self._start, self._stop = start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return list(self)[index]
            return Rows(self._rows, self._start + start, self._start + max(stop, start))
        at = index + (self._stop if index < 0 else self._start)
        if self._start <= at < self._stop:
            return self._rows[at]
        raise IndexError("row index out of range")

    def __iter__(self) -> Iterator[T]:
        return iter(self._rows[self._start : self._stop])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)  # rows compared in C

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which have none

    def __repr__(self) -> str:
        return f"Rows({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))
