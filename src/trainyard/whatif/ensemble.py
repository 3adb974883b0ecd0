"""The model's replays of one side as an ensemble (pure): why one replay is not a prediction, and how several are
averaged into one.

A replay of a few dozen jobs is chaotic: a job ready a second earlier takes a node another job was about to get,
a queue crosses its deserved share a cycle sooner, and a figure moves by several points. A real cluster's
latencies (controller, JobSet, scheduler cycle) vary by about that much from run to run, so a single model replay
predicts one trajectory the cluster may well not take. The model therefore replays each side several times, each
job made visible to the scheduler up to one start latency later (`start_jitter_s`, drawn per job and member), with
another tie-break seed, and reports the mean figures. Members are paired across the two sides of a what-if (same
seed, same draws), so the predicted change is the mean change.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import replace
from typing import Any, Mapping, Sequence

from trainyard.scheduling.simulator import ModelPolicy
from trainyard.scheduling.trace import TraceJob

ENSEMBLE_MAX = 16
ENSEMBLE_JOB_BUDGET = 4000
"""Job replays one side may spend: a long trace averages its own chaos (and must stay fast), a short one gets up
to `ENSEMBLE_MAX` members."""


def ensemble_size(jobs: int) -> int:
    """Members for a side of `jobs` runnable jobs: at least 1, at most `ENSEMBLE_MAX`."""
    return max(1, min(ENSEMBLE_MAX, ENSEMBLE_JOB_BUDGET // max(1, jobs)))


def start_jitter_s(policy: ModelPolicy) -> float:
    """How much later than the model's mean a job may become visible to the scheduler: its submit latency plus one
    scheduling cycle (where in the cycle it lands)."""
    return policy.submit_latency_s + policy.cycle_s


def jittered(trace: Sequence[TraceJob], jitter_s: float, seed: int, member: int) -> list[TraceJob]:
    """The trace as ensemble member `member` replays it: member 0 as given, the others each job's arrival shifted by
    a draw in [0, jitter_s) of its own (seeded by seed, member and job name: the same job gets the same draw on both
    sides of a what-if, whichever other jobs a side could never run, and in every process)."""
    if member == 0 or jitter_s <= 0:
        return list(trace)
    return [replace(job, arrival=job.arrival + jitter_s * random.Random(f"{seed}:{member}:{job.name}").random())
            for job in trace]


def mean_side(sides: Sequence[Any]) -> Any:
    """The members' figures averaged leaf by leaf: numbers by their mean over the members that have one (None where
    none has), a number every member agrees on kept as it is (counts stay integers), anything else (reasons, lists,
    names) as the first member has it."""
    first = sides[0]
    if isinstance(first, dict):
        keys = list(dict.fromkeys(key for side in sides for key in side))
        return {key: mean_side([side[key] for side in sides if key in side]) for key in keys}
    numbers = [v for v in sides if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers or len(numbers) < len([v for v in sides if v is not None]):
        return first
    if all(v == numbers[0] for v in numbers):
        return numbers[0]
    return round(sum(numbers) / len(numbers), 4)


def member_figures(side: Mapping[str, Any]) -> dict[str, float]:
    """The figures whose change the what-if table shows, flat: allocation, goodput, each tenant's share and p50
    wait (`tenant_wait_p50.<tenant>`: a tenant may be named like a job size), each job size's p50 wait
    (`wait_p50.<size>`), None left out."""
    out = {"allocation": side.get("allocation"), "goodput": side.get("goodput")}
    for name, tenant in (side.get("tenants") or {}).items():
        out[f"share.{name}"] = tenant.get("share")
        out[f"tenant_wait_p50.{name}"] = tenant.get("wait_p50_s")
    for size, waits in (side.get("wait_by_size") or {}).items():
        out[f"wait_p50.{size}"] = waits.get("p50_s")
    return {key: float(value) for key, value in out.items() if value is not None}


def change_spread(current: Sequence[Mapping[str, Any]], proposed: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per figure, the standard deviation of the change over paired members (proposed member k - current member k):
    how much the predicted change depends on timing the model cannot know. Only with two pairs or more."""
    pairs = [(member_figures(a), member_figures(b)) for a, b in zip(current, proposed)]
    out = {}
    for key in set().union(*(set(a) & set(b) for a, b in pairs)) if pairs else ():
        changes = [b[key] - a[key] for a, b in pairs if key in a and key in b]
        if len(changes) >= 2:
            out[key] = round(statistics.pstdev(changes), 4)
    return dict(sorted(out.items()))
