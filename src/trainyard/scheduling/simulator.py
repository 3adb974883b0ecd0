"""A fast model of vc-scheduler with trainyard's generated configuration, replaying a trace (pure).

It steps Volcano's session every `cycle_s` seconds and follows its `allocate` action as v1.14.1 does with the
`gang` profile: queues are served lowest share first (allocated / deserved), each queue's jobs highest priority
first (`priority`), then oldest; `proportion` water-fills each queue's deserved share against its request
(allocated + every pending pod, at most its capability, `proportion.go`) and refuses a job that would take its
queue beyond it, `capacity` only beyond the queue's capability (elastic). `proportion`'s share is dominant over
every dimension a pod requests, and each pod asks for one `pods` (and its namespace's default CPU and memory): a
queue's pod share (allocated pods / its pods allocated and pending) is often above its GPU share, which makes the
queue order less sensitive to the weights than GPUs alone would; a gang binds whole
or not at all; a hard-topology gang tries every rack, then (tier 2) every spine, and takes the candidate the
HyperNode binpack score likes best (the fullest that fits); a pod goes to the node that `binpack` (GPUs) plus
the HyperNode binpack for normal pods (rack, spine faded 0.8) score highest, ties broken by a seeded draw as
Volcano picks at random among equals. Optionally trainyard's gang reservation (`scheduling.reservation`) holds
nodes as `capacity.reserver` does, or its gang-aware reclaim (`scheduling.reclaim`) evicts as `capacity.reclaimer`
does. Stretches where nothing can change (no arrival, no end, no reservation or reclaim timer) are skipped, not
stepped through. It returns the same records a real replay does (`metrics.PodRecord`), so
`summary.summarize` computes the same figures from both: what `bench/scheduling_trace.py --model` calibrates.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Mapping, Sequence

from trainyard.scheduling.cluster_state import GPU, Node
from trainyard.scheduling import reclaim
from trainyard.scheduling.reclaim import RunningJob
from trainyard.scheduling.reservation import Reservation, WaitingGang, plan
from trainyard.scheduling.fairness import fair_deserved, water_fill, weight_shares
from trainyard.scheduling.pod_binding import ModelNode, NodeUse, Topology, free_gpus, place
from trainyard.scheduling.records import PodRecord
from trainyard.scheduling.trace import TraceJob, saved_work

RECLAIMER_EVICT_LATENCY_S, RECLAIMER_RESUME_LAG_S = 1.0, 2.0
"""`capacity.reclaimer`'s protocol on the local cluster, as the model replays it: victims' pods go about 1 s after
their TrainJobs are suspended, and their resumption follows the gang's start by 2-5 s (PodGroup status, the loop's
period); read from the evictions and pod records of the real gang-capacity-reclaim trace runs."""


@dataclass(frozen=True)
class ModelPolicy:
    queue_plugin: str = "proportion"
    cycle_s: float = 0.5
    """vc-scheduler's schedule period on the local cluster."""
    submit_latency_s: float = 0.2
    """From the TrainJob's creation to its pods being in the scheduler's cache (controller, JobSet, Job)."""
    bind_latency_s: float = 0.05
    deserved: Mapping[str, int] = field(default_factory=dict)
    """`capacity`: each queue's deserved GPUs (its share order and the reservation's 'below its share')."""
    capability: Mapping[str, int] = field(default_factory=dict)
    """Per-queue GPU cap; a queue without one may use the whole cluster."""
    reserve_after_s: float | None = None
    """Run trainyard's gang reservation: seconds a gang of a queue under its share waits before nodes are held."""
    reclaim_after_s: float | None = None
    """A gang-aware reclaim (not in Volcano v1.14): seconds a gang of a queue under its share waits before whole
    jobs of queues above theirs are evicted to make room for it."""
    reclaim_period_s: float = 1.0
    resume_after_s: float = 120.0
    """As `capacity.reclaimer.Reclaimer`: its round period and how long victims wait for their gang at most."""
    reclaim_singles: bool = False
    """Reclaim for waiting single-pod jobs too, not only gangs."""
    reclaim_target: str = reclaim.DESERVED_TARGET
    """What 'below its share' means for reclaim: `deserved` (the static deserved GPUs) or `fair` (the weights
    water-filled against each queue's current demand, held + waiting: what the trace bench measures against)."""
    reclaim_inflight: int = 1
    """Evictions whose gang has not started yet, at most (each for another gang, on other nodes)."""
    reclaim_once: bool = False
    """A job evicted once is never a victim again."""
    evict_latency_s: float = 0.0
    """From a victim's suspension until its pods' GPUs are free (JobSet suspended, pods deleted): meanwhile the
    scheduler may give nodes the eviction counted on, already free ones, to other jobs."""
    resume_lag_s: float = 0.0
    """From a gang's placement until the reclaimer sees it run (PodGroup status) and resumes its victims."""
    reclaim_holds: bool = False
    """The eviction's nodes are held for its gang (as `capacity.reserver` taints them) until it is placed."""
    reclaim_rule: str = reclaim.DESERVED
    """Which gangs starve and which jobs may be evicted for them (`scheduling.reclaim.DESERVED`, `FINAL_SHARE`,
    `FAIR_SHARING`)."""
    checkpoint_ask_s: float | None = None
    """Reclaim asks victims that checkpoint (`checkpoint_every`) to save first (`scheduling.checkpoints`): seconds
    from the ask until their checkpoint is reported; they are suspended a reclaim round after it and save again on
    the SIGTERM (as the training image's helper does), so they lose nothing but hold their GPUs that long. None:
    victims go at once, back to their last periodic checkpoint (a job that saves only every N steps)."""


