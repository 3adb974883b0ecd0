"""Weighted max-min fairness (pure): the share each queue is owed at a moment, given what each demands.

The trace bench measures queues against it, the model of vc-scheduler uses it for `proportion`'s deserved
share, and gang-aware reclaim can target it instead of a static deserved figure.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping


def weight_shares(capacity: Fraction, weights: Mapping[str, float]) -> dict[str, Fraction]:
    """Each queue's weight share of `capacity`, exact: what it is owed when every queue wants everything."""
    total = sum(Fraction(w) for w in weights.values()) or Fraction(1)
    return {q: capacity * Fraction(w) / total for q, w in weights.items()}


def water_fill(capacity: float, weights: Mapping[str, float], demands: Mapping[str, float]) -> dict[str, float]:
    """Weighted max-min fair shares: each queue gets capacity in proportion to its weight, never more than
    it demands, and what a satisfied queue leaves goes to the others (what Volcano's proportion aims at)."""
    fair = {name: 0.0 for name in weights}
    active = {name for name in weights if demands.get(name, 0) > 0}
    left = float(capacity)
    while active and left > 1e-9:
        total = sum(weights[name] for name in active)
        offer = {name: left * weights[name] / total for name in active}
        capped = {name for name in active if demands[name] - fair[name] <= offer[name]}
        if not capped:
            for name in active:
                fair[name] += offer[name]
            break
        for name in capped:
            left -= demands[name] - fair[name]
            fair[name] = float(demands[name])
        active -= capped
    return fair


def fair_deserved(capacity: Fraction, weights: Mapping[str, float], allocated: Mapping[str, Fraction],
                  waiting: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """Each queue's water-filled share of `capacity` against its current demand (what it holds + what waits)."""
    demand = {q: float(allocated.get(q, Fraction(0)) + waiting.get(q, Fraction(0))) for q in weights}
    return {q: Fraction(v).limit_denominator(1000) for q, v in water_fill(float(capacity), weights, demand).items()}
