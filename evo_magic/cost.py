"""What a model call costs in US dollars: the price table and the function that applies it,
and what a session spent.

Prices are USD per million tokens, per model family, in five rates: base input, output, cache
write with the 5-minute TTL, cache write with the 1-hour TTL, and cache read (the API's "cache
hits and refreshes"). `call_cost` prices one call's `Usage` (or the API's ``usage`` as JSON or
as the SDK's object): uncached input, output, cache reads, and cache writes split by TTL when
the usage says (``usage.cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``),
else all writes at the 5-minute rate (the API's default TTL).

The shipped table (`DEFAULT_PRICES`) is the catalog's prices (`evo_magic.catalog`, which says
where each rate comes from and when it was read; ``PRICES_SOURCE`` and ``OPENAI_PRICES_SOURCE``
in full). Claude Haiku 5.5 has two price bands: a prompt (input plus cache reads and writes) of
more than 100,000 tokens is billed at the higher band on every token of that call, output
included. Fast mode (``usage.speed == "fast"``), the Batch API discount and regional-endpoint
premiums are not modelled: such calls are priced at the standard rates.

Every rate is a finite number of USD per million tokens from 0 to `MAX_RATE` (10,000): a rate
outside that (a typo, 1e308) is refused with a ValueError naming the model and the rate, so a
cost never becomes ``inf``. `validate_prices` checks a user's setting without building a session.

Model ids map to their family by the catalog's `model_family` (a snapshot date, a Vertex
``@date``, a Bedrock ``anthropic.`` prefix or ``-v1:0`` suffix and a ``[1m]`` context tag are
dropped), so ids from Claude Code and cloud transcripts find their row. An id that maps to no
row has no price: `call_cost` returns None and the caller says so (once).

Users override rates with `PriceTable.with_overrides` (what ``Session(prices=...)`` and
``%config`` pass through): a mapping from model id to a `Price` or to a dict of the rates to
change, e.g. ``{"claude-sonnet-5-5": {"cache_read": 0.2}}``; a new model needs at least
``input`` and ``output`` (its cache rates then follow the standard multipliers 1.25x, 2x, 0.1x).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from evo_magic import catalog
from evo_magic.catalog import (
    OPENAI_PRICES_AS_OF,
    OPENAI_PRICES_SOURCE,
    PRICES_AS_OF,
    PRICES_SOURCE,
    model_family,
)
from evo_magic.price import (
    MAX_RATE,
    RATE_FIELDS,
    READ_MULTIPLIER,
    WRITE_1H_MULTIPLIER,
    WRITE_5M_MULTIPLIER,
    LongPromptTier,
    Price,
)
from evo_magic.usage import Usage

# Names re-exported from the catalog and the price module are kept for existing importers.
__all__ = [
    "DEFAULT_PRICES",
    "MAX_RATE",
    "OPENAI_PRICES_AS_OF",
    "OPENAI_PRICES_SOURCE",
    "PRICES_AS_OF",
    "PRICES_SOURCE",
    "RATE_FIELDS",
    "CallCost",
    "Ledger",
    "LongPromptTier",
    "Price",
    "PriceTable",
    "Spending",
    "add_costs",
    "call_cost",
    "model_family",
    "price_table",
    "unpriced_notice",
    "usage_cost",
    "validate_prices",
]

PER_MILLION = 1_000_000


Overrides = Mapping[str, Price | Mapping[str, Any]]
"""Model id -> a `Price`, or a mapping of the rates to change."""


@dataclass(frozen=True)
class CallCost:
    """A call's cost in USD, by kind of token."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float

    @property
    def cache_write(self) -> float:
        return self.cache_write_5m + self.cache_write_1h

    @property
    def total(self) -> float:
        return self.input + self.output + self.cache_read + self.cache_write


class PriceTable:
    """Prices by model family, with the date and source of the figures.

    Keys are normalised by `model_family`, so any id of a model finds its row.
    """

    def __init__(self, prices: Mapping[str, Price], *, as_of: str, source: str) -> None:
        self._prices = {model_family(model): price for model, price in prices.items()}
        self.as_of = as_of
        self.source = source

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.lookup(model) is not None

    def __len__(self) -> int:
        return len(self._prices)

    def models(self) -> list[str]:
        """The model families priced, sorted."""
        return sorted(self._prices)

    def lookup(self, model: str) -> Price | None:
        """The price of ``model`` (any id of it), or None when the table has no row for it."""
        return self._prices.get(model_family(model))

    def with_overrides(self, overrides: Overrides | None) -> PriceTable:
        """A copy of this table with ``overrides`` applied; this table is left unchanged.

        Each value is a `Price` (replaces the row) or a mapping of rate names to numbers:
        rates not given keep the row's values; a model without a row must give ``input`` and
        ``output``, and its cache rates default to the standard multipliers. Raises ValueError
        naming the model and field for an unknown field or a rate that is not a number >= 0.
        """
        prices = dict(self._prices)
        for model, override in (overrides or {}).items():
            if not isinstance(model, str) or not model.strip():
                raise ValueError(f"price override key must be a model id, not {model!r}")
            family = model_family(model)
            try:
                prices[family] = _overridden(prices.get(family), override)
            except ValueError as exc:
                raise ValueError(f"price override for {model!r}: {exc}") from None
        source = self.source if not overrides else f"{self.source}; user overrides"
        return PriceTable(prices, as_of=self.as_of, source=source)


