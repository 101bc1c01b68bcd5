"""The catalog as the docs' price table (`docs/caching-cost.md`, made by `evo_magic.doc_tables`):
one row per family, each figure with its source and date, then the sources in full."""

from __future__ import annotations

from evo_magic.catalog import FAMILIES, Family, Source
from evo_magic.price import RATE_FIELDS

__all__ = ["catalog_markdown"]


def catalog_markdown() -> str:
    """The catalog as the docs' Markdown price table, one row per family: window, minimum
    cacheable tokens, prices in USD per million tokens, and the source and date of each figure
    (prices, then window and features, then cache minimum), followed by the sources in full.
    The docs' table is this text (`evo_magic.doc_tables`; a test checks it)."""
    lines = [
        "| model family | window | cache minimum | input | output | cache write 5m "
        "| cache write 1h | cache read | source | date |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [_markdown_row(entry) for entry in FAMILIES.values()]
    lines += ["", _SOURCES_HEADING, ""]
    lines += [f"- {name}: {detail}" for name, detail in _source_notes().items()]
    return "\n".join(lines)


_SOURCES_HEADING = (
    "Sources (a figure marked *assumed* is not on its source's list: it is taken from its "
    "line's documented predecessors):"
)


def _markdown_row(entry: Family) -> str:
    name = f"`{entry.name}`"
    tier = entry.price.long_prompt if entry.price else None
    while tier is not None:
        band = " / ".join(_number(getattr(tier.price, rate)) for rate in RATE_FIELDS)
        name += f" (prompts over {tier.threshold_tokens:,} tokens: {band})"
        tier = tier.price.long_prompt
    window = _sourced(entry.window, entry.context_source)
    minimum = _sourced(entry.cache_minimum, entry.cache_source)
    rates = [_number(getattr(entry.price, r)) if entry.price else "—" for r in RATE_FIELDS]
    sources = _sources_of(entry)
    names = "; ".join(source.name for source in sources)
    dates = "; ".join(source.as_of or "—" for source in sources)
    return f"| {name} | {window} | {minimum} | {' | '.join(rates)} | {names} | {dates} |"


def _sourced(value: int | None, source: Source | None) -> str:
    if value is None:
        return "—"
    assumed = source is not None and source.assumed
    return f"{value:,} *assumed*" if assumed else f"{value:,}"


def _number(rate: float) -> str:
    return f"{rate:g}"


def _sources_of(entry: Family) -> list[Source]:
    """The row's sources in column order (prices, window, cache minimum), each once."""
    found: list[Source] = []
    for source in (entry.price_source, entry.context_source, entry.cache_source):
        if source is not None and all(source.name != seen.name for seen in found):
            found.append(source)
    return found


def _source_notes() -> dict[str, str]:
    """Each source's name and citation, in the order the table first uses them."""
    notes: dict[str, str] = {}
    for entry in FAMILIES.values():
        for source in _sources_of(entry):
            notes.setdefault(source.name, source.detail)
    return notes
