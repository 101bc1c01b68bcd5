"""Intervals reported beside estimates, written once: Wilson's for a rate (k of n), a
percentile bootstrap for a mean (of counts, costs, paired differences). Retention, rewind,
behaviour after compaction and experiments all use these."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
"""Fixed by default, so the same rows give the same interval on every run and every engine."""


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of `confidence` (1.96 for 0.95)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


Z_95 = z_of(0.95)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of `successes` out of `n` (NaN, NaN when `n` is 0): it stays
    in [0, 1], is exact at the ends, and is not empty at 0 or n successes, unlike the normal
    approximation."""
    if n <= 0:
        return math.nan, math.nan
    z = z_of(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes == 0 else max(centre - half, 0.0)
    high = 1.0 if successes == n else min(centre + half, 1.0)
    return low, high


def bootstrap_mean(
    values: Sequence[float],
    seed: int = BOOTSTRAP_SEED,
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean of `values` (NaN left out; NaN, NaN when
    none is left; the value itself, twice, for one value or values all alike). The same
    values and `seed` give the same interval."""
    import numpy as np

    data = np.asarray([v for v in values if v == v], dtype=float)  # NaN != NaN
    if data.size == 0:
        return math.nan, math.nan
    if data.size == 1 or float(data.min()) == float(data.max()):
        return float(data[0]), float(data[0])
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
