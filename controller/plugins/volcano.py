"""Volcano gang: a `scheduling.volcano.sh` PodGroup with queue, priority class and network topology.

Pods and (trainyard's addition) their Job templates carry the annotation `scheduling.k8s.io/group-name`,
so the Job-level object names its group too.
"""

from __future__ import annotations

from trainyard import k8s as K
from .. import k8s
from ..info import RuntimeInfo
from .framework import Context, ObjectRef
from ..seed_topology import network_topology
from .gang import gang_size, may_apply, owned_pod_group, pod_group


def enforce_pod_group_policy(info: RuntimeInfo, ctx: Context) -> None:
    if "volcano" in (info.pod_group_policy or {}):
        info.pod_annotations[K.VOLCANO_GROUP_ANNOTATION] = info.name
        info.job_annotations[K.VOLCANO_GROUP_ANNOTATION] = info.name


def build(info: RuntimeInfo, ctx: Context) -> None:
    policy = info.pod_group_policy or {}
    if "volcano" not in policy or not may_apply(info, K.VOLCANO_API_VERSION):
        return
    members, resources = gang_size(info)
    spec = {"minMember": members, "minResources": resources}
    queue = info.annotations.get(K.VOLCANO_QUEUE_ANNOTATION)
    if queue is not None:
        spec["queue"] = queue
    priority = None
    for job in k8s.replicated_jobs(info.spec):  # the LAST job setting one wins (upstream #4084)
        priority = k8s.pod_spec(job).get("priorityClassName", priority)
    if priority is not None:
        spec["priorityClassName"] = priority
    topology = (policy["volcano"] or {}).get("networkTopology")
    if topology is not None:
        spec["networkTopology"] = network_topology(topology)  # the seed spelling mapped to upstream's
    info.pod_groups.append(pod_group(info, K.VOLCANO_API_VERSION, spec))


def owned_objects(trainjob: dict, runtime: dict) -> list[ObjectRef]:
    return owned_pod_group(trainjob, runtime, "volcano", K.VOLCANO_API_VERSION)
