"""The settings timeline of an evo_magic session: every `session_start`, `policy`,
`strategies`, `cache` and `prices` record, where it was written, read as data.

A session writes a record whenever a setting changes (between asks, e.g. through `%config`);
replay applies each from that place on. Nothing in a record is imported or run: strategies
stay descriptions here and are made again only from the registry (`registry.rebuild`).
Reading is bounded: only the lines that hold these records are parsed.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evo_magic.compact.pins import Pin
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import PriceTable, price_table
from evo_magic.prompt_cache import CacheSettings

if TYPE_CHECKING:
    import pandas as pd

SETTINGS_KINDS = ("session_start", "policy", "strategies", "cache", "prices", "pin", "unpin")


@dataclass(frozen=True)
class Change:
    """One setting from one record: `name` is "policy", "strategies", "cache", "prices", "pin"
    or "unpin"; `value` a CompactPolicy, a list of strategy descriptions (None: the default
    pipeline), CacheSettings, a PriceTable, a Pin or the id of a pin removed. It applies to
    what comes after `line` of the session file."""

    line: int
    name: str
    value: Any


def read_timeline(events: pd.DataFrame, session_id: str) -> list[Change]:
    """The settings changes of `session_id`, in file order (its `events` rows name the
    records' files and lines)."""
    import pandas as pd

    mine = events[
        (events["session_id"].astype(object) == session_id)
        & events["kind"].astype(object).isin(SETTINGS_KINDS)
    ]
    wanted: dict[str, set[int]] = {}
    for row in mine.itertuples():
        if not pd.isna(row.line):
            wanted.setdefault(str(row.file), set()).add(int(row.line))
    changes: list[Change] = []
    for file, lines in wanted.items():
        for line, record in read_records(Path(file), lines):
            changes += _changes(line, record)
    return sorted(changes, key=lambda change: change.line)


def read_records(path: Path, lines: set[int]) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects at `lines` (1-based) of `path`; unreadable ones are left out."""
    found = []
    last = max(lines)
    try:
        with open(path, encoding="utf-8") as handle:
            for number, text in enumerate(handle, start=1):
                if number in lines:
                    try:
                        record = json.loads(text)
                    except (ValueError, RecursionError):
                        continue
                    if isinstance(record, dict):
                        found.append((number, record))
                if number >= last:
                    break
    except OSError as exc:
        warnings.warn(f"cannot read the settings of {path}: {exc}", stacklevel=4)
    return found


def _changes(line: int, record: dict[str, Any]) -> list[Change]:
    if record.get("kind") in ("pin", "unpin"):
        pin = pin_from_record(record)
        return [] if pin is None else [Change(line, str(record["kind"]), pin)]
    changes = []
    if "policy" in record:
        policy = policy_from_record(record["policy"])
        if policy is not None:
            changes.append(Change(line, "policy", policy))
    if "strategies" in record or record.get("kind") == "session_start":
        described = record.get("strategies")
        if described is None or _descriptions(described):
            changes.append(Change(line, "strategies", described))
    if "cache" in record:
        cache = cache_from_record(record["cache"])
        if cache is not None:
            changes.append(Change(line, "cache", cache))
    if "prices" in record:
        prices = prices_from_record(record["prices"])
        if prices is not None:
            changes.append(Change(line, "prices", prices))
    return changes


def _descriptions(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, Mapping) for item in value)


def policy_from_record(record: Any) -> CompactPolicy | None:
    """The CompactPolicy a `policy` record describes (unknown fields ignored); None when it is
    not one. A record without `cache_aware` is from before micro-compaction became cache-aware
    by default: it cleared eagerly."""
    if not isinstance(record, dict):
        return None
    known = {f.name for f in fields(CompactPolicy)}
    settings = {"cache_aware": False, **{k: v for k, v in record.items() if k in known}}
    try:
        return CompactPolicy(**settings)
    except (TypeError, ValueError):
        return None


def pin_from_record(record: dict[str, Any]) -> Pin | int | None:
    """The pin a `pin` record sets, or the id an `unpin` record removes; None when the record
    is not one (a transcript is data: types are checked)."""
    pin_id = record.get("id")
    if not isinstance(pin_id, int) or isinstance(pin_id, bool):
        return None
    if record.get("kind") == "unpin":
        return pin_id
    text, path = record.get("text"), record.get("path")
    if not isinstance(text, str) or not (path is None or isinstance(path, str)):
        return None
    return Pin(pin_id, text, path)


def cache_from_record(record: Any) -> CacheSettings | None:
    """The CacheSettings a `cache` record describes; None when it is not one."""
    if not isinstance(record, dict):
        return None
    known = {f.name for f in fields(CacheSettings)}
    try:
        return CacheSettings(**{k: v for k, v in record.items() if k in known})
    except (TypeError, ValueError):
        return None


def prices_from_record(record: Any) -> PriceTable | None:
    """The price table a `prices` record describes (overrides of the shipped table by model);
    None when it is not one."""
    if not isinstance(record, dict):
        return None
    try:
        return price_table(record)
    except (TypeError, ValueError):
        return None