@dataclass
class _Job:
    trace: TraceJob
    ready_at: float
    placed: bool = False
    placed_at: float = 0.0
    done: float = 0.0
    """Seconds of its work its checkpoints kept through evictions: a run after one does only the rest."""


def _deserved(policy: ModelPolicy, weights: Mapping[str, float], capacity: int, allocated: Mapping[str, int],
              pending: Mapping[str, int]) -> dict[str, float]:
    if policy.queue_plugin == "capacity":
        return {q: float(policy.deserved.get(q, 0)) for q in weights}
    # proportion.go: a queue's deserved stops at its capability as at its request, and what it leaves goes on
    # to the others in the next round of the water-fill
    request = {q: min(allocated.get(q, 0) + pending.get(q, 0), policy.capability.get(q, capacity)) for q in weights}
    return water_fill(capacity, weights, request)


def proportion_share(gpus: float, deserved_gpus: float, pods: int, requested_pods: int) -> float:
    """A queue's share as `proportion` orders queues: the largest allocated/deserved over its dimensions. Every
    pod asks for one `pods`, and a queue deserves every pod it requests (a cluster has far more pod slots than
    GPU jobs), so beside GPUs the share counts its allocated pods against its allocated and pending ones; a zero
    deserved counts as 1 once anything is allocated (`helpers.Share`)."""
    gpu_share = gpus / deserved_gpus if deserved_gpus > 0 else (1.0 if gpus > 0 else 0.0)
    pod_share = pods / requested_pods if requested_pods > 0 else (1.0 if pods > 0 else 0.0)
    return gpu_share if gpu_share > pod_share else pod_share


def proportion_overused(gpus: float, deserved_gpus: float, pods: int, requested_pods: int) -> bool:
    """`proportion`'s overused: deserved at most allocated in every dimension; a queue with a pending pod deserves
    more pods than it holds, so allocate skips it only once nothing of it waits (a refusal holds a job back)."""
    return deserved_gpus <= gpus + 1e-9 and requested_pods <= pods


@dataclass(frozen=True)
class _Flight:
    """An eviction whose gang has not started yet: its victims stay suspended, its nodes are its gang's."""
    gang: str
    victims: tuple[str, ...]
    nodes: frozenset[str]
    since: float
    gone: float = 0.0
    """When the last victim's pods are gone (an asked victim holds its GPUs until it has saved): none is resumed
    before, so a job never holds two placements at once."""


@dataclass
class _Pod:
    node: str
    gpus: int
    queue: str
    job: str
    record: int
    """Index of its PodRecord."""
    bound: float


