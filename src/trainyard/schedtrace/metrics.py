"""What a replay measured, computed from what the pod watch recorded (pure: records in, figures out).

Times are seconds since the replay started. A pod is *held* from the moment it was seen on a node until
it ended (succeeded, failed or deleted); a job's *demand* runs from its submission until its last pod
succeeded. Figures that need contention are taken only while demand >= capacity.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from trainyard.scheduling.fairness import water_fill
from trainyard.scheduling.records import PodRecord
from trainyard.scheduling.trace import RACK_TIER, SPINE_TIER, TraceJob
from trainyard.stats import percentile

if TYPE_CHECKING:  # numpy only where a timeline is computed: `fit`, `report` and the controller use the records
    import numpy as np


def held(pod: PodRecord, t: float) -> bool:
    return pod.bound is not None and pod.bound <= t and (pod.ended is None or t < pod.ended)


def by_job(pods: Iterable[PodRecord]) -> dict[str, list[PodRecord]]:
    out: dict[str, list[PodRecord]] = defaultdict(list)
    for pod in pods:
        out[pod.job].append(pod)
    return out


def job_finished(job: TraceJob, pods: Sequence[PodRecord]) -> float | None:
    """When the job's last pod succeeded (None while fewer than all its pods have)."""
    done = sorted(p.ended for p in pods if p.succeeded and p.ended is not None)
    return done[job.pods - 1] if len(done) >= job.pods else None


def gang_events(pods: Sequence[PodRecord]) -> list[tuple[float, int, int]]:
    """(time, change in pods held, change in pods succeeded), in time order, ends before starts."""
    events = []
    for pod in pods:
        if pod.bound is None:
            continue
        events.append((pod.bound, 1, 0))
        if pod.ended is not None:
            events.append((pod.ended, -1, 1 if pod.succeeded else 0))
    return sorted(events, key=lambda e: (e[0], e[1]))


def partial_intervals(size: int, pods: Sequence[PodRecord], end: float) -> list[tuple[float, float]]:
    """Intervals where some of the gang's pods held GPUs while others waited (held + succeeded < size)."""
    out, holding, succeeded, start = [], 0, 0, None
    for time, d_held, d_done in gang_events(pods):
        holding, succeeded = holding + d_held, succeeded + d_done
        partial = holding > 0 and holding + succeeded < size
        if partial and start is None:
            start = time
        elif not partial and start is not None:
            if time > start:
                out.append((start, time))
            start = None
    if start is not None and end > start:
        out.append((start, end))
    return out


def partial_gangs(trace: Sequence[TraceJob], pods: Mapping[str, Sequence[PodRecord]], min_seconds: float,
                  end: float) -> list[dict]:
    """Gangs observed partial for at least `min_seconds` at a stretch (e.g. 2 scheduling cycles)."""
    out = []
    for job in trace:
        if not job.is_gang:
            continue
        longest = max((b - a for a, b in partial_intervals(job.pods, pods.get(job.name, ()), end)), default=0.0)
        if longest >= min_seconds:
            out.append({"job": job.name, "size": job.size, "longest_partial_s": round(longest, 2)})
    return out


def time_when_placed(job: TraceJob, pods: Sequence[PodRecord]) -> float | None:
    """First time all of the job's pods held GPUs or had succeeded."""
    holding = succeeded = 0
    for time, d_held, d_done in gang_events(pods):
        holding, succeeded = holding + d_held, succeeded + d_done
        if holding + succeeded >= job.pods:
            return time
    return None


def queueing_delays(trace: Sequence[TraceJob], pods: Mapping[str, Sequence[PodRecord]],
                    submitted: Mapping[str, float]) -> dict[str, float]:
    """Seconds from submission to the whole job placed, for the jobs that were placed."""
    out = {}
    for job in trace:
        placed = time_when_placed(job, pods.get(job.name, ()))
        if placed is not None and job.name in submitted:
            out[job.name] = max(0.0, placed - submitted[job.name])
    return out


