"""What a lost node means for the TrainJobs that ran on it (pure; the controller's loop is `node_loss_watcher`).

A node is lost when its Ready condition turns False or Unknown (`cluster_state.node_lost`). Its pods' objects
still say Running, then Terminating once evicted, until the node returns or is removed; their processes are gone
with the machine. Kubernetes and JobSet decide what follows: the node controller evicts the pods after their
toleration of an unreachable node, a trainer's peers fail as soon as their collective breaks, the Job fails, and
JobSet's failure policy restarts the whole gang while restarts remain, or fails the JobSet (and so the TrainJob).
The platform says so on the TrainJob, once per node loss, and counts nothing those pods hold (fit, report, usage).

One thing would hold the gang forever: an evicted pod stays Terminating until its kubelet confirms it stopped,
which a dead node never does, and JobSet deletes a failed gang's Jobs in the foreground, so it cannot recreate them
while such a pod exists. So the platform deletes an evicted pod of a lost node for good once its grace period has
passed by `release_after_s` (what Kubernetes' out-of-service taint would have an operator do); a node that comes
back kills what is left of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from trainyard.controller.pod_refusals import owning_trainjob
from trainyard.scheduling.cluster_state import node_lost, ready_condition
from trainyard.timestamps import parse_time

REASON = "NodeLost"
RELEASED_REASON = "NodeLostPodsDeleted"


@dataclass(frozen=True)
class LostNode:
    name: str
    status: str  # the Ready condition's status: False or Unknown
    since: str  # when it turned (RFC 3339)
    why: str  # its reason and message, as the node controller or kubelet wrote them


def lost_node(node: dict) -> LostNode | None:
    if not node_lost(node):
        return None
    ready = ready_condition(node) or {}
    why = " ".join(part for part in (ready.get("reason"), ready.get("message")) if part)
    return LostNode(node["metadata"]["name"], str(ready.get("status")), str(ready.get("lastTransitionTime") or ""),
                    why)


def stranded(pods: Iterable[dict], trainjob_names: dict[str, list[str]]) -> dict[tuple[str, str], list[dict]]:
    """(namespace, TrainJob) -> its pods among `pods` (those of the lost nodes): a pod's controller owner is a Job
    named "<JobSet>-<replicated job>-<index>", and a TrainJob's JobSet carries its name. Finished pods lost
    nothing."""
    out: dict[tuple[str, str], list[dict]] = {}
    for pod in pods:
        meta = pod["metadata"]
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        name = owning_trainjob(pod, trainjob_names.get(meta["namespace"], []))
        if name:
            out.setdefault((meta["namespace"], name), []).append(pod)
    return out


def failure_budget(jobset: dict | None) -> str:
    """What JobSet's failure policy leaves for this TrainJob, in words."""
    if not jobset:
        return "its JobSet is gone"
    limit = int(((jobset.get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts") or 0)
    used = int((jobset.get("status") or {}).get("restarts") or 0)
    if limit == 0:
        return "its JobSet's failure policy allows no restart: when a pod of it fails, the TrainJob fails"
    left = max(0, limit - used)
    return (f"its JobSet's failure policy restarts the whole gang when a pod of it fails ({used} of {limit} restarts "
            f"used, {left} left)" + ("; the next failure fails the TrainJob" if left == 0 else ""))


def message(node: LostNode, pods: list[dict], jobset: dict | None) -> str:
    names = ", ".join(sorted(p["metadata"]["name"] for p in pods))
    return (f"node {node.name} is lost (Ready {node.status} since {node.since}{': ' + node.why if node.why else ''}); "
            f"pod(s) {names} of this TrainJob ran there and their GPUs are no longer counted as used. "
            f"Kubernetes evicts them after their toleration of an unreachable node and {failure_budget(jobset)}.")


def due_for_release(pod: dict, now_s: float, after_s: float) -> bool:
    """An evicted pod whose grace period (its deletionTimestamp) ended `after_s` ago or more."""
    deleting = pod["metadata"].get("deletionTimestamp")
    return bool(deleting) and now_s >= parse_time(deleting).timestamp() + after_s


def released_message(node: LostNode, pods: list[dict]) -> str:
    names = ", ".join(sorted(p["metadata"]["name"] for p in pods))
    return (f"pod(s) {names} evicted from lost node {node.name} deleted for good (the node cannot confirm they "
            "stopped): JobSet can now recreate the gang as its failure policy says; if the node comes back, its "
            "kubelet kills what is left of them.")


def event_name(trainjob: str, uid: str, node: LostNode) -> str:
    """One Event per TrainJob and loss of a node (a node lost again later is a new loss)."""
    since = int(parse_time(node.since).timestamp()) if node.since else 0
    return f"{trainjob}.nodelost.{uid[:8]}.{node.name}.{since}"[:253]