def simulate(trace: Sequence[TraceJob], nodes: Sequence[ModelNode], weights: Mapping[str, float],
             policy: ModelPolicy = ModelPolicy(), seed: int = 0, horizon_s: float = 24 * 3600.0,
             already_running: Sequence[tuple[TraceJob, Sequence[str]]] = (),
             held_back: dict[str, dict[str, float]] | None = None
             ) -> tuple[dict[str, float], list[PodRecord], float]:
    """(submitted times, pod records, end) of the trace replayed on the model: the shapes `RunRecord` holds.
    `already_running`: jobs already placed at time 0 (each with one node per pod), ending after their `duration` (the
    time they have left): a live cluster's state, from which the trace's jobs are to start. `held_back`, when given,
    is filled per queue with the seconds its waiting jobs were held back by `proportion`: `overused_s` (the whole
    queue skipped) and `refused_s` (a job refused for taking the queue beyond its deserved share), what
    vc-scheduler's log says of the same queues (`whatif.cluster_engine.queues_held_back`)."""
    rng = random.Random(seed)
    state = NodeUse(nodes=list(nodes), used={n.name: 0 for n in nodes}, held_by={n.name: None for n in nodes})
    topo = Topology(nodes)
    capacity = sum(n.gpus for n in nodes)
    jobs = [_Job(j, j.arrival + policy.submit_latency_s) for j in sorted(trace, key=lambda j: (j.arrival, j.name))]
    submitted = {j.name: j.arrival for j in trace}
    by_name = {j.trace.name: j for j in jobs}
    records: list[PodRecord] = []
    live: dict[int, _Pod] = {}
    ends: list[tuple[float, int]] = []
    allocated = {q: 0 for q in weights}
    pods_allocated = {q: 0 for q in weights}
    reservation: Reservation | None = None
    inflight: list[_Flight] = []
    evicted: set[str] = set()
    next_reclaim = 0.0
    prioritized = any(j.priority for j in trace)
    quiet = policy.reserve_after_s is None and policy.reclaim_after_s is None
    by_proportion = policy.queue_plugin == "proportion"
    t, end = 0.0, 0.0
    deserved: dict[str, float] = {}
    requested_pods: dict[str, int] = {}

    def share(queue: str) -> float:  # the cycle's deserved and requested pods, as rebound below
        if by_proportion:
            return proportion_share(allocated[queue], deserved[queue], pods_allocated[queue], requested_pods[queue])
        return allocated[queue] / deserved[queue] if deserved[queue] > 0 else float("inf")

    def release(key: int) -> _Pod:
        pod = live.pop(key)
        state.used[pod.node] -= pod.gpus
        allocated[pod.queue] -= pod.gpus
        pods_allocated[pod.queue] -= 1
        return pod

    for holder, placed_on in already_running:
        if len(placed_on) != holder.pods:
            raise ValueError(f"running job {holder.name}: {holder.pods} pods but {len(placed_on)} nodes")
        here = _Job(holder, 0.0, placed=True)
        jobs.append(here)
        by_name[holder.name] = here
        submitted[holder.name] = 0.0
        allocated[holder.tenant] = allocated.get(holder.tenant, 0) + holder.gpus
        pods_allocated[holder.tenant] = pods_allocated.get(holder.tenant, 0) + holder.pods
        for node in placed_on:
            key = len(records)
            state.used[node] += holder.gpus_per_pod
            records.append(PodRecord(job=holder.name, gpus=holder.gpus_per_pod, node=node, bound=0.0,
                                     ended=holder.duration, succeeded=True))
            live[key] = _Pod(node, holder.gpus_per_pod, holder.tenant, holder.name, key, 0.0)
            heapq.heappush(ends, (holder.duration, key))
            end = max(end, holder.duration)

    while any(not j.placed for j in jobs) or live:
        if t > horizon_s:
            break
        while ends and ends[0][0] <= t:
            _, key = heapq.heappop(ends)
            if key in live:
                release(key)
        pending = [j for j in jobs if not j.placed and j.ready_at <= t]
        if policy.reserve_after_s is not None:
            reservation = _reserve(state, pending, allocated, weights, policy, capacity, reservation, t)
        if policy.reclaim_after_s is not None and t >= next_reclaim:
            next_reclaim = t + policy.reclaim_period_s
            for flight in list(inflight):  # as `capacity.reclaimer`: resume once the gang runs, or after the timeout
                gang = by_name[flight.gang]
                if (gang.placed and t - gang.placed_at >= policy.resume_lag_s) or t - flight.since >= policy.resume_after_s:
                    for name in flight.victims:
                        by_name[name].ready_at = max(t, flight.gone) + policy.submit_latency_s
                    inflight.remove(flight)
                    for node in flight.nodes:
                        if state.held_by[node] == flight.gang:
                            state.held_by[node] = None
            while len(inflight) < policy.reclaim_inflight:
                running = {k: p for k, p in live.items() if by_name[p.job].placed}  # not victims on their way out
                eviction = _reclaim(state, pending, running, allocated, weights, policy, capacity, t, inflight, evicted,
                                    by_name)
                if eviction is None:
                    break
                victims: tuple[str, ...] = ()
                last_gone = t
                for _, name in eviction.victims:
                    keys = [k for k, pod in live.items() if pod.job == name]
                    asked = policy.checkpoint_ask_s is not None and bool(by_name[name].trace.checkpoint_every)
                    gone = t + policy.evict_latency_s + (
                        (policy.checkpoint_ask_s or 0.0) + policy.reclaim_period_s if asked else 0.0)
                    if asked and keys and min(records[live[k].record].ended or 0.0 for k in keys) <= gone:
                        continue  # it finishes while asked: the ask is withdrawn, nothing is taken
                    victims += (name,)
                    last_gone = max(last_gone, gone)
                    since = min(live[k].bound for k in keys) if keys else t
                    kept = saved_work(by_name[name].trace, gone - since) if keys else 0.0
                    if asked and keys:  # saved when asked, and again on the SIGTERM of its suspension
                        kept = gone - since
                    for key in keys:
                        if gone > t:
                            heapq.heappush(ends, (gone, key))
                            pod = live[key]
                        else:
                            pod = release(key)
                        records[pod.record] = replace(records[pod.record], ended=gone, succeeded=False, kept_s=kept)
                    by_name[name].done += kept
                    by_name[name].placed, by_name[name].ready_at = False, float("inf")  # suspended
                evicted.update(victims)
                inflight.append(_Flight(eviction.gang[1], victims, frozenset(eviction.nodes), t, last_gone))
                if policy.reclaim_holds:
                    for node in eviction.nodes:
                        state.held_by[node] = eviction.gang[1]
            pending = [j for j in jobs if not j.placed and j.ready_at <= t]
        by_queue: dict[str, list[_Job]] = {}
        pending_gpus: dict[str, int] = {}
        requested_pods = dict(pods_allocated)
        for job in pending:
            queue = job.trace.tenant
            by_queue.setdefault(queue, []).append(job)
            pending_gpus[queue] = pending_gpus.get(queue, 0) + job.trace.gpus
            requested_pods[queue] = requested_pods.get(queue, 0) + job.trace.pods
        if prioritized:
            for queued in by_queue.values():
                queued.sort(key=lambda j: -j.trace.priority)  # stable: arrival order within a priority
        placed_any = False
        deserved = _deserved(policy, weights, capacity, allocated, pending_gpus)
        order = [(share(q), q) for q in by_queue]
        heapq.heapify(order)
        cursor = {q: 0 for q in by_queue}
        # what any placement needs at least: a cheap refusal for most jobs on a full cluster (at 1,000 nodes and
        # 2,000 waiting gangs, scanning every node for each of them was nearly all of a start estimate)
        free_total = capacity - sum(state.used.values())
        largest_free = max((free_gpus(state, n) for n in state.nodes), default=0)
        overused: set[str] = set()
        refused: set[str] = set()
        while order:
            _, queue = heapq.heappop(order)
            if policy.queue_plugin == "proportion" and proportion_overused(
                    allocated[queue], deserved[queue], pods_allocated[queue], requested_pods[queue]):
                overused.add(queue)
                continue  # overused: the whole queue waits this cycle
            job = by_queue[queue][cursor[queue]]
            cursor[queue] += 1
            limit = deserved[queue] if policy.queue_plugin == "proportion" else policy.capability.get(queue, capacity)
            within = allocated[queue] + job.trace.gpus <= limit + 1e-9
            if not within and policy.queue_plugin == "proportion":
                refused.add(queue)
            room = job.trace.gpus <= free_total and job.trace.gpus_per_pod <= largest_free
            chosen = place(state, topo, job.trace, rng) if room and within else None
            if chosen is not None:
                placed_any = True
                free_total -= job.trace.gpus
                largest_free = max((free_gpus(state, n) for n in state.nodes), default=0)
                job.placed, job.placed_at = True, t
                allocated[queue] += job.trace.gpus
                pods_allocated[queue] += job.trace.pods
                bound = t + policy.bind_latency_s
                finish = bound + max(0.0, job.trace.duration - job.done)
                for node in chosen:
                    key = len(records)
                    records.append(PodRecord(job=job.trace.name, gpus=job.trace.gpus_per_pod, node=node, bound=bound,
                                             ended=finish, succeeded=True))
                    live[key] = _Pod(node, job.trace.gpus_per_pod, queue, job.trace.name, key, bound)
                    heapq.heappush(ends, (finish, key))
                    end = max(end, finish)
                if reservation is not None and reservation.gang[1] == job.trace.name:
                    reservation = None
                    state.held_by = dict.fromkeys(state.held_by)
            if cursor[queue] < len(by_queue[queue]):
                heapq.heappush(order, (share(queue), queue))
        before = t
        t = _next_cycle(t, policy.cycle_s, jobs, ends) if quiet and not placed_any else round(t + policy.cycle_s, 6)
        if held_back is not None:
            for queues, field_name in ((overused, "overused_s"), (refused, "refused_s")):
                for queue in queues:
                    counts = held_back.setdefault(queue, {"overused_s": 0.0, "refused_s": 0.0})
                    counts[field_name] += t - before
    return submitted, records, max([end] + [r.ended or 0.0 for r in records])


