"""Start estimates for the platform's pending gangs, from the objects a snapshot lists (pure).

Running gangs: bound, active GPU pods grouped by their Volcano PodGroup; each holds its nodes for what it has left
(its TrainJob's `status.trainerStatus.estimatedRemainingSeconds` when the trainer reports it, else the stated
default run time less what it ran). Pending gangs: PodGroups that wait (Pending/Inqueue, nothing running) in
creation order, each run for the default time once placed. Queues: weight, GPU capability and deserved from the
Volcano Queues; `capacity` or `proportion` as the scheduler configuration names it. The model
(`trainyard.scheduling.estimate`) replays them forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping

from trainyard.scheduling.cluster_state import (GPU, GROUPLESS, Node, active_pods_by_group, first_start_s, hard_tier, meta,
                                      pod_group_queues, pod_resources, resources, waiting_groups)
from trainyard.scheduling.simulator import ModelNode, ModelPolicy
from trainyard.scheduling.estimate import (DEFAULT_RUN_S, PendingGang, RunningGang, StartEstimate, estimate_starts,
                                       remaining_time)

NO_RACK = "-"
ASSUMPTION = ("if nothing else arrives; running jobs end as their trainerStatus says, else after {minutes:.0f} min in "
              "all, and each waiting job runs that long")
MOST_PENDING = 2000
"""Above this many waiting gangs the report and fit leave the estimates out (each replays every gang ahead of it:
at 6,400 waiting gangs on 1,000 nodes fit's one estimate took 11 s of CPU)."""


def waiting_count(pod_groups: Iterable[dict]) -> int:
    """How many gangs wait (`pending_gangs` without building them): what decides whether to estimate at all."""
    return len(waiting_groups(pod_groups))


def too_many_to_estimate(waiting: int) -> str | None:
    """Why no estimate is given for a cluster where `waiting` gangs wait; None when one is."""
    if waiting <= MOST_PENDING:
        return None
    return f"none: {waiting} gangs wait, more than the {MOST_PENDING} the model replays in time"


@dataclass(frozen=True)
class EstimateInputs:
    nodes: list[ModelNode]
    running: list[RunningGang]
    pending: list[PendingGang]
    weights: dict[str, float]
    policy: ModelPolicy
    queue_of: dict[str, str]
    """namespace/PodGroup -> its queue."""


def group_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def trainer_remaining(trainjobs: Iterable[dict]) -> dict[str, float]:
    """namespace/name -> the trainer's own estimate of the seconds left (TrainJobs that report one)."""
    out = {}
    for job in trainjobs:
        status = ((job.get("status") or {}).get("trainerStatus") or {})
        if status.get("estimatedRemainingSeconds") is not None:
            out[group_key(meta(job).get("namespace", ""), meta(job).get("name", ""))] = float(
                status["estimatedRemainingSeconds"])
    return out


def reports_one_tenant_may_see(trainjobs: Iterable[dict], namespace: str) -> list[dict]:
    """The TrainJobs whose trainer reports may shape an estimate told to `namespace`: its own. Another tenant's
    `estimatedRemainingSeconds` is that tenant's to know; an estimate built on it would tell it (a job waiting on one
    other gang starts when that gang says it ends). Other tenants' gangs are then given the stated default run."""
    return [job for job in trainjobs if meta(job).get("namespace", "") == namespace]


def namespace_of(key: str) -> str:
    return key.removeprefix(GROUPLESS).partition("/")[0]


def _gpus(value: Fraction) -> int:
    return math.ceil(value)


def running_gangs(pods: Iterable[dict], remaining: Mapping[str, float], now_s: float,
                  default_run_s: float = DEFAULT_RUN_S, queue_of: Mapping[str, str] | None = None) -> list[RunningGang]:
    """Bound, active GPU pods by PodGroup (a pod without one is a gang of its own in no queue)."""
    queues = queue_of or {}
    out = []
    for (namespace, group), members in active_pods_by_group(pods).items():
        key = (f"{GROUPLESS}{namespace}/{group[len(GROUPLESS):]}" if group.startswith(GROUPLESS)
               else group_key(namespace, group))
        with_gpus = [pod for pod in members if pod_resources(pod).get(GPU, Fraction(0)) > 0]
        if not with_gpus:
            continue
        held = [(str(pod["spec"]["nodeName"]), _gpus(pod_resources(pod)[GPU])) for pod in with_gpus]
        started = first_start_s(with_gpus)
        ran = now_s - started if started is not None else 0.0
        out.append(RunningGang(key, queues.get(key, ""), tuple(held),
                               remaining_time(remaining.get(key), ran, default_run_s), guessed=key not in remaining))
    return sorted(out, key=lambda gang: gang.key)


def pending_gangs(pod_groups: Iterable[dict], priorities: Mapping[str, int],
                  default_run_s: float = DEFAULT_RUN_S) -> list[PendingGang]:
    """PodGroups that wait for GPUs with nothing running, oldest first."""
    return [PendingGang(group_key(*w.key), w.queue, w.pods, _gpus(w.gpus / w.pods), w.tier,
                        priorities.get(w.priority_class, 0), default_run_s, guessed=True)
            for w in sorted(waiting_groups(pod_groups), key=lambda w: (w.created, group_key(*w.key)))]


def queue_plugin_of(scheduler_conf: str) -> str:
    """`capacity` when the scheduler configuration names that plugin, else `proportion` (trainyard's default)."""
    import yaml

    try:
        conf = yaml.safe_load(scheduler_conf) or {}
    except yaml.YAMLError:
        return "proportion"
    names = {plugin.get("name") for tier in conf.get("tiers") or [] for plugin in tier.get("plugins") or []}
    return "capacity" if "capacity" in names else "proportion"


def queue_policy(queues: Iterable[dict], queue_plugin: str) -> tuple[dict[str, float], ModelPolicy]:
    """Weights and the model's queue rules from the Volcano Queues (`root` left out)."""
    weights: dict[str, float] = {}
    capability: dict[str, int] = {}
    deserved: dict[str, int] = {}
    for queue in queues:
        name, spec = meta(queue).get("name", ""), queue.get("spec") or {}
        if name == "root":
            continue
        weights[name] = float(spec.get("weight") or 1)
        cap = resources(spec.get("capability")).get(GPU)
        if cap is not None:
            capability[name] = math.floor(cap)
        owed = resources(spec.get("deserved")).get(GPU)
        if owed is not None:
            deserved[name] = math.floor(owed)
    if queue_plugin == "capacity":
        return weights, ModelPolicy(queue_plugin="capacity", capability=capability, deserved=deserved)
    return weights, ModelPolicy(capability=capability)


def model_nodes(nodes: Iterable[Node]) -> list[ModelNode]:
    return [ModelNode(n.name, n.rack or NO_RACK, n.spine or NO_RACK, math.floor(n.allocatable.get(GPU, Fraction(0))))
            for n in nodes if n.schedulable and n.allocatable.get(GPU, Fraction(0)) >= 1]


def inputs(nodes: Iterable[Node], pods: Iterable[dict], pod_groups: list[dict], queues: Iterable[dict],
           trainjobs: Iterable[dict], priorities: Mapping[str, int], queue_plugin: str, now_s: float,
           default_run_s: float = DEFAULT_RUN_S) -> EstimateInputs:
    queue_of = {group_key(*key): queue for key, queue in pod_group_queues(pod_groups).items()}
    weights, policy = queue_policy(queues, queue_plugin)
    return EstimateInputs(model_nodes(nodes),
                          running_gangs(pods, trainer_remaining(trainjobs), now_s, default_run_s, queue_of),
                          pending_gangs(pod_groups, priorities, default_run_s), weights, policy, queue_of)


def estimates(given: EstimateInputs, extra: PendingGang | None = None) -> dict[str, StartEstimate]:
    """Every pending gang's estimate; `extra` (a job not created yet, for `fit`) waits behind them all."""
    pending = given.pending + ([extra] if extra is not None else [])
    return estimate_starts(given.nodes, given.running, pending, given.weights, given.policy)


def gang_to_estimate(namespace: str, name: str, queue: str | None, pods: list[dict], topology: dict | None,
                     priority: int, default_run_s: float = DEFAULT_RUN_S) -> PendingGang:
    """A gang not created yet (`trainyard fit`), as the estimator takes it: its pods' largest GPU request each."""
    per_pod = max((_gpus(p.get(GPU, Fraction(0))) for p in pods), default=0)
    return PendingGang(group_key(namespace, name), queue or "default", len(pods), per_pod, hard_tier(topology),
                       priority, default_run_s, guessed=True)
