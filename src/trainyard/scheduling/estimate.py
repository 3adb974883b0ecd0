"""When a pending gang should start (pure): the cluster's state replayed forward on the model of vc-scheduler.

The running gangs hold their nodes until their expected end (`trainerStatus.estimatedRemainingSeconds` when the
trainer reports it, else a stated default run time); the pending gangs wait in their queues in the order Volcano
serves them (priority, then creation) and run for their expected time once placed. Jobs submitted later are not
known, so an estimate is the start if nothing else arrives: later arrivals of a higher priority, or of a queue
further below its share, can only delay it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from trainyard.scheduling.simulator import ModelNode, ModelPolicy, simulate
from trainyard.scheduling.trace import TraceJob
from trainyard.timestamps import duration_words

DEFAULT_RUN_S = 3600.0
"""A job's run time when nothing better is known (no trainerStatus, no history): one hour."""
HORIZON_S = 7 * 24 * 3600.0
"""Estimates beyond a week are `None` ("not within a week")."""
GUESS_STRETCH = 2.0
"""Guessed run times are stretched this much in a second replay: a start that moves was made by the guess."""
MOVED_S, MOVED_FRACTION = 60.0, 0.2
"""A start moved when it shifts by more than a minute and by more than this share of itself."""


@dataclass(frozen=True)
class RunningGang:
    key: str
    queue: str
    pods: tuple[tuple[str, int], ...]
    """(node, GPUs) of each bound pod."""
    remaining_s: float
    guessed: bool = False
    """`remaining_s` comes from the stated default run time, not from the trainer (no trainerStatus)."""


@dataclass(frozen=True)
class PendingGang:
    key: str
    queue: str
    pods: int
    gpus_per_pod: int
    tier: int | None = None
    priority: int = 0
    run_s: float = DEFAULT_RUN_S
    """How long it runs once placed (what the gangs behind it wait for)."""
    guessed: bool = False
    """`run_s` is the stated default, not a known run time."""


@dataclass(frozen=True)
class StartEstimate:
    key: str
    queue: str
    position: int
    """1 = the next its queue serves (priority, then creation order)."""
    start_in_s: float | None
    """Seconds from now; None: not within the horizon."""
    guessed: bool = False
    """The start moves with the guessed run times (`GUESS_STRETCH`): it is the default's, not the cluster's; the
    estimate then says it has none rather than a precise time (how far off such times are: the start_estimates
    bench)."""


def remaining_time(estimated_remaining_s: float | None, ran_s: float, default_run_s: float = DEFAULT_RUN_S) -> float:
    """What a running job has left: the trainer's own estimate, else the default run time less what it ran (a job
    already past the default is given another tenth of it, not zero)."""
    if estimated_remaining_s is not None:
        return max(0.0, float(estimated_remaining_s))
    left = default_run_s - ran_s
    return left if left > 0 else default_run_s / 10


def positions(pending: Sequence[PendingGang]) -> dict[str, int]:
    """Each gang's place in its queue, as Volcano's priority plugin orders a queue (stable: creation order)."""
    out: dict[str, int] = {}
    per_queue: dict[str, list[tuple[int, int, str]]] = {}
    for index, gang in enumerate(pending):
        per_queue.setdefault(gang.queue, []).append((-gang.priority, index, gang.key))
    for entries in per_queue.values():
        for place, (_, _, key) in enumerate(sorted(entries), start=1):
            out[key] = place
    return out


def estimate_starts(nodes: Sequence[ModelNode], running: Sequence[RunningGang], pending: Sequence[PendingGang],
                    weights: Mapping[str, float], policy: ModelPolicy = ModelPolicy(), seed: int = 0,
                    horizon_s: float = HORIZON_S) -> dict[str, StartEstimate]:
    """A start estimate for every pending gang (given in creation order)."""
    now = replace(policy, submit_latency_s=0.0, bind_latency_s=0.0)  # the gangs are in the scheduler's cache already
    starts = _starts(nodes, running, pending, weights, now, seed, horizon_s)
    stretched = starts
    if any(g.guessed for g in running) or any(g.guessed for g in pending):
        stretched = _starts(nodes, [replace(g, remaining_s=g.remaining_s * GUESS_STRETCH) if g.guessed else g
                                    for g in running],
                            [replace(g, run_s=g.run_s * GUESS_STRETCH) if g.guessed else g for g in pending],
                            weights, now, seed, horizon_s)
    places = positions(pending)
    return {gang.key: StartEstimate(gang.key, gang.queue, places[gang.key], starts.get(gang.key),
                                    _moved(starts.get(gang.key), stretched.get(gang.key)))
            for gang in pending}


def _starts(nodes: Sequence[ModelNode], running: Sequence[RunningGang], pending: Sequence[PendingGang],
            weights: Mapping[str, float], policy: ModelPolicy, seed: int, horizon_s: float) -> dict[str, float]:
    """gang key -> seconds until its first pod is placed, for the gangs placed within the horizon."""
    names = {f"p{index:07d}": gang for index, gang in enumerate(pending)}  # name order = creation order
    trace = [TraceJob(name, gang.queue, 0.0, max(gang.run_s, policy.cycle_s), gang.pods, gang.gpus_per_pod,
                      gang.tier if gang.pods > 1 else None, priority=gang.priority) for name, gang in names.items()]
    held = [(TraceJob(f"r{index:07d}-{pod}", gang.queue, 0.0, gang.remaining_s, 1, gpus, None), (node,))
            for index, gang in enumerate(running) for pod, (node, gpus) in enumerate(gang.pods)]
    queues = dict(weights)
    for queue in [g.queue for g in pending] + [g.queue for g in running]:
        queues.setdefault(queue, 1.0)
    _, pods, _ = simulate(trace, list(nodes), queues, policy, seed=seed, horizon_s=horizon_s, already_running=held)
    starts: dict[str, float] = {}
    for pod in pods:
        if pod.job in names and pod.bound is not None:
            key = names[pod.job].key
            starts[key] = min(starts.get(key, pod.bound), pod.bound)
    return starts


def _moved(start: float | None, stretched: float | None) -> bool:
    if start is None or stretched is None:
        return (start is None) != (stretched is None)
    shift = abs(stretched - start)
    return shift > MOVED_S and shift > MOVED_FRACTION * max(start, 1.0)


def phrase(estimate: StartEstimate) -> str:
    """"starts in about 12 min, position 3 in queue team-a" (what an event, fit and report say)."""
    where = f"position {estimate.position} in queue {estimate.queue}"
    if estimate.guessed:
        return f"no start estimate: it waits for jobs whose end is unknown (no trainerStatus progress), {where}"
    if estimate.start_in_s is None:
        return f"does not start within a week at the current load, {where}"
    if estimate.start_in_s < 30:
        return f"starts now, {where}"
    return f"starts in about {duration_words(estimate.start_in_s)}, {where}"