def delays_by_size(trace: Sequence[TraceJob], delays: Mapping[str, float]) -> dict[str, dict]:
    groups: dict[str, list[float]] = defaultdict(list)
    for job in trace:
        if job.name in delays:
            groups[job.size].append(delays[job.name])
    return {size: {"jobs": len(values), "p50_s": percentile(values, 50), "p95_s": percentile(values, 95)}
            for size, values in groups.items()}


@dataclass(frozen=True)
class Timeline:
    """GPUs held and demanded, overall and per tenant, sampled every `step` seconds."""

    t: np.ndarray
    held: np.ndarray
    demand: np.ndarray
    held_by_tenant: dict[str, np.ndarray]
    demand_by_tenant: dict[str, np.ndarray]


def timeline(trace: Sequence[TraceJob], pods: Mapping[str, Sequence[PodRecord]], submitted: Mapping[str, float],
             end: float, step: float = 0.5) -> Timeline:
    import numpy as np

    t = np.arange(0.0, end, step)
    tenants = sorted({job.tenant for job in trace})
    held_by = {name: np.zeros_like(t) for name in tenants}
    demand_by = {name: np.zeros_like(t) for name in tenants}
    for job in trace:
        records = pods.get(job.name, ())
        for pod in records:
            if pod.bound is not None:
                stop = pod.ended if pod.ended is not None else end
                held_by[job.tenant] += pod.gpus * ((t >= pod.bound) & (t < stop))
        if job.name in submitted:
            finished = job_finished(job, records)
            stop = finished if finished is not None else end
            demand_by[job.tenant] += job.gpus * ((t >= submitted[job.name]) & (t < stop))
    return Timeline(t, sum(held_by.values(), np.zeros_like(t)), sum(demand_by.values(), np.zeros_like(t)),
                    held_by, demand_by)


def saturated(line: Timeline, capacity: int) -> np.ndarray:
    return line.demand >= capacity


def allocation_while_saturated(line: Timeline, capacity: int) -> tuple[float | None, float]:
    """(time-averaged held/capacity while demand >= capacity, seconds of such contention)."""
    mask = saturated(line, capacity)
    step = float(line.t[1] - line.t[0]) if len(line.t) > 1 else 0.0
    if not mask.any():
        return None, 0.0
    return float(line.held[mask].mean() / capacity), float(mask.sum() * step)


def goodput_while_saturated(line: Timeline, pods: Iterable[PodRecord], capacity: int) -> float | None:
    """Allocation without the lost work: time-averaged GPUs held by pods whose work was kept (they succeeded, or
    still run at the end, or were evicted: up to their job's last checkpoint) / capacity, while demand >= capacity.
    A pod evicted and rerun from its last checkpoint (from the start without one) held GPUs that allocation counts
    and goodput does not."""
    import numpy as np

    mask = saturated(line, capacity)
    if not mask.any():
        return None
    kept = np.zeros_like(line.t)
    for pod in pods:
        if pod.bound is None:
            continue
        if pod.succeeded or pod.ended is None:
            stop = pod.ended if pod.ended is not None else np.inf
        elif pod.kept_s > 0:
            stop = pod.bound + pod.kept_s
        else:
            continue
        kept += pod.gpus * ((line.t >= pod.bound) & (line.t < stop))
    return float(kept[mask].mean() / capacity)


def queue_shares(line: Timeline, capacity: int, weights: Mapping[str, float]) -> dict[str, dict]:
    """Per queue, while demand >= capacity: time-averaged share of the cluster held, its weighted fair
    share (water-filled against what each queue demanded at that moment), the plain weight share, and the
    deviation from the fair share in percentage points."""
    import numpy as np

    mask = saturated(line, capacity)
    total_weight = sum(weights.values())
    out = {}
    fair_series = {name: np.zeros(int(mask.sum())) for name in weights}
    for column, index in enumerate(np.flatnonzero(mask)):
        fair = water_fill(capacity, weights, {n: float(line.demand_by_tenant[n][index]) for n in weights})
        for name in weights:
            fair_series[name][column] = fair[name]
    for name, weight in weights.items():
        share = float(line.held_by_tenant[name][mask].mean() / capacity) if mask.any() else None
        fair_share = float(fair_series[name].mean() / capacity) if mask.any() else None
        out[name] = {"weight": weight, "weight_share": weight / total_weight, "fair_share": fair_share, "share": share,
                     "deviation_points": None if share is None or fair_share is None
                     else round(100 * (share - fair_share), 2)}
    return out


