"""A file's first records, parsed as they are asked for: what tells a file's format and its
session is in its first one or two records, and parsing fifty long lines per file in Python
cost a load a tenth of its time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload


class Head(Sequence[tuple[int, dict[str, Any]]]):
    """A file's first readable records and their line numbers (`SourceFile.head`), parsed as
    they are asked for: iterating, indexing and truth parse only as far as they need."""

    def __init__(self, items: Iterator[tuple[int, dict[str, Any]]]) -> None:
        self._items = items
        self._found: list[tuple[int, dict[str, Any]]] = []
        self._done = False

    def _fill(self, count: int | None) -> None:
        while not self._done and (count is None or len(self._found) < count):
            item = next(self._items, None)
            if item is None:
                self._done = True
            else:
                self._found.append(item)

    @overload
    def __getitem__(self, index: int) -> tuple[int, dict[str, Any]]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, dict[str, Any]]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            bounded = index.stop is not None and index.stop >= 0 and (index.start or 0) >= 0
            self._fill(index.stop if bounded else None)
            return self._found[index]
        self._fill(index + 1 if index >= 0 else None)
        return self._found[index]

    def __len__(self) -> int:
        self._fill(None)
        return len(self._found)

    def __bool__(self) -> bool:
        self._fill(1)
        return bool(self._found)

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        at = 0
        while True:
            self._fill(at + 1)
            if at >= len(self._found):
                return
            yield self._found[at]
            at += 1

    @property
    def records(self) -> Records:
        """The records alone, as lazily."""
        return Records(self)


class Records(Sequence[dict[str, Any]]):
    """The records of a `Head` without their line numbers (what a `Sniff` holds)."""

    def __init__(self, head: Head) -> None:
        self._head = head

    def __getitem__(self, index: Any) -> Any:
        found = self._head[index]
        return [record for _, record in found] if isinstance(index, slice) else found[1]

    def __len__(self) -> int:
        return len(self._head)

    def __bool__(self) -> bool:
        return bool(self._head)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (record for _, record in self._head)
