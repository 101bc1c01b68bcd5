"""A model's rates in US dollars per million tokens: the value the catalog ships for each
model family (`evo_magic.catalog`) and the price table applies (`evo_magic.cost`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "MAX_RATE",
    "RATE_FIELDS",
    "READ_MULTIPLIER",
    "WRITE_1H_MULTIPLIER",
    "WRITE_5M_MULTIPLIER",
    "LongPromptTier",
    "Price",
]

MAX_RATE = 10_000.0
"""The highest rate accepted, USD per million tokens: far above any real model's, low enough
that a mistyped rate is caught before a cost is reported."""
RATE_FIELDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
# The standard cache multipliers of the base input rate (pricing page, "Prompt caching").
WRITE_5M_MULTIPLIER = 1.25
WRITE_1H_MULTIPLIER = 2.0
READ_MULTIPLIER = 0.1


@dataclass(frozen=True)
class Price:
    """One model's rates, in USD per million tokens: base input, output, cache write with the
    5-minute TTL, cache write with the 1-hour TTL, and cache read ("cache hits and refreshes").

    Every rate is a finite number from 0 to `MAX_RATE`: anything else (a typo, 1e308) raises
    ValueError naming the rate, so a cost never becomes ``inf``.
    """

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
