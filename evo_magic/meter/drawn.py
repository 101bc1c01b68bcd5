"""HTML strings a live meter drew at its earlier refreshes, kept for the next one.

A long session's chart has 160 columns, as many marks, and the list its 20 newest asks: drawn
anew at every refresh, they cost more than everything else a refresh does. Most of them are
the same as at the refresh before (a finished column, a mark, an ask no call adds to), so each
is kept with what it was drawn from, and drawn again only when that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field


@dataclass
class Drawn:
    """The strings drawn at the last refresh, each with the sources it was drawn from."""

    strings: dict[Hashable, tuple[tuple[object, ...], str]] = field(default_factory=dict)
    """What the last refresh drew (or the one before, until `forget_unused`)."""
    used: dict[Hashable, tuple[tuple[object, ...], str]] = field(default_factory=dict)
    """What this refresh drew or took up so far."""
    made: int = 0
    """Strings drawn so far (what a refresh costs, for tests)."""

    def get(
        self, key: Hashable, sources: tuple[object, ...], draw: Callable[..., str], *args: object
    ) -> str:
        """The string kept under `key` when it was drawn from `sources`, else `draw(*args)`,
        kept under `key` from now on. Sources are the same when they are the same objects or
        equal ones (a tuple's comparison: identity first): a string is a function of its
        sources' values, so equal sources draw the same string."""
        kept = self.used.get(key) or self.strings.get(key)
        if kept is None or kept[0] != sources:
            kept = (sources, draw(*args))
            self.made += 1
        self.used[key] = kept
        return kept[1]

    def forget_unused(self) -> None:
        """Keep only the strings asked for since the last call (the others are no longer
        drawn), so what is kept stays as small as one refresh."""
        self.strings, self.used = self.used, {}