def placements(pods: Sequence[PodRecord]) -> list[set[str]]:
    """The nodes of the pods held together, at each bind: a gang restarted elsewhere (all its pods
    evicted and recreated) is two placements, not one spread over both places."""
    out = []
    for pod in pods:
        if pod.bound is not None:
            out.append({q.node for q in pods if q.node and held(q, pod.bound)})
    return out


def topology_splits(trace: Sequence[TraceJob], pods: Mapping[str, Sequence[PodRecord]],
                    rack_of: Mapping[str, str], spine_of: Mapping[str, str]) -> dict:
    """Gangs whose pods held GPUs in more than one rack at once, and those beyond their allowed hard tier."""
    split, violations = [], []
    for job in trace:
        if not job.is_gang:
            continue
        spans = [({rack_of.get(n) for n in nodes}, {spine_of.get(n) for n in nodes})
                 for nodes in placements(pods.get(job.name, ()))]
        racks = max((len(r) for r, _ in spans), default=0)
        spines = max((len(s) for _, s in spans), default=0)
        if racks > 1:
            split.append(job.name)
        if (job.tier == RACK_TIER and racks > 1) or (job.tier == SPINE_TIER and spines > 1):
            violations.append({"job": job.name, "tier": job.tier, "racks": racks, "spines": spines})
    return {"gangs_split_across_racks": len(split), "beyond_allowed_tier": violations}


def bind_rate(pods: Iterable[PodRecord], window: float = 10.0) -> dict:
    """Pods bound per second: mean between the first and last bind, and the busiest `window` seconds."""
    import numpy as np

    times = sorted(p.bound for p in pods if p.bound is not None)
    if len(times) < 2:
        return {"pods_bound": len(times), "mean_per_s": None, "peak_per_s": None}
    span = times[-1] - times[0]
    edges = np.asarray(times)
    peak = max(int(np.searchsorted(edges, start + window, side="left") - i) for i, start in enumerate(times))
    return {"pods_bound": len(times), "mean_per_s": round(len(times) / span, 2) if span else None,
            "peak_per_s": round(peak / window, 2)}


IDLE_CAUSES = ("only_larger_gangs_waiting", "fitting_job_of_a_queue_at_its_share", "fitting_job_of_a_queue_under_its_share")


def idle_breakdown(trace: Sequence[TraceJob], pods: Mapping[str, Sequence[PodRecord]], submitted: Mapping[str, float],
                   line: Timeline, capacity: int, weights: Mapping[str, float]) -> dict[str, float]:
    """Where the idle GPUs of saturated moments went, in allocation points (% of capacity x saturated time):
    every waiting job needed more GPUs than were free; or some waiting job would fit by GPU count but only
    in queues already at their weighted fair share (held back by the queue plugin); or one would fit in a
    queue under its share (held back by placement: rack/spine topology, fragmentation, scheduling latency)."""
    import numpy as np

    placed = {job.name: time_when_placed(job, pods.get(job.name, ())) for job in trace}
    mask = saturated(line, capacity)
    out = dict.fromkeys(IDLE_CAUSES, 0.0)
    for index in np.flatnonzero(mask):
        t, idle = float(line.t[index]), capacity - float(line.held[index])
        if idle <= 0:
            continue
        waiting = [j for j in trace if j.name in submitted and submitted[j.name] <= t
                   and ((end := placed[j.name]) is None or end > t)]
        fitting = [j for j in waiting if j.gpus <= idle]
        fair = water_fill(capacity, weights, {n: float(line.demand_by_tenant[n][index]) for n in weights})
        if not fitting:
            cause = IDLE_CAUSES[0]
        elif any(line.held_by_tenant[j.tenant][index] < fair[j.tenant] for j in fitting):
            cause = IDLE_CAUSES[2]
        else:
            cause = IDLE_CAUSES[1]
        out[cause] += idle
    samples = int(mask.sum())
    return {cause: round(100 * value / (capacity * samples), 2) if samples else 0.0 for cause, value in out.items()}