def _overridden(base: Price | None, override: Price | Mapping[str, Any]) -> Price:
    if isinstance(override, Price):
        return override
    if not isinstance(override, Mapping):
        raise ValueError(f"expected a Price or a mapping of rates, not {type(override).__name__}")
    allowed = {f.name for f in fields(Price)}
    unknown = sorted(set(override) - allowed)
    if unknown:
        raise ValueError(f"unknown field(s) {unknown}; expected some of {sorted(allowed)}")
    if base is not None:
        return replace(base, **override)
    missing = [name for name in ("input", "output") if name not in override]
    if missing:
        raise ValueError(f"a model without a price needs {missing}")
    base_input = _number(override["input"])
    rates = {
        "cache_write_5m": base_input * WRITE_5M_MULTIPLIER,
        "cache_write_1h": base_input * WRITE_1H_MULTIPLIER,
        "cache_read": base_input * READ_MULTIPLIER,
        **override,
    }
    return Price(**rates)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"rates must be numbers, not {value!r}")
    if not math.isfinite(value) or not 0 <= value <= MAX_RATE:
        raise ValueError(f"rates must be finite numbers from 0 to {MAX_RATE:,.0f}, not {value!r}")
    return float(value)


def call_cost(usage: Any, model: str, prices: PriceTable | None = None) -> CallCost | None:
    """The USD cost of one call of ``model`` whose usage is ``usage``; None for an unknown model.

    ``usage`` is a `Usage`, or anything `Usage.from_api` reads (the API's JSON ``usage``, the
    SDK's object). ``prices`` defaults to `DEFAULT_PRICES`. See `usage_cost` for the rule.
    """
    price = (prices or DEFAULT_PRICES).lookup(model)
    if price is None:
        return None
    return usage_cost(usage if isinstance(usage, Usage) else Usage.from_api(usage), price)


def usage_cost(usage: Usage, price: Price) -> CallCost:
    """What a call with ``usage`` costs at ``price``: the one pricing rule of the project (live
    calls, replay and the calls of loaded transcripts all come here).

    Cache writes are priced by TTL as `Usage.cache_writes` splits them (all at the 5-minute
    rate when the usage has no split). For a model with long-prompt bands, a call whose prompt
    (input plus cache reads and writes) exceeds a band's threshold is priced entirely at the
    highest band it exceeds.
    """
    price = band(price, usage.context_tokens)
    write_5m, write_1h = usage.cache_writes()
    return CallCost(
        input=usage.input_tokens * price.input / PER_MILLION,
        output=usage.output_tokens * price.output / PER_MILLION,
        cache_read=usage.cache_read_input_tokens * price.cache_read / PER_MILLION,
        cache_write_5m=write_5m * price.cache_write_5m / PER_MILLION,
        cache_write_1h=write_1h * price.cache_write_1h / PER_MILLION,
    )


def band(price: Price, prompt_tokens: int) -> Price:
    """The band of ``price`` a prompt of ``prompt_tokens`` is billed at (bands nest: each
    `LongPromptTier` may have a higher one)."""
    tier = price.long_prompt
    while tier is not None and prompt_tokens > tier.threshold_tokens:
        price, tier = tier.price, tier.price.long_prompt
    return price


def price_table(prices: PriceTable | Overrides | None) -> PriceTable:
    """The table ``prices`` describes: a `PriceTable` as it is, a mapping of overrides applied
    to `DEFAULT_PRICES` (see `PriceTable.with_overrides`), None for `DEFAULT_PRICES`."""
    if prices is None:
        return DEFAULT_PRICES
    if isinstance(prices, PriceTable):
        return prices
    if not isinstance(prices, Mapping):
        raise ValueError(
            "prices must be a PriceTable or a mapping of model id to rates, e.g. "
            f"{{'claude-sonnet-5-5': {{'cache_read': 0.2}}}}, not {type(prices).__name__}"
        )
    return DEFAULT_PRICES.with_overrides(prices)


