"""How the meter says things: what started a compaction, when a strategy runs, and a list of
names with their counts. The log's notes, the text and the HTML say them alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

TRIGGERS = {
    "auto": "automatic",
    "model": "the model's compact tool",
    "user": "by hand, %compact",
    "every_call": "before a model call",
}
"""What started a compaction, as the meter says it."""
LAYERS = {
    "every_call": "every-call strategy",
    "over_limit": "over-limit strategy",
    "on_request": "on-request strategy",
}
"""When a strategy runs (its `when`), as the meter says it."""


def counted(names: Mapping[str, int] | Iterable[str]) -> str:
    """ "read_file ×3, bash" from names (or name -> count)."""
    counts: dict[str, int] = {}
    if isinstance(names, Mapping):
        counts = dict(names)
    else:
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    return ", ".join(name if n == 1 else f"{name} ×{n}" for name, n in counts.items())
