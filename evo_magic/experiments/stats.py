"""The intervals of an experiment's summary: Wilson for a success rate, a percentile bootstrap
for a mean (cost, a paired difference)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of `confidence` (1.96 for 0.95)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of `successes` out of `n` (NaNs when `n` is 0); it stays in
    [0, 1] and is not empty at 0 or n successes, unlike the normal approximation."""
    if n == 0:
        return math.nan, math.nan
    z = z_of(confidence)
    rate = successes / n
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_mean(
    values: Sequence[float], seed: int, confidence: float = 0.95, resamples: int = 2000
) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean of `values` (NaNs when there are none),
    the same for the same `seed`."""
    import numpy as np

    data = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if not len(data):
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
