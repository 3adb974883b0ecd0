"""GPUs per tenant over a window, in equal bins (pure): what `report --since` plots.

A bin's value is the average GPUs held over it (GPU-seconds in the bin / its width), so the bins add up to the
same GPU-hours `usage` prints; a tenant's entitlement is its queue's, at the bin's middle.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from trainyard.usage.account import entitled_at
from trainyard.usage.record import UsageRecord


@dataclass(frozen=True)
class TenantSeries:
    edges: list[float]  # bins + 1 times
    held: dict[str, list[float]]  # tenant -> average GPUs held in each bin
    entitled: dict[str, list[float]]  # tenant -> GPUs its queue was entitled to, mid-bin

    @property
    def middles(self) -> list[float]:
        return [(a + b) / 2 for a, b in zip(self.edges, self.edges[1:])]


def tenant_series(record: UsageRecord, bins: int = 120) -> TenantSeries:
    if bins < 1:
        raise ValueError("bins must be 1 or more")
    width = (record.until - record.since) / bins
    edges = [record.since + i * width for i in range(bins + 1)]
    held: dict[str, list[float]] = defaultdict(lambda: [0.0] * bins)
    for span in record.pods:
        tenant = record.tenancy(span.namespace).tenant
        start, end = max(span.start, record.since), min(record.until if span.end is None else span.end, record.until)
        if end <= start:
            continue
        first = min(bins - 1, int((start - record.since) // width))
        last = min(bins - 1, bisect.bisect_left(edges, end) - 1)
        for index in range(first, last + 1):
            overlap = min(end, edges[index + 1]) - max(start, edges[index])
            if overlap > 0:
                held[tenant][index] += span.gpus * overlap / width
    queues = {t.tenant: t.queue for t in record.namespaces.values() if t.queue}
    middles = [(a + b) / 2 for a, b in zip(edges, edges[1:])]
    entitled = {}
    for tenant, queue in sorted(queues.items()):
        samples = record.entitlement.get(queue, [])
        times = [t for t, _ in samples]
        entitled[tenant] = [entitled_at(samples, times, moment) for moment in middles]
    return TenantSeries(edges=edges, held=dict(sorted(held.items())), entitled=entitled)
