"""The fairness audit of a window (pure): did each tenant get its share while the cluster was full?

On the same definitions as the scheduling-trace benchmark (`schedtrace.metrics`), so the two can be compared: a
tenant *holds* the GPUs of its running pods and *demands* the GPUs of its TrainJobs' gangs from their creation
until they finished; the cluster is *saturated* while the demand reaches its capacity. Over the saturated time:

- each tenant's received share of the cluster against its entitlement: the plain weight share, and the fair share
  (its weight water-filled against what each tenant demanded at that moment, what Volcano's `proportion` aims at);
- starvation: intervals where a tenant held at least one whole GPU less than its fair share while some of its
  own demand waited, for at least `starve_min_s`;
- Jain's index of received share / fair share over the tenants (1: each got exactly its fair share).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from trainyard.scheduling.fairness import water_fill
from trainyard.schedtrace.metrics import Timeline, allocation_while_saturated, queue_shares, saturated
from trainyard.usage.record import UsageRecord

MOST_SAMPLES = 20_000
"""The audit's time grid has at most this many points (a 7-day window: a sample every 30 s)."""


def step_for(seconds: float, finest: float = 1.0) -> float:
    return max(finest, seconds / MOST_SAMPLES)


def tenant_timeline(record: UsageRecord, step: float) -> Timeline:
    """GPUs held and demanded per tenant on a grid from the window's start (seconds since it)."""
    t = np.arange(0.0, record.until - record.since, step)
    held: dict[str, np.ndarray] = defaultdict(lambda: np.zeros_like(t))
    demand: dict[str, np.ndarray] = defaultdict(lambda: np.zeros_like(t))
    for tenant in tenant_weights(record):
        held[tenant], demand[tenant] = np.zeros_like(t), np.zeros_like(t)
    for span in record.pods:
        end = record.until if span.end is None else span.end
        held[record.tenancy(span.namespace).tenant] += span.gpus * (
            (t >= span.start - record.since) & (t < end - record.since))
    for want in record.demands:
        end = record.until if want.end is None else want.end
        demand[record.tenancy(want.namespace).tenant] += want.gpus * (
            (t >= want.start - record.since) & (t < end - record.since))
    total_held = sum(held.values(), np.zeros_like(t))
    total_demand = sum(demand.values(), np.zeros_like(t))
    return Timeline(t, total_held, total_demand, dict(held), dict(demand))


def tenant_weights(record: UsageRecord) -> dict[str, float]:
    """Tenant -> the weight of its queue (tenants whose queue is known)."""
    return {tenancy.tenant: record.weights[tenancy.queue] for tenancy in record.namespaces.values()
            if tenancy.queue in record.weights}


def starvation(line: Timeline, capacity: float, weights: dict[str, float], min_s: float) -> dict[str, list[tuple]]:
    """Tenant -> (start, end) seconds where, with the cluster saturated, it held less than its fair share while
    its own demand was not all held, lasting at least `min_s`."""
    step = float(line.t[1] - line.t[0]) if len(line.t) > 1 else 1.0
    mask = saturated(line, int(capacity))
    starved = {name: np.zeros_like(mask) for name in weights}
    for index in np.flatnonzero(mask):
        fair = water_fill(capacity, weights, {n: float(line.demand_by_tenant[n][index]) for n in weights})
        for name in weights:
            held, wanted = float(line.held_by_tenant[name][index]), float(line.demand_by_tenant[name][index])
            starved[name][index] = held <= fair[name] - 1 and wanted > held  # a whole GPU short of its share
    out = {}
    for name, flags in starved.items():
        intervals: list[tuple] = []
        start: int | None = None
        for position, flag in enumerate([bool(f) for f in flags] + [False]):
            if flag and start is None:
                start = position
            elif not flag and start is not None:
                if (position - start) * step >= min_s:
                    begins = float(line.t[start])
                    intervals.append((round(begins, 1), round(begins + (position - start) * step, 1)))
                start = None
        out[name] = intervals
    return out


def jain_index(values: list[float]) -> float | None:
    """(sum x)^2 / (n * sum x^2): 1 when all equal, 1/n when one has everything."""
    if not values or not any(values):
        return None
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def audit(record: UsageRecord, starve_min_s: float = 300.0, step: float | None = None) -> dict:
    capacity = record.capacity
    weights = tenant_weights(record)
    if capacity <= 0 or not weights:
        return {"saturated_s": 0.0, "allocation": None, "tenants": {}, "jain_index": None,
                "note": "no tenant queue or no GPU capacity in the window"}
    line = tenant_timeline(record, step or step_for(record.until - record.since))
    allocation, saturated_s = allocation_while_saturated(line, int(capacity))
    shares = queue_shares(line, int(capacity), weights)
    starved = starvation(line, capacity, weights, starve_min_s)
    ratios = [s["share"] / s["fair_share"] for s in shares.values() if s["share"] is not None and s["fair_share"]]
    tenants = {name: {**share, "starved_s": round(sum(b - a for a, b in starved[name]), 1),
                      "starvation": [{"from_s": a, "to_s": b} for a, b in starved[name]]}
               for name, share in shares.items()}
    return {"saturated_s": round(saturated_s, 1), "allocation": allocation, "tenants": tenants,
            "jain_index": jain_index(ratios), "starve_min_s": starve_min_s}
