"""The one percentile every published figure uses: linear interpolation between closest ranks (numpy's and
Excel's PERCENTILE.INC default), q in 0..100; None for no values."""

from __future__ import annotations

import math
from typing import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    ordered = sorted(float(v) for v in values)
    if not ordered:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    position = (len(ordered) - 1) * q / 100
    lower, upper = math.floor(position), math.ceil(position)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def histogram_quantile(buckets: Iterable[tuple[float, float]], q: float) -> float | None:
    """The q-th percentile (0..100) of a Prometheus histogram given as cumulative (upper bound, count) buckets, the
    way PromQL's histogram_quantile estimates it: linear within the bucket that holds the rank, the lowest bucket
    starting at 0, and the highest finite bound when the rank falls in the +Inf bucket. None for no observations.
    (Counts are as scraped or as the difference of two scrapes, for the observations between them.)"""
    if not 0 <= q <= 100:
        raise ValueError(f"quantile q must be within 0..100, got {q}")
    ordered = sorted((float(bound), float(count)) for bound, count in buckets)
    if not ordered or ordered[-1][1] <= 0:
        return None
    total = ordered[-1][1]
    rank = total * q / 100
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound
