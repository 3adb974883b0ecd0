"""Nodes dying under the scheduling trace's load: what to kill, what to sample, what the samples show (pure).

The node-loss bench (`bench/node_loss_trace.py`) replays a trace on simulated nodes, powers off a few nodes
holding gang pods once the cluster is saturated, and samples every few seconds what the platform says (the
report, Volcano's queues) against what holds (pods bound on nodes that are Ready). The figures answer issue-style
questions: are a lost node's GPUs still counted as used, does Volcano keep a queue's GPUs reserved for pods that
are gone, are the dead node's pods let go, does every hit job re-form and finish, does the node rejoin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from trainyard import k8s as K
from trainyard.scheduling.records import PodRecord
from trainyard.timestamps import parse_time

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Sample:
    """One look at the cluster, `at_s` seconds after the kill."""
    at_s: float
    lost: tuple[str, ...]
    """Nodes whose Ready condition is not True."""
    report_gpus_on_lost: float
    """GPUs `trainyard report` counts as allocated on those nodes (the promise: none)."""
    volcano_allocated: float
    """Volcano's own figure, the queues' `status.allocated` GPUs summed."""
    held_on_ready: float
    """GPUs of pods bound to Ready nodes and not finished: what is really held."""
    pods_on_lost: int
    """Pod objects still bound to a lost node (evicted ones stay Terminating until deleted for good)."""

    @property
    def volcano_excess(self) -> float:
        """GPUs Volcano counts as allocated beyond what pods on Ready nodes hold."""
        return self.volcano_allocated - self.held_on_ready


def pod_gpus(pod: dict) -> float:
    """The pod's GPU request (its containers' requests, limits where no request is set)."""
    total = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(K.GPU_RESOURCE, (resources.get("limits") or {}).get(K.GPU_RESOURCE))
        total += float(value or 0)
    return total


def _active(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def remaining_s(pod: dict, now: float) -> float:
    """Seconds until kwok completes the pod (its start plus the delay it is annotated with); infinite without one.
    kwok completes a pod at that time even once its node is dead: a pod that ends before the node is seen lost
    is not hit by the death."""
    delay = str(((pod.get("metadata") or {}).get("annotations") or {}).get(K.KWOK_POD_COMPLETE_DELAY_ANNOTATION) or "")
    started = (pod.get("status") or {}).get("startTime")
    if not delay.endswith("s") or not started:
        return float("inf")
    return parse_time(started).timestamp() + float(delay[:-1]) - now


def _outlives(pod: dict, now: float, min_remaining_s: float) -> bool:
    return _active(pod) and remaining_s(pod, now) >= min_remaining_s


def sample(at_s: float, lost: Iterable[str], report_nodes: Sequence[Mapping], report_queues: Sequence[Mapping],
           pods: Sequence[dict], queues: Iterable[str] | None = None) -> Sample:
    """A Sample from the report's node and queue rows and the pods as listed at the same moment; `queues`: the
    leaf queues to add up (a parent queue, `root` among them, repeats what its children hold)."""
    lost = tuple(sorted(lost))
    wanted = None if queues is None else set(queues)
    active = [p for p in pods if _active(p)]
    return Sample(
        at_s=round(at_s, 1), lost=lost,
        report_gpus_on_lost=float(sum(float(n.get("allocated") or 0) for n in report_nodes if n.get("node") in lost)),
        volcano_allocated=float(sum(float(q.get("volcano_allocated") or 0) for q in report_queues
                                    if wanted is None or q.get("queue") in wanted)),
        held_on_ready=sum(pod_gpus(p) for p in active if p["spec"]["nodeName"] not in lost),
        pods_on_lost=sum(1 for p in pods if (p.get("spec") or {}).get("nodeName") in lost))


def nodes_to_kill(pods: Sequence[dict], gang_jobs: set[str], count: int, now: float = 0.0,
                  min_remaining_s: float = 0.0) -> list[str]:
    """The `count` nodes holding the most pods of gangs (`gang_jobs`: trace job names of multi-pod jobs) that run at
    least `min_remaining_s` more, ties by name: killing them hits gangs, the case JobSet's failure policy and
    Volcano's gang accounting must handle."""
    per_node: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        job = ((pod.get("metadata") or {}).get("labels") or {}).get(K.TRACE_JOB_LABEL)
        if node and _outlives(pod, now, min_remaining_s) and job in gang_jobs:
            per_node[node] = per_node.get(node, 0) + 1
    return sorted(per_node, key=lambda n: (-per_node[n], n))[:count]


