"""The figures `trainyard usage` prints, computed from a window's record (pure).

GPU-hours: each pod's GPUs times the part of its span inside the window. Borrowed: at each moment a queue holds H
GPUs against an entitlement E, the H - E above it is borrowed, shared among the pods running then in proportion to
their GPUs (so any grouping adds up to the queue's total). Waits: from a TrainJob's creation to its first pod's
start, for the TrainJobs created in the window. Outcomes: TrainJobs whose Complete or Failed condition turned True
in the window.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable

from trainyard.stats import percentile
from trainyard.usage.record import GONE_AFTER_S, NONE, PodSpan, TrainJobFacts, UsageRecord

GROUPINGS = ("tenant", "queue", "runtime", "priority")
HOUR = 3600.0


@dataclass(frozen=True)
class GroupUsage:
    group: str
    gpu_hours: float
    gpu_hours_borrowed: float
    wait_p50_s: float | None
    wait_p95_s: float | None
    started: int
    waiting: int
    completed: int
    failed: int
    gpu_hours_lost_to_reclaim: float | None = None
    """Work the controller's reclaim threw away (GPUs x time since the last checkpoint); None: not known for this
    grouping (the controller counts it by namespace, so by tenant or queue only)."""

    @property
    def gpu_hours_within(self) -> float:
        return self.gpu_hours - self.gpu_hours_borrowed


def entitled_at(samples: list[tuple[float, float]], times: list[float], moment: float) -> float:
    """The step function of a queue's entitlement samples: the last value at or before `moment` (the first before
    any); 0 for a queue with none (a namespace of no tenant is owed nothing). `times` is the samples' times."""
    if not samples:
        return 0.0
    index = bisect.bisect_right(times, moment) - 1
    return samples[max(index, 0)][1]


def borrowed_seconds(spans: list[PodSpan], samples: list[tuple[float, float]], since: float,
                     until: float) -> list[float]:
    """GPU-seconds of each span held above its queue's entitlement (all spans of one queue)."""
    clipped = [(max(s.start, since), min(until if s.end is None else s.end, until), s.gpus) for s in spans]
    sample_times = [t for t, _ in samples]
    moments = sorted({since, until, *(t for t in sample_times if since < t < until),
                      *(a for a, b, _ in clipped if a < b), *(b for a, b, _ in clipped if a < b)})
    delta: dict[float, float] = defaultdict(float)
    for start, end, gpus in clipped:
        if start < end:
            delta[start] += gpus
            delta[end] -= gpus
    cumulative, ratio_integral, held = 0.0, {moments[0]: 0.0}, 0.0
    for here, there in zip(moments, moments[1:]):
        held += delta.get(here, 0.0)
        over = max(0.0, held - entitled_at(samples, sample_times, here))
        cumulative += (over / held if held > 0 else 0.0) * (there - here)
        ratio_integral[there] = cumulative
    return [gpus * (ratio_integral[end] - ratio_integral[start]) if start < end else 0.0
            for start, end, gpus in clipped]


def group_of(by: str, record: UsageRecord, namespace: str, runtime: str, priority_class: str) -> str:
    """The group a pod or TrainJob of `namespace` falls in (its runtime and priority class as best known)."""
    if by == "runtime":
        return runtime or NONE
    if by == "priority":
        return priority_class or NONE
    tenancy = record.tenancy(namespace)
    return tenancy.tenant if by == "tenant" else tenancy.queue or NONE


def pod_key(by: str, record: UsageRecord, trainjobs: dict[tuple[str, str], TrainJobFacts]) -> Callable[[PodSpan], str]:
    def key(span: PodSpan) -> str:
        job = trainjobs.get((span.namespace, span.trainjob))
        return group_of(by, record, span.namespace, job.runtime if job else "",
                        span.priority_class or (job.priority_class if job else ""))
    return key


def trainjob_key(by: str, record: UsageRecord, pod_classes: dict[tuple[str, str], str]) -> Callable[[TrainJobFacts], str]:
    def key(job: TrainJobFacts) -> str:
        return group_of(by, record, job.namespace, job.runtime,
                        job.priority_class or pod_classes.get((job.namespace, job.name), ""))
    return key


def first_starts(spans: Iterable[PodSpan]) -> dict[tuple[str, str], float]:
    """(namespace, TrainJob) -> when its first pod started."""
    found: dict[tuple[str, str], float] = {}
    for span in spans:
        if span.trainjob:
            key = (span.namespace, span.trainjob)
            found[key] = min(found.get(key, span.start), span.start)
    return found


def account(record: UsageRecord, by: str) -> list[GroupUsage]:
    """One row per group, the most GPU-hours first."""
    if by not in GROUPINGS:
        raise ValueError(f"--by {by!r}: use one of {', '.join(GROUPINGS)}")
    since, until = record.since, record.until
    trainjobs = {(job.namespace, job.name): job for job in record.trainjobs}
    pod_group = pod_key(by, record, trainjobs)
    held: dict[str, float] = defaultdict(float)
    borrowed: dict[str, float] = defaultdict(float)
    by_queue: dict[str, list[PodSpan]] = defaultdict(list)
    for span in record.pods:
        held[pod_group(span)] += span.held_within(since, until)
        by_queue[record.tenancy(span.namespace).queue].append(span)
    for queue, spans in by_queue.items():
        for span, seconds in zip(spans, borrowed_seconds(spans, record.entitlement.get(queue, []), since, until)):
            borrowed[pod_group(span)] += seconds
    starts = first_starts(record.pods)
    pod_classes = {(s.namespace, s.trainjob): s.priority_class for s in record.pods if s.trainjob and s.priority_class}
    job_group = trainjob_key(by, record, pod_classes)
    waits: dict[str, list[float]] = defaultdict(list)
    waiting: dict[str, int] = defaultdict(int)
    outcomes: dict[tuple[str, str], int] = defaultdict(int)
    for job in record.trainjobs:
        group = job_group(job)
        held.setdefault(group, 0.0)
        if job.outcome and job.finished is not None and since <= job.finished <= until:
            outcomes[(group, job.outcome)] += 1
        if job.created is None or not since <= job.created <= until:
            continue
        start = starts.get((job.namespace, job.name))
        if start is not None:
            waits[group].append(max(0.0, start - job.created))
        elif not job.outcome and (job.last_seen is None or job.last_seen >= until - GONE_AFTER_S):
            waiting[group] += 1  # (one deleted before it started waits no more)
    lost: dict[str, float] = defaultdict(float)
    by_namespace = by in ("tenant", "queue")
    for namespace, seconds in record.reclaim_lost.items() if by_namespace else ():
        lost[group_of(by, record, namespace, "", "")] += seconds
        held.setdefault(group_of(by, record, namespace, "", ""), 0.0)
    rows = [GroupUsage(group=group, gpu_hours=seconds / HOUR, gpu_hours_borrowed=borrowed[group] / HOUR,
                       wait_p50_s=percentile(waits[group], 50), wait_p95_s=percentile(waits[group], 95),
                       started=len(waits[group]), waiting=waiting[group],
                       completed=outcomes[(group, "Complete")], failed=outcomes[(group, "Failed")],
                       gpu_hours_lost_to_reclaim=lost[group] / HOUR if by_namespace else None)
            for group, seconds in held.items()]
    return sorted(rows, key=lambda row: (-row.gpu_hours, row.group))
