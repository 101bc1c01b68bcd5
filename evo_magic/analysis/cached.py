"""Entries of the analysis's caches on disk (probe answers, real summaries): data like a
transcript, so an entry is read only from a regular file (no link, never blocking), and its
usage is checked by the rules of recorded usage (each count a whole number from 0 to
`MAX_TOKENS`). A damaged entry is a miss: asked again and written again, never a crash and
never a negative or infinite cost."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from evo_magic.analysis.atomic import write_atomically
from evo_magic.analysis.datafiles import NotInside, open_regular
from evo_magic.analysis.formats import usage_count
from evo_magic.usage import Usage

MAX_ENTRY_BYTES = 64 << 20
"""An entry larger than this is not one the caches wrote: a miss."""
_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def read_entry(path: Path, texts: tuple[str, ...]) -> tuple[dict[str, Any], Usage] | None:
    """The entry at `path` and its usage when it is whole: a JSON object whose `texts` fields
    are strings and whose `usage` holds token counts; None (a miss) for anything else."""
    try:
        with open_regular(path) as handle:
            data = handle.read(MAX_ENTRY_BYTES + 1)
        record = json.loads(data) if len(data) <= MAX_ENTRY_BYTES else None
    except (OSError, ValueError, RecursionError, NotInside):
        return None
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in texts):
        return None
    usage = checked_usage(record.get("usage"))
    return None if usage is None else (record, usage)


def checked_usage(value: Any) -> Usage | None:
    """`value` (a cached usage, the API's names) as a Usage when every count is a token count
    (`usage_count`'s rules: a whole number from 0 to `MAX_TOKENS`); None otherwise."""
    if not isinstance(value, dict):
        return None
    for name in _COUNTS:
        count, bad = usage_count(value.get(name))
        if bad or count is None:
            return None
    try:
        return Usage.from_api({name: int(value[name]) for name in _COUNTS})
    except ValueError:
        return None


def write_entry(path: Path, record: dict[str, Any]) -> None:
    """Write `record` as the entry at `path`, whole or not at all; a cache that cannot be
    written (a folder in its place, a read-only disk) is left as it is."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(record).encode())
