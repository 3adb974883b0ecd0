"""A seeded gang trace: which tenant submits which job when, how big and for how long.

Pure and deterministic (one `random.Random(seed)`), so every scheduler profile replays the same trace
and a test can pin its shape. Arrivals are spread so that the trace offers `overload` times the
cluster's GPU-seconds over the arrival window: demand stays at or above capacity for most of the run.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

SINGLE_GPUS = (1, 2, 4, 8)
SINGLE_GPU_ODDS = (0.3, 0.3, 0.2, 0.2)
GANG_PODS = range(2, 9)
GANG_GPUS_PER_POD = 8
RACK_TIER, SPINE_TIER = 1, 2
LARGEST_RACK_GANG = 4
"""Gangs of up to this many pods must fit one rack (hard tier 1); larger ones one spine (hard tier 2)."""


@dataclass(frozen=True)
class Tenant:
    name: str
    weight: int
    load: float
    """Fraction of the trace's jobs this tenant submits."""


# Stack-like tenants: weights 4:2:1; the lighter queues submit more than their weighted share, so only
# the scheduler (not the offered load) can give each queue its weight.
DEFAULT_TENANTS = (Tenant("team-a", 4, 0.45), Tenant("team-b", 2, 0.30), Tenant("team-c", 1, 0.25))


@dataclass(frozen=True)
class TraceJob:
    name: str
    tenant: str
    arrival: float
    """Seconds after the replay starts."""
    duration: float
    """Seconds every pod runs once it is running."""
    pods: int
    gpus_per_pod: int
    tier: int | None
    """Hard network topology: the highest HyperNode tier the gang may span (None: unconstrained)."""
    priority_class: str | None = None
    """The PriorityClass the TrainJob names (None: its tenant's default)."""
    priority: int = 0
    """That class's value, as a stack resolves it: Volcano's `priority` plugin serves a queue's jobs highest first."""
    checkpoint_every: float | None = None
    """Seconds of work between the checkpoints it saves (None: none; evicted, it starts again from the start)."""

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def is_gang(self) -> bool:
        return self.pods > 1

    @property
    def size(self) -> str:
        """'4 GPU' for single pods, '3x8' for gangs: the buckets delays are reported by."""
        return f"{self.pods}x{self.gpus_per_pod}" if self.is_gang else f"{self.gpus} GPU"


def size_order(size: str) -> tuple[int, int]:
    """Sort key for size buckets: single pods by GPUs, then gangs by pods."""
    if "x" in size:
        pods, gpus = size.split("x")
        return 1, int(pods) * int(gpus)
    return 0, int(size.split()[0])


def _duration(rng: random.Random, median: float, scale: float) -> float:
    """Log-normal around `median` (sigma 0.6), clamped to [median/4, 4*median]: most jobs minutes, few long."""
    value = median * math.exp(rng.gauss(0.0, 0.6))
    return round(scale * min(4 * median, max(median / 4, value)), 1)


def _shape(rng: random.Random, single_fraction: float, rack_nodes: int, spine_nodes: int,
           node_gpus: int) -> tuple[int, int, int | None]:
    if rng.random() < single_fraction or spine_nodes < 2:
        sizes = [(g, odds) for g, odds in zip(SINGLE_GPUS, SINGLE_GPU_ODDS) if g <= node_gpus] or [(node_gpus, 1.0)]
        return 1, rng.choices([g for g, _ in sizes], [odds for _, odds in sizes])[0], None
    pods = rng.choice([n for n in GANG_PODS if n <= spine_nodes])
    return pods, node_gpus, RACK_TIER if pods <= min(LARGEST_RACK_GANG, rack_nodes) else SPINE_TIER


def generate(seed: int, jobs: int, capacity_gpus: int, tenants: tuple[Tenant, ...] = DEFAULT_TENANTS,
             duration_scale: float = 1.0, median_duration: float = 60.0, overload: float = 1.5,
             single_fraction: float = 0.5, rack_nodes: int = 8, spine_nodes: int = 32,
             node_gpus: int = GANG_GPUS_PER_POD) -> list[TraceJob]:
    """`jobs` jobs sorted by arrival. Every gang fits its allowed tier: a rack holds `rack_nodes` nodes, a
    spine `spine_nodes` (gangs never have more pods than a spine has nodes); a gang's pod takes a whole node of
    `node_gpus` GPUs, a single pod at most that."""
    if jobs < 1 or capacity_gpus < 1 or overload <= 0:
        raise ValueError("a trace needs at least one job, some capacity and a positive overload")
    rng = random.Random(seed)
    names, odds = [t.name for t in tenants], [t.load for t in tenants]
    drafts = []
    for _ in range(jobs):
        pods, gpus, tier = _shape(rng, single_fraction, rack_nodes, spine_nodes, node_gpus)
        drafts.append((rng.choices(names, odds)[0], pods, gpus, tier, _duration(rng, median_duration, duration_scale)))
    work = sum(pods * gpus * duration for _, pods, gpus, _, duration in drafts)
    window = work / (overload * capacity_gpus)
    gaps = [rng.expovariate(1.0) for _ in drafts]
    total = sum(gaps[1:]) or 1.0
    arrival, out = 0.0, []
    for index, ((tenant, pods, gpus, tier, duration), gap) in enumerate(zip(drafts, gaps)):
        if index:
            arrival += gap / total * window
        out.append(TraceJob(f"j{index:04d}", tenant, round(arrival, 2), duration, pods, gpus, tier))
    return out


def saved_work(job: TraceJob, ran_s: float) -> float:
    """Seconds of a run of `ran_s` the job's last checkpoint kept (what an eviction then does not lose)."""
    if not job.checkpoint_every or job.checkpoint_every <= 0 or ran_s <= 0:
        return 0.0
    return math.floor(ran_s / job.checkpoint_every + 1e-9) * job.checkpoint_every


def with_checkpoints(trace: list[TraceJob], seed: int, intervals: tuple[float, ...] = (30.0, 60.0, 120.0),
                     without: float = 0.25) -> list[TraceJob]:
    """The trace with a checkpoint interval per job: a share `without` saves none, the others one of `intervals`
    (seconds of work). Drawn from a stream of its own, so the trace's other draws stay what they were."""
    rng = random.Random(f"{seed}:checkpoints")
    out = []
    for job in trace:
        every = None if rng.random() < without else rng.choice(intervals)
        out.append(TraceJob(job.name, job.tenant, job.arrival, job.duration, job.pods, job.gpus_per_pod, job.tier,
                            job.priority_class, job.priority, every))
    return out


def offered_gpu_seconds(trace: list[TraceJob]) -> float:
    return sum(job.gpus * job.duration for job in trace)