def jobs_on(pods: Sequence[dict], nodes: Iterable[str], now: float = 0.0,
            min_remaining_s: float = 0.0) -> dict[str, list[str]]:
    """Trace job -> the pods it has bound on `nodes` that run at least `min_remaining_s` more (the jobs the kill
    hits: a pod kwok completes before the node is seen lost is not)."""
    nodes = set(nodes)
    out: dict[str, list[str]] = {}
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") in nodes and _outlives(pod, now, min_remaining_s):
            job = ((pod.get("metadata") or {}).get("labels") or {}).get(K.TRACE_JOB_LABEL)
            if job:
                out.setdefault(job, []).append(pod["metadata"]["name"])
    return {job: sorted(names) for job, names in sorted(out.items())}


@dataclass
class Outcome:
    """What became of the jobs the kill hit, from the replay's pod records (times in the records' base)."""
    finished: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)
    reformed_s: dict[str, float] = field(default_factory=dict)
    """Job -> seconds from the kill until it again had as many pods bound and running as it has pods."""


def outcome(hit: Iterable[str], sizes: Mapping[str, int], records: Iterable[PodRecord], killed_at: float) -> Outcome:
    """For each hit job: finished (as many pods succeeded as it has), and when it was whole again after the kill
    (the moment its pods bound after the kill, with those of before still running, reached its size)."""
    by_job: dict[str, list[PodRecord]] = {}
    for record in records:
        by_job.setdefault(record.job, []).append(record)
    result = Outcome()
    for job in sorted(hit):
        pods, size = by_job.get(job, []), sizes[job]
        succeeded = sum(1 for p in pods if p.succeeded)
        (result.finished if succeeded >= size else result.unfinished).append(job)
        fresh = sorted(p.bound for p in pods if p.bound is not None and p.bound > killed_at)
        kept = [p for p in pods if p.bound is not None and p.bound <= killed_at and p.succeeded]
        needed = size - len(kept)
        if needed <= 0:
            result.reformed_s[job] = 0.0
        elif len(fresh) >= needed:
            result.reformed_s[job] = round(fresh[needed - 1] - killed_at, 1)
    return result


def first_at(samples: Sequence[Sample], predicate) -> float | None:
    return next((s.at_s for s in samples if predicate(s)), None)


def figures(samples: Sequence[Sample], killed: Sequence[str], settled_after_s: float) -> dict:
    """The samples' figures: when every killed node was seen lost, the most GPUs the report ever counted on a lost
    node, Volcano's excess over what Ready nodes' pods hold (its peak while nodes were lost, and its worst after
    `settled_after_s`: by then the dead nodes' pods are deleted for good; beside its worst before the kill, Volcano's
    own lag), and pods left on lost nodes then."""
    killed_set = set(killed)
    lost_seen = first_at(samples, lambda s: killed_set <= set(s.lost))
    before = [s for s in samples if s.at_s < 0]
    while_lost = [s for s in samples if s.lost]
    settled = [s for s in while_lost if s.at_s >= settled_after_s]
    return {
        "not_ready_s": lost_seen,
        "report_gpus_on_lost_max": max((s.report_gpus_on_lost for s in while_lost), default=0.0),
        "volcano_excess_before_max": max((s.volcano_excess for s in before), default=None),
        "volcano_excess_peak": max((s.volcano_excess for s in while_lost), default=0.0),
        "volcano_excess_settled_max": max((s.volcano_excess for s in settled), default=None),
        "pods_on_lost_settled_max": max((s.pods_on_lost for s in settled), default=None),
        "samples_while_lost": len(while_lost), "samples_settled": len(settled),
    }
