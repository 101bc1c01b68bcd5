"""The messages of a history as they were at one moment, without copying them: what a model
request holds, so that building a request costs the same at any length.

A snapshot reads the history's own list up to the length it had then. The history never
changes an item of that list in place without first handing the old one to its live
snapshots (`keep`), and a replaced or reset history starts a new list: so a snapshot reads,
whenever it is read, exactly the messages sent, at a cost of what changed since.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, overload

Message = dict[str, Any]


class Snapshot(Sequence[dict[str, Any]]):
    """A read-only sequence of messages as they were when it was taken (see the module
    docstring). Index, slice, iterate, `len`; `list(snapshot)` for a list of one's own."""

    __slots__ = ("__weakref__", "_items", "_length", "_kept")

    def __init__(self, items: list[Message]):
        self._items = items
        self._length = len(items)
        self._kept: dict[int, Message] = {}

    def keep(self, index: int, old: Message) -> None:
        """The history is about to overwrite `index`, which held `old`: keep it if it is one
        of this snapshot's messages and the first overwrite of it since."""
        if index < self._length and index not in self._kept:
            self._kept[index] = old

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            if not self._kept:  # nothing overwritten since: a slice of the list itself
                return self._items[slice(*index.indices(self._length))]
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("snapshot index out of range")
        return self._kept.get(index, self._items[index])

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Message]:
        if not self._kept:  # nothing overwritten since: the list itself, at C speed, uncopied
            return islice(self._items, self._length)
        return (self[index] for index in range(self._length))

    def __reversed__(self) -> Iterator[Message]:
        for index in range(self._length - 1, -1, -1):
            yield self[index]

    def __repr__(self) -> str:
        return f"<snapshot of {self._length} messages>"
