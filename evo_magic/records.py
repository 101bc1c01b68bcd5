"""The settings records of a transcript, written and read in one place.

A session writes a `session_start` record, then a record whenever a setting changes (between
asks): `settings` (every setting that has no record of its own), `policy`, `cache`, `prices`,
`strategies`, and `pin` / `unpin` (with where in the history they happened). Replay reads them
back as `Change`s and applies each from its line on. What a record holds is data: reading one
never imports or runs anything it names (strategies stay descriptions; see
`strategies.registry.rebuild`), and a value that does not make a valid setting is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from evo_magic.compact.pins import Pin
from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import RATE_FIELDS, PriceTable, price_table
from evo_magic.prompt_cache import CacheSettings
from evo_magic.settings import SessionSettings

Record = tuple[str, dict[str, Any]]
"""A record to write: its kind, and its fields."""

SETTINGS_KINDS = ("session_start", "policy", "strategies", "cache", "prices", "pin", "unpin")
"""The kinds replay reads back (a `settings` record holds nothing replay applies)."""

OWN_RECORDS = frozenset({"policy", "caching", "cache_ttl", "cache_static_ttl", "prices"})
"""Settings with records of their own (`policy`, `cache`, `prices`); the others go in
`settings` records, at the start and when they change."""


# -- written --------------------------------------------------------------------------------


def start_records(
    settings: SessionSettings,
    prices: PriceTable,
    strategies: list[dict[str, Any]],
    **facts: Any,
) -> list[Record]:
    """What a session records when it starts: `session_start` (its `facts`: model, workspace,
    tools, where its outputs are shown...; its policy, strategies, caching and prices), then
    every other setting in a `settings` record."""
    start = {
        **facts,
        "system": settings.system,
        "policy": policy_record(settings.policy),
        "strategies": strategies,
        "max_turns": settings.max_turns,
        "cache": asdict(settings.cache),
        "prices": price_record(prices),
    }
    rest = _recorded(settings, skip=frozenset({"system_prompt", "max_turns"}))
    return [("session_start", start), ("settings", {"settings": rest})]


def change_records(
    old: SessionSettings, new: SessionSettings, old_prices: PriceTable, new_prices: PriceTable
) -> list[Record]:
    """The records that say what changed from `old` to `new` (none when nothing did)."""
    records: list[Record] = []
    if new.policy != old.policy:
        records.append(("policy", {"policy": policy_record(new.policy)}))
    if new.cache != old.cache:
        records.append(("cache", {"cache": asdict(new.cache)}))
    if price_record(new_prices) != price_record(old_prices):
        records.append(("prices", {"prices": price_record(new_prices)}))
    before = _recorded(old)
    changed = {k: v for k, v in _recorded(new).items() if before[k] != v}
    if changed:
        records.append(("settings", {"settings": changed}))
    return records


def strategies_record(described: list[dict[str, Any]], tools: list[str] | None = None) -> Record:
    """The strategies run from here on, described (`strategies.registry.describe`), and the
    names of the tools offered with them (some strategies offer one)."""
    record: dict[str, Any] = {"strategies": described}
    if tools is not None:
        record["tools"] = tools
    return ("strategies", record)


def pin_record(kind: str, fields_: dict[str, Any], epoch: int, index: int) -> Record:
    """A `pin` or `unpin` record, with where in the history it happened: replay applies it
    before the message `index` of `epoch`."""
    return (kind, {**fields_, "epoch": epoch, "index": index})


def policy_record(policy: CompactPolicy) -> dict[str, Any]:
    return dict(vars(policy))


def price_record(table: PriceTable) -> dict[str, dict[str, float]]:
    """The rates of `table` that differ from the shipped ones, by model (what a `prices`
    record holds; `price_table` of it is the table again)."""
    shipped = price_table(None)
    return {
        model: {rate: getattr(price, rate) for rate in RATE_FIELDS}
        for model in table.models()
        if (price := table.lookup(model)) is not None and price != shipped.lookup(model)
    }


def _recorded(settings: SessionSettings, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {
        f.name: getattr(settings, f.name)
        for f in fields(settings)
        if f.name not in OWN_RECORDS and f.name not in skip
    }


# -- read -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One setting from one record: `name` is "policy", "strategies", "cache", "prices",
    "outputs", "tools", "pin" or "unpin"; `value` a CompactPolicy, a list of strategy
    descriptions (None: the default pipeline), CacheSettings, a PriceTable, the folder saved
    outputs are shown in, the names of the tools offered, a Pin or the id of a pin removed.
    It applies to what comes after `line` of the file."""

    line: int
    name: str
    value: Any


def changes_of(line: int, record: Mapping[str, Any]) -> list[Change]:
    """The settings one record (at `line`) sets; what does not make a valid value is left out."""
    if record.get("kind") in ("pin", "unpin"):
        pin = pin_from_record(record)
        return [] if pin is None else [Change(line, str(record["kind"]), pin)]
    changes = []
    if "strategies" in record or record.get("kind") == "session_start":
        described = record.get("strategies")
        if described is None or _descriptions(described):
            changes.append(Change(line, "strategies", described))
    if isinstance(record.get("outputs"), str):
        changes.append(Change(line, "outputs", record["outputs"]))
    tools = record.get("tools")
    if isinstance(tools, list) and all(isinstance(name, str) for name in tools):
        changes.append(Change(line, "tools", tuple(tools)))
    readers = {"policy": policy_from_record, "cache": cache_from_record}
    readers["prices"] = prices_from_record
    for name, read in readers.items():
        if name in record and (value := read(record[name])) is not None:
            changes.append(Change(line, name, value))
    return changes


def _descriptions(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, Mapping) for item in value)


def policy_from_record(record: Any) -> CompactPolicy | None:
    """The CompactPolicy a `policy` record describes (fields of other versions ignored); None
    when it is not one."""
    if not isinstance(record, dict):
        return None
    known = {f.name for f in fields(CompactPolicy)}
    try:
        return CompactPolicy(**{k: v for k, v in record.items() if k in known})
    except (TypeError, ValueError):
        return None


def pin_from_record(record: Mapping[str, Any]) -> Pin | int | None:
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
