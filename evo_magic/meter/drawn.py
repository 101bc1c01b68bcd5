"""HTML strings a live meter drew at its earlier refreshes, kept for the next one.

A long session's chart has 160 columns, as many marks, and the list its 20 newest asks: drawn
anew at every refresh, they cost more than everything else a refresh does. Most of them are
the same as at the refresh before (a finished column, a mark, an ask no call adds to), so each
is kept with what it was drawn from, and drawn again only when that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field


def _same(kept: tuple[object, ...], sources: tuple[object, ...]) -> bool:
    """True when `sources` are what `kept` were: the same objects, or equal ones (a string is
    a function of its sources' values, so an equal source draws the same string)."""
    return len(kept) == len(sources) and all(
        a is b or a == b for a, b in zip(kept, sources, strict=True)
    )


@dataclass
class Drawn:
    """The strings drawn at the last refresh, each with the sources it was drawn from."""

    strings: dict[Hashable, tuple[tuple[object, ...], str]] = field(default_factory=dict)
    used: set[Hashable] = field(default_factory=set)
    """The keys asked for since the last `forget_unused`."""
    made: int = 0
    """Strings drawn so far (what a refresh costs, for tests)."""

    def get(self, key: Hashable, sources: tuple[object, ...], draw: Callable[[], str]) -> str:
        """The string kept under `key` when it was drawn from `sources` (the same objects or
        equal ones), else `draw()`, kept under `key` from now on."""
        self.used.add(key)
        kept = self.strings.get(key)
        if kept is None or not _same(kept[0], sources):
            kept = self.strings[key] = (sources, draw())
            self.made += 1
        return kept[1]

    def forget_unused(self) -> None:
        """Forget the strings not asked for since the last call (no longer drawn), so what
        is kept stays as small as one refresh."""
        self.strings = {key: self.strings[key] for key in self.used if key in self.strings}
        self.used = set()
