"""What a model call costs in US dollars: the price table and the function that applies it.

Prices are USD per million tokens, per model family, in five rates: base input, output, cache
write with the 5-minute TTL, cache write with the 1-hour TTL, and cache read (the API's "cache
hits and refreshes"). `call_cost` prices one call's `Usage` (or the API's ``usage`` as JSON or
as the SDK's object): uncached input, output, cache reads, and cache writes split by TTL when
the usage says (``usage.cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``),
else all writes at the 5-minute rate (the API's default TTL).

The shipped table (`DEFAULT_PRICES`) was compiled on ``PRICES_AS_OF`` from Anthropic's pricing
and model pages (platform.claude.com/docs/en/about-claude/pricing, .../models/<model>/overview);
``PRICES_SOURCE`` says so in full. Two later changes were taken from price trackers that re-read
the live pricing page, as the copy of the official page we could read predates them:

- Claude Sonnet 5.5 cache reads cut from $0.20 to $0.10 per million tokens on 2026-10-07;
- Claude Fable 5.2 and Claude Mythos 5.2 (released 2026-11-09) at $8 / $40, cache writes
  $10 (5m) and $16 (1h), cache reads $0.20.

Claude Haiku 5.5 has two price bands: a prompt (input plus cache reads and writes) of more than
100,000 tokens is billed at the higher band on every token of that call, output included. Fast
mode (``usage.speed == "fast"``), the Batch API discount and regional-endpoint premiums are not
modelled: such calls are priced at the standard rates.

OpenAI's GPT-5 family (the models of Codex sessions) is priced from OpenAI's model pages
(developers.openai.com/api/docs/models/<model>), read on ``OPENAI_PRICES_AS_OF``; rates missing
there (gpt-5-mini, gpt-5.2, gpt-5.2-codex, gpt-5.3-codex) from GitHub's table of the models'
OpenAI list prices (github/docs, data/tables/copilot/models-and-pricing.yml), and gpt-5.1-codex-mini
from OpenRouter's listing, its cached input at the family's 10%. OpenAI bills no cache writes: a
cached prefix is written at the input rate, and read at the "cached input" rate (the
``cache_read`` column). Codex variants without a page of their own (gpt-5.1-codex,
gpt-5.1-codex-max) are priced as their base model, as OpenAI lists the codex models it prices.

Every rate is a finite number of USD per million tokens from 0 to `MAX_RATE` (10,000): a rate
outside that (a typo, 1e308) is refused with a ValueError naming the model and the rate, so a
cost never becomes ``inf``. `validate_prices` checks a user's setting without building a session.

Model ids map to their family by `model_family`: a snapshot date (``claude-sonnet-4-5-20250929``),
a Vertex ``@date``, a Bedrock ``anthropic.`` prefix or ``-v1:0`` suffix and a ``[1m]`` context
tag are dropped, so ids from Claude Code and cloud transcripts find their row. An id that maps to
no row has no price: `call_cost` returns None and the caller says so (once).

Users override rates with `PriceTable.with_overrides` (what ``Session(prices=...)`` and
``%config`` pass through): a mapping from model id to a `Price` or to a dict of the rates to
change, e.g. ``{"claude-sonnet-5-5": {"cache_read": 0.2}}``; a new model needs at least
``input`` and ``output`` (its cache rates then follow the standard multipliers 1.25x, 2x, 0.1x).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from evo_magic.usage import Usage

__all__ = [
    "DEFAULT_PRICES",
    "PRICES_AS_OF",
    "PRICES_SOURCE",
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
    "validate_prices",
]

PRICES_AS_OF = "2026-12-03"
PRICES_SOURCE = (
    "Anthropic pricing and model overview pages (platform.claude.com/docs/en/about-claude/pricing, "
    "platform.claude.com/docs/en/models/<model>/overview), read 2026-12-03; Sonnet 5.5 cache-read "
    "cut (2026-10-07) and Fable/Mythos 5.2 rates (2026-11-09) from price trackers checked against "
    "the live page on 2026-12-01"
)

OPENAI_PRICES_AS_OF = "2026-12-04"
OPENAI_PRICES_SOURCE = (
    "OpenAI model pages (developers.openai.com/api/docs/models/gpt-5, gpt-5-codex, gpt-5-nano, "
    "gpt-5.1), GitHub's table of OpenAI list prices (github/docs "
    "data/tables/copilot/models-and-pricing.yml: gpt-5-mini, gpt-5.2, gpt-5.2-codex, "
    "gpt-5.3-codex), OpenRouter (gpt-5.1-codex-mini), read 2026-12-04"
)

PER_MILLION = 1_000_000
MAX_RATE = 10_000.0
"""The highest rate accepted, USD per million tokens: far above any real model's, low enough
that a mistyped rate is caught before a cost is reported."""
# The standard cache multipliers of the base input rate (pricing page, "Prompt caching").
WRITE_5M_MULTIPLIER = 1.25
WRITE_1H_MULTIPLIER = 2.0
READ_MULTIPLIER = 0.1


@dataclass(frozen=True)
class Price:
    """One model's rates, in USD per million tokens."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    long_prompt: LongPromptTier | None = None
    """A higher band for long prompts (Haiku 5.5), or None when the model has one band."""

    def __post_init__(self) -> None:
        if self.long_prompt is not None and not isinstance(self.long_prompt, LongPromptTier):
            raise ValueError("price long_prompt must be a LongPromptTier or None")
        for name in RATE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"price {name} must be a number of USD per million tokens")
            if not math.isfinite(value) or not 0 <= value <= MAX_RATE:
                raise ValueError(
                    f"price {name} must be a finite number of USD per million tokens from 0 "
                    f"to {MAX_RATE:,.0f}, not {value!r}"
                )

    @classmethod
    def standard(cls, input: float, output: float) -> Price:
        """A price whose cache rates follow the standard multipliers of ``input``."""
        return cls(
            input=input,
            output=output,
            cache_write_5m=input * WRITE_5M_MULTIPLIER,
            cache_write_1h=input * WRITE_1H_MULTIPLIER,
            cache_read=input * READ_MULTIPLIER,
        )


