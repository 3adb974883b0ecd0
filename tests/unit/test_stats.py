"""One percentile definition (linear interpolation, numpy's default) for every published figure."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from trainyard.stats import histogram_quantile, percentile


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 50, None),
    ([7], 99, 7.0),
    ([1, 2, 3, 4], 50, 2.5),
    ([4, 1, 3, 2], 0, 1.0),
    ([4, 1, 3, 2], 100, 4.0),
    ([10, 20], 95, 19.5),
    (range(1, 101), 99, 99.01),
])
def test_percentile(values, q, expected):
    if expected is None:
        assert percentile(values, q) is None
    else:
        assert percentile(values, q) == pytest.approx(expected)


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50), st.floats(0, 100))
def test_agrees_with_numpy(values, q):
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("q", [-1, 101])
def test_q_outside_0_to_100_is_refused(q):
    """A fraction (0.99 for p99) is within 0..100 and would pass: callers write 99, the check guards typos."""
    with pytest.raises(ValueError, match="0..100"):
        percentile([1, 2], q)


INF = float("inf")


@pytest.mark.parametrize(("buckets", "q", "expected"), [
    ([], 99, None),
    ([(10, 0), (INF, 0)], 99, None),
    ([(10, 100), (20, 100), (INF, 100)], 50, 5.0),  # within the first bucket, which starts at 0
    ([(10, 50), (20, 100), (INF, 100)], 99, 19.8),  # 99th of 100: 49/50 of the way through (10, 20]
    ([(10, 50), (20, 100), (INF, 100)], 50, 10.0),  # exactly at a bound
    ([(10, 50), (20, 90), (INF, 100)], 99, 20.0),  # in +Inf: the highest finite bound
    ([(INF, 100), (20, 90), (10, 50)], 99, 20.0),  # order of the buckets does not matter
    ([(5, 0), (10, 0), (20, 4), (INF, 4)], 100, 20.0),
], ids=["none", "no observations", "first bucket", "interpolated", "at a bound", "+Inf bucket", "unordered",
        "q=100"])
def test_histogram_quantile_estimates_as_promql_does(buckets, q, expected):
    estimate = histogram_quantile(buckets, q)
    assert estimate is None if expected is None else estimate == pytest.approx(expected)


def test_histogram_quantile_refuses_a_q_outside_0_to_100():
    with pytest.raises(ValueError, match="0..100"):
        histogram_quantile([(1, 1)], 101)
