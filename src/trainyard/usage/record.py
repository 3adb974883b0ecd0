"""What the usage record holds for a window of time, as plain values (pure): the span each GPU pod held its GPUs,
each TrainJob's runtime, creation and outcome, each namespace's tenant and queue, and each queue's entitlement.

GPU-hours come from the pods' own timestamps (status.startTime to the last container's finishedAt) that
kube-state-metrics exports, not from the 15 s sample grid: a short pod counts to the second, and a restart of
Prometheus or of the controller loses nothing once the pod has been scraped after it ended. Only a pod deleted
while it ran has no end of its own: it ends when its series does (within a scrape interval).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainyard.tenant_policy import Budget

NO_TENANT = "(no tenant)"
GONE_AFTER_S = 45.0
"""A series not sampled for three scrape intervals before the window's end belongs to a deleted object."""
NONE = "(none)"
OUTCOMES = ("Complete", "Failed")


@dataclass(frozen=True)
class PodSpan:
    """A pod that requested GPUs and started: when it held them. `end` None: it still ran when the window closed."""

    namespace: str
    pod: str
    gpus: float
    start: float
    end: float | None
    trainjob: str = ""  # its JobSet's name, "" for a pod of no TrainJob
    priority_class: str = ""

    def held_within(self, since: float, until: float) -> float:
        """GPU-seconds it held inside [since, until]."""
        return self.gpus * max(0.0, min(until if self.end is None else self.end, until) - max(self.start, since))


@dataclass(frozen=True)
class TrainJobFacts:
    namespace: str
    name: str
    runtime: str = ""
    priority_class: str = ""
    created: float | None = None
    outcome: str = ""  # Complete, Failed or "" (neither yet)
    finished: float | None = None  # when the outcome's condition turned True
    last_seen: float | None = None  # its series' last sample: long before the window's end, it was deleted


@dataclass(frozen=True)
class Demand:
    """A TrainJob's gang asking for GPUs, from its creation until it finished (or went away, or the window ended)."""

    namespace: str
    name: str
    gpus: float
    start: float
    end: float | None


@dataclass(frozen=True)
class Tenancy:
    """A namespace's tenant, queue and pinned catalog release (its labels); a namespace of no tenant has none."""

    tenant: str = NO_TENANT
    queue: str = ""
    catalog: str = ""


@dataclass
class UsageRecord:
    since: float
    until: float
    pods: list[PodSpan] = field(default_factory=list)
    trainjobs: list[TrainJobFacts] = field(default_factory=list)
    namespaces: dict[str, Tenancy] = field(default_factory=dict)
    entitlement: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Queue -> (time, GPUs it was entitled to) samples, in time order."""
    demands: list[Demand] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)
    """Queue -> its weight (the last known in the window)."""
    capacity: float = 0.0
    """The cluster's allocatable GPUs (the nodes seen in the window)."""
    budgets: dict[str, Budget] = field(default_factory=dict)
    """Namespace -> its GPU-hour budget (the annotation as kube-state-metrics last exported it)."""
    reclaim_lost: dict[str, float] = field(default_factory=dict)
    """Namespace -> GPU-seconds of work the controller's reclaim threw away in the window (its counter)."""

    def tenancy(self, namespace: str) -> Tenancy:
        return self.namespaces.get(namespace, Tenancy())


def pod_end(completion: float | None, deletion: float | None, last_seen: float | None, present: bool) -> float | None:
    """When a pod stopped holding its GPUs: its last container's finish; else, once gone, when deletion began or
    its series last appeared; None while it still exists without having finished (it holds them at the window's
    end)."""
    if completion is not None:
        return completion
    if present:
        return None
    candidates = [t for t in (deletion, last_seen) if t is not None]
    return min(candidates) if candidates else None


def counter_increase(at_end: dict[tuple[str, ...], float], at_start: dict[tuple[str, ...], float]) -> float:
    """What counters grew by between two readings, series by series: a series absent at the start started at 0,
    one lower at the end was reset (a restarted process) and counts from 0."""
    total = 0.0
    for key, end in at_end.items():
        start = at_start.get(key, 0.0)
        total += end - start if end >= start else end
    return total