def _next_cycle(t: float, cycle_s: float, jobs: Sequence[_Job], ends: Sequence[tuple[float, int]]) -> float:
    """The first cycle after `t` (the one just run) where something can change: a cycle that placed nothing leaves the state
    as it found it, so the cycles until the next arrival or pod end would place nothing either. Only without
    reservation and reclaim, whose timers act on their own."""
    upcoming = [j.ready_at for j in jobs if not j.placed and j.ready_at > t]
    event = min(upcoming + ([ends[0][0]] if ends else []), default=t)
    return round(t + max(1, math.ceil(round((event - t) / cycle_s, 6))) * cycle_s, 6)


def _reclaim(state: NodeUse, pending: Sequence[_Job], live: Mapping[int, _Pod], allocated: Mapping[str, int],
             weights: Mapping[str, float], policy: ModelPolicy, capacity: int, t: float, inflight: Sequence[_Flight],
             evicted: set[str], jobs: Mapping[str, _Job]) -> reclaim.Eviction | None:
    """trainyard's gang-aware reclaim (`scheduling.reclaim.plan`) on the model's state; nodes and gangs of
    evictions in flight are left out; each running job's work at stake is what its last checkpoint did not keep."""
    held: dict[str, tuple[str, int, set[str], float]] = {}
    for pod in live.values():
        queue, gpus, nodes, since = held.get(pod.job, (pod.queue, 0, set(), t))
        held[pod.job] = (queue, gpus + pod.gpus, nodes | {pod.node}, min(since, pod.bound))
    running = [RunningJob(("", name), queue, Fraction(gpus), frozenset(nodes), t - since,
                          saved_work(jobs[name].trace, t - since))
               for name, (queue, gpus, nodes, since) in held.items()]
    busy = frozenset().union(*(f.nodes for f in inflight)) if inflight else frozenset()
    served = {f.gang for f in inflight}
    waiting = [g for g in _gangs(pending, t, policy.reclaim_singles) if g.key[1] not in served]
    if policy.reclaim_target == reclaim.FAIR_TARGET:
        asked = {q: Fraction(sum(j.trace.gpus for j in pending if j.trace.tenant == q)) for q in weights}
        deserved = fair_deserved(Fraction(capacity), weights, {q: Fraction(v) for q, v in allocated.items()}, asked)
    else:
        deserved = _deserved_shares(policy, weights, capacity)
    protected = frozenset(("", name) for name in evicted) if policy.reclaim_once else frozenset()
    return reclaim.plan([n for n in _nodes(state) if n.name not in busy], waiting, running,
                        {q: Fraction(v) for q, v in allocated.items()}, deserved, policy.reclaim_after_s or 0.0,
                        protected, policy.reclaim_rule)


