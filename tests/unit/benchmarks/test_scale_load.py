"""The scale bench states the load it really delivered, not the one its trace was written for."""

import pytest

from bench_modules import load_bench

SCALE = load_bench("scale")


@pytest.mark.parametrize("created_at, delivered, rate, arrival_span", [
    ([0.0, 300.0, 600.0], 1.08, 0.01, 600.0),      # creates kept pace with the stated 600 s
    ([0.0, 100.0, 1686.0], 0.384, 0.0, 1686.0),   # the audit's run: the same work spread over 1,686 s
    ([5.0], None, None, 0.0),                      # one create: no span, no rate
])
def test_delivered_load_scales_the_stated_load_by_the_real_arrival_span(created_at, delivered, rate, arrival_span):
    figures = SCALE.delivered_load(1.08, 600.0, created_at)
    assert figures["offered_load_delivered"] == delivered
    assert figures["arrival_span_seconds"] == arrival_span
    assert figures["creates_per_second"] == rate
