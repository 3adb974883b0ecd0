"""Weighted max-min fairness: the share each queue is owed given what it demands (pure, table-driven)."""

from fractions import Fraction

import pytest

from trainyard.scheduling.fairness import fair_deserved, water_fill


@pytest.mark.parametrize("capacity, weights, demands, fair", [
    (70, {"a": 4, "b": 2, "c": 1}, {"a": 100, "b": 100, "c": 100}, {"a": 40, "b": 20, "c": 10}),
    (70, {"a": 4, "b": 2, "c": 1}, {"a": 10, "b": 100, "c": 100}, {"a": 10, "b": 40, "c": 20}),
    (70, {"a": 4, "b": 2, "c": 1}, {"a": 10, "b": 5, "c": 100}, {"a": 10, "b": 5, "c": 55}),
    (70, {"a": 4, "b": 2, "c": 1}, {"a": 0, "b": 0, "c": 0}, {"a": 0, "b": 0, "c": 0}),
    (30, {"a": 1, "b": 1}, {"a": 10, "b": 10}, {"a": 10, "b": 10}),
])
def test_water_fill(capacity, weights, demands, fair):
    assert water_fill(capacity, weights, demands) == pytest.approx(fair)


def test_fair_deserved_fills_against_what_each_queue_holds_and_waits_for():
    held = {"a": Fraction(10), "b": Fraction(30), "c": Fraction(30)}
    waiting = {"b": Fraction(100)}
    assert fair_deserved(Fraction(70), {"a": 4, "b": 2, "c": 1}, held, waiting) == \
        {"a": Fraction(10), "b": Fraction(40), "c": Fraction(20)}
