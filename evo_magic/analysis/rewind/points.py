"""Where `rewind` stops a conversation: at each recorded compaction, before given calls, or
every N calls. A point is an item of the recording: the history stands as the session had it
just before that item."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evo_magic.analysis.conversation import Call, Compaction
from evo_magic.analysis.replay import Recording

_EVERY = re.compile(r"^\s*every\s+(\d+)\s+calls?\s*$")


@dataclass(frozen=True)
class Point:
    """One rewind point of a conversation."""

    number: int
    """1, 2, ... in the conversation."""
    item: int
    """The recording's item the history stands just before."""
    call: int | None
    """The call the history would have been sent to next."""
    compaction: bool
    """Whether the session compacted here (the item is its recorded compaction)."""


def check_at(at: Any) -> str | tuple[int, ...] | int:
    """`at` checked: "compactions", the call numbers (a list), or N of "every N calls". A bad
    value is refused in one line naming the forms."""
    if at == "compactions":
        return "compactions"
    if isinstance(at, str):
        every = _EVERY.match(at)
        if every and int(every.group(1)) >= 1:
            return int(every.group(1))
    elif isinstance(at, Sequence) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in at
    ):
        return tuple(sorted(set(at)))
    raise ValueError(
        f'at must be "compactions", a list of call numbers (1 or more) or "every N calls", '
        f"got {at!r}"
    )


def points_of(recording: Recording, at: str | tuple[int, ...] | int) -> list[Point]:
    """The points of `recording` for a checked `at`, in order."""
    items = recording.items
    calls = [(i, item.call) for i, item in enumerate(items) if isinstance(item, Call)]
    if at == "compactions":
        found = [i for i, item in enumerate(items) if isinstance(item, Compaction)]
        places = [(i, _next_call(calls, i), True) for i in found]
    else:
        numbers = [c for _, c in calls if c is not None]
        wanted = set(at) if isinstance(at, tuple) else {n for n in numbers if n % int(at) == 0}
        places = [(i, c, False) for i, c in calls if c in wanted]
    return [Point(k + 1, item, call, compacted) for k, (item, call, compacted) in enumerate(places)]


def _next_call(calls: list[tuple[int, int | None]], index: int) -> int | None:
    return next((call for i, call in calls if i > index), None)