@dataclass(frozen=True)
class LongPromptTier:
    """Rates that replace the base band for a call whose prompt exceeds ``threshold_tokens``."""

    threshold_tokens: int
    price: Price


Overrides = Mapping[str, Price | Mapping[str, Any]]
"""Model id -> a `Price`, or a mapping of the rates to change."""

RATE_FIELDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")


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
    SDK's object). ``prices`` defaults to `DEFAULT_PRICES`. Cache writes are priced by TTL as
    `Usage.cache_writes` splits them (all at the 5-minute rate when the usage has no split).
    For a model with a long-prompt band, a call whose prompt exceeds the threshold is priced
    entirely at that band.
    """
    price = (prices or DEFAULT_PRICES).lookup(model)
    if price is None:
        return None
    if not isinstance(usage, Usage):
        usage = Usage.from_api(usage)
    tier = price.long_prompt
    if tier is not None and usage.context_tokens > tier.threshold_tokens:
        price = tier.price
    write_5m, write_1h = usage.cache_writes()
    return CallCost(
        input=usage.input_tokens * price.input / PER_MILLION,
        output=usage.output_tokens * price.output / PER_MILLION,
        cache_read=usage.cache_read_input_tokens * price.cache_read / PER_MILLION,
        cache_write_5m=write_5m * price.cache_write_5m / PER_MILLION,
        cache_write_1h=write_1h * price.cache_write_1h / PER_MILLION,
    )


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


_CONTEXT_TAG = re.compile(r"\[[^\]]*\]$")  # "claude-sonnet-5-5[1m]"
_REGION_PREFIX = re.compile(r"^(?:us|eu|apac|au|jp|global)\.(?=anthropic\.)")
_VENDOR_PREFIX = re.compile(r"^(?:anthropic[./])")
_VERTEX_DATE = re.compile(r"@\d{8}$")  # "claude-sonnet-4-5@20250929"
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")  # "...-20250929-v1:0"
_SNAPSHOT_DATE = re.compile(r"-\d{8}$")  # "claude-sonnet-4-5-20250929"
_OPENAI_DATE = re.compile(r"^(gpt-.*)-\d{4}-\d{2}-\d{2}$")  # "gpt-5-2025-08-07"
_OPENAI_VENDOR = re.compile(r"^openai/")  # "openai/gpt-5" (routers)
_MAJOR_ALIAS = re.compile(r"^(claude-[a-z]+-\d+)-0$")  # "claude-opus-4-0" is Opus 4


def model_family(model: str) -> str:
    """The family id of ``model``: lower case, without snapshot date or platform decorations.

    ``claude-sonnet-4-5-20250929``, ``anthropic.claude-sonnet-4-5-20250929-v1:0``,
    ``claude-sonnet-4-5@20250929`` and ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` all give
    ``claude-sonnet-4-5``; the alias ``claude-opus-4-0`` gives ``claude-opus-4``. Only whole,
    known decorations are removed, so a dated id never lands on a neighbouring model
    (``claude-fable-5-20260609`` is Fable 5, not Fable 5.2).
    """
    family = model.strip().lower()
    family = _CONTEXT_TAG.sub("", family)
    family = _REGION_PREFIX.sub("", family)
    family = _VENDOR_PREFIX.sub("", family)
    family = _VERTEX_DATE.sub("", family)
    family = _BEDROCK_VERSION.sub("", family)
    family = _SNAPSHOT_DATE.sub("", family)
    family = _MAJOR_ALIAS.sub(r"\1", family)
    family = _OPENAI_DATE.sub(r"\1", _OPENAI_VENDOR.sub("", family))
    return family.removesuffix("-latest")


def _row(input: float, output: float, write_5m: float, write_1h: float, read: float) -> Price:
    return Price(input, output, write_5m, write_1h, read)


_FABLE_5_2 = _row(8, 40, 10, 16, 0.20)
_FABLE_5_1 = _row(10, 50, 12.50, 20, 0.25)
_FABLE_5 = _row(10, 50, 12.50, 20, 1.00)
_OPUS_5_5 = _row(4, 20, 5, 8, 0.20)
_OPUS_4_5_TO_5 = _row(5, 25, 6.25, 10, 0.50)
_OPUS_4 = _row(15, 75, 18.75, 30, 1.50)
_SONNET_5_5 = _row(2, 10, 2.50, 4, 0.10)
_SONNET_5 = _row(2, 10, 2.50, 4, 0.20)
_SONNET_4 = _row(3, 15, 3.75, 6, 0.30)
_HAIKU_5_5 = Price(
    0.10,
    0.50,
    0.125,
    0.20,
    0.01,
    long_prompt=LongPromptTier(100_000, _row(0.50, 2.50, 0.625, 1.00, 0.05)),
)
_HAIKU_4_5 = _row(1, 5, 1.25, 2, 0.10)
_HAIKU_3_5 = _row(0.80, 4, 1, 1.60, 0.08)


def _openai(input: float, output: float, cached: float) -> Price:
    """An OpenAI rate: cache writes are billed as input (OpenAI charges nothing extra)."""
    return Price(input, output, input, input, cached)


_GPT_5 = _openai(1.25, 10, 0.125)
_GPT_5_MINI = _openai(0.25, 2, 0.025)
_GPT_5_NANO = _openai(0.05, 0.40, 0.005)
_GPT_5_2 = _openai(1.75, 14, 0.175)

DEFAULT_PRICES = PriceTable(
    {
        "claude-fable-5-2": _FABLE_5_2,
        "claude-mythos-5-2": _FABLE_5_2,
        "claude-fable-5-1": _FABLE_5_1,
        "claude-mythos-5-1": _FABLE_5_1,
        "claude-fable-5": _FABLE_5,
        "claude-mythos-5": _FABLE_5,
        "claude-opus-5-5": _OPUS_5_5,
        "claude-opus-5": _OPUS_4_5_TO_5,
        "claude-opus-4-8": _OPUS_4_5_TO_5,
        "claude-opus-4-7": _OPUS_4_5_TO_5,
        "claude-opus-4-6": _OPUS_4_5_TO_5,
        "claude-opus-4-5": _OPUS_4_5_TO_5,
        "claude-opus-4-1": _OPUS_4,
        "claude-opus-4": _OPUS_4,
        "claude-sonnet-5-5": _SONNET_5_5,
        "claude-sonnet-5": _SONNET_5,
        "claude-sonnet-4-6": _SONNET_4,
        "claude-sonnet-4-5": _SONNET_4,
        "claude-sonnet-4": _SONNET_4,
        "claude-haiku-5-5": _HAIKU_5_5,
        "claude-haiku-4-5": _HAIKU_4_5,
        "claude-3-5-haiku": _HAIKU_3_5,
        "gpt-5": _GPT_5,
        "gpt-5-codex": _GPT_5,
        "gpt-5-mini": _GPT_5_MINI,
        "gpt-5-nano": _GPT_5_NANO,
        "gpt-5.1": _GPT_5,
        "gpt-5.1-codex": _GPT_5,
        "gpt-5.1-codex-max": _GPT_5,
        "gpt-5.1-codex-mini": _GPT_5_MINI,
        "gpt-5.2": _GPT_5_2,
        "gpt-5.2-codex": _GPT_5_2,
        "gpt-5.3-codex": _GPT_5_2,
        # evo_magic's offline scripted stand-in: nothing is billed (override it to price an
        # offline run as if it were a model).
        "offline": _row(0, 0, 0, 0, 0),
    },
    as_of=PRICES_AS_OF,
    source=f"{PRICES_SOURCE}; {OPENAI_PRICES_SOURCE}",
)
"""The shipped prices of every Claude model from the 4 family on (and Haiku 3.5), of OpenAI's
GPT-5 family as Codex uses it, and of the offline stand-in (zero)."""
