"""Intervals the analysis reports beside its estimates, written once: Wilson's for a rate (k of
n), a percentile bootstrap for a mean of counts."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z_95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
"""Fixed, so the same rows give the same interval on every run and every engine."""


def wilson(correct: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of `correct` successes in `total` (NaN, NaN when empty)."""
    if total <= 0:
        return math.nan, math.nan
    p = correct / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    low = 0.0 if correct == 0 else max(centre - half, 0.0)  # exact at the ends
    high = 1.0 if correct == total else min(centre + half, 1.0)
    return low, high


def bootstrap_mean(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean of `values` (NaN, NaN when empty; the value
    itself, twice, for one value or values all alike). Seeded: the same values give the same
    interval."""
    import numpy as np

    data = np.asarray([v for v in values if v == v], dtype=float)  # NaN left out
    if data.size == 0:
        return math.nan, math.nan
    if data.size == 1 or float(data.min()) == float(data.max()):
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = rng.integers(0, data.size, size=(BOOTSTRAP_RESAMPLES, data.size))
    means = data[draws].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
