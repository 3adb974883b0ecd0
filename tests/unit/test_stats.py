"""One percentile definition (linear interpolation, numpy's default) for every published figure."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from trainyard.stats import percentile


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