def _nodes(state: NodeUse) -> list[Node]:
    return [Node(name=n.name, rack=n.rack, spine=n.spine, allocatable={GPU: Fraction(n.gpus)},
                 used={GPU: Fraction(state.used[n.name])}) for n in state.nodes]


def _gangs(pending: Sequence[_Job], t: float, singles: bool = False) -> list[WaitingGang]:
    return [WaitingGang(key=("", j.trace.name), queue=j.trace.tenant, pods=j.trace.pods,
                        gpus_per_pod=Fraction(j.trace.gpus_per_pod), tier=j.trace.tier, waiting_s=t - j.trace.arrival)
            for j in pending if j.trace.is_gang or singles]


def _deserved_shares(policy: ModelPolicy, weights: Mapping[str, float], capacity: int) -> dict[str, Fraction]:
    """The deserved GPUs reservation and reclaim compare with: the policy's, else the weight share."""
    shares = weight_shares(Fraction(capacity), weights)
    return {q: Fraction(policy.deserved.get(q) or shares[q]) for q in weights}


def _reserve(state: NodeUse, pending: Sequence[_Job], allocated: Mapping[str, int], weights: Mapping[str, float],
             policy: ModelPolicy, capacity: int, current: Reservation | None, t: float) -> Reservation | None:
    wanted = plan(_nodes(state), _gangs(pending, t), {q: Fraction(v) for q, v in allocated.items()},
                  _deserved_shares(policy, weights, capacity), current, policy.reserve_after_s or 0.0)
    held = set(wanted.nodes) if wanted else set()
    for name in state.held_by:
        state.held_by[name] = wanted.gang[1] if name in held and wanted else None
    return wanted