def validate_prices(value: Any) -> Any:
    """`value` unchanged if it is a valid prices setting (None, a `PriceTable`, or a mapping of
    model id to a `Price` or to rates, each rate a finite number from 0 to `MAX_RATE`); else a
    ValueError saying which model and rate is wrong. For settings layers (``%config``) that
    check a value before they store it."""
    price_table(value)
    return value


def unpriced_notice(models: Any, prices: PriceTable | None = None) -> str | None:
    """One notice naming every model of ``models`` that ``prices`` (default: `DEFAULT_PRICES`)
    has no row for, so their costs are NA; None when every model has a price. Missing and
    empty model names are not models."""
    table = prices or DEFAULT_PRICES
    missing = sorted(
        {m for m in models if isinstance(m, str) and m.strip() and table.lookup(m) is None}
    )
    if not missing:
        return None
    names = ", ".join(repr(m) for m in missing)
    plural = "s" if len(missing) > 1 else ""
    return (
        f"No price for model{plural} {names}: the cost of their calls is not known (shown as "
        f"NA). Give one with prices={{{missing[0]!r}: {{'input': ..., 'output': ...}}}}."
    )


# -- what a session spent ------------------------------------------------------------------


@dataclass(frozen=True)
class Spending:
    """USD spent by a run of model calls: the agent's calls and the summaries apart, each with
    how many calls had no price. Subtract two snapshots for what happened in between."""

    calls_usd: float = 0.0
    """The agent's model calls that had a price."""
    summaries_usd: float = 0.0
    """The summarisation calls that had a price."""
    unpriced_calls: int = 0
    unpriced_summaries: int = 0

    @property
    def calls_cost_usd(self) -> float | None:
        """The agent's calls; None (not known) when one of them had no price."""
        return None if self.unpriced_calls else self.calls_usd

    @property
    def summaries_cost_usd(self) -> float | None:
        """The summarisation calls; None when one of them had no price."""
        return None if self.unpriced_summaries else self.summaries_usd

    @property
    def total_usd(self) -> float | None:
        """Everything; None when any call had no price."""
        if self.unpriced_calls or self.unpriced_summaries:
            return None
        return self.calls_usd + self.summaries_usd

    def __sub__(self, earlier: Spending) -> Spending:
        return Spending(
            self.calls_usd - earlier.calls_usd,
            self.summaries_usd - earlier.summaries_usd,
            self.unpriced_calls - earlier.unpriced_calls,
            self.unpriced_summaries - earlier.unpriced_summaries,
        )


UNPRICED_NOTICE = (
    "No price for model {model!r}: the cost of its calls is not known (shown as NA). Give one "
    "with Session(prices={{{model!r}: {{'input': ..., 'output': ...}}}}) or "
    "%config AgentMagics.prices."
)


@dataclass
class Ledger:
    """What a session's model calls cost: each call priced from `prices` as it returns, the
    running `spent`, and the models that had no price (said once each)."""

    prices: PriceTable = field(default_factory=lambda: DEFAULT_PRICES)
    spent: Spending = Spending()
    _said: set[str] = field(default_factory=set, repr=False)

    def charge(self, usage: Usage, model: str, *, summary: bool = False) -> float | None:
        """The USD cost of one call (added to `spent`); None when ``model`` has no price."""
        cost = call_cost(usage, model, self.prices)
        spent = self.spent
        if cost is None:
            if summary:
                self.spent = replace(spent, unpriced_summaries=spent.unpriced_summaries + 1)
            else:
                self.spent = replace(spent, unpriced_calls=spent.unpriced_calls + 1)
            return None
        if summary:
            self.spent = replace(spent, summaries_usd=spent.summaries_usd + cost.total)
        else:
            self.spent = replace(spent, calls_usd=spent.calls_usd + cost.total)
        return cost.total

    def unpriced_notice(self, model: str) -> str | None:
        """What to tell the user about ``model`` having no price: the first time only (per model
        family), None afterwards or when it has a price."""
        family = model_family(model)
        if family in self._said or self.prices.lookup(model) is not None:
            return None
        self._said.add(family)
        return UNPRICED_NOTICE.format(model=model)


def add_costs(a: float | None, b: float | None) -> float | None:
    """The sum of two costs, None (not known) when either is."""
    return None if a is None or b is None else a + b


DEFAULT_PRICES = PriceTable(
    catalog.prices(),
    as_of=PRICES_AS_OF,
    source=f"{PRICES_SOURCE}; {OPENAI_PRICES_SOURCE}",
)
"""The shipped prices: the catalog's, of every Claude model from the 4 family on (and Haiku
3.5), of OpenAI's GPT-5 family as Codex uses it, and of the offline stand-in (zero)."""
