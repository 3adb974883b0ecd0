"""Gang scheduling: coscheduling (scheduler-plugins) and Volcano PodGroups.

Both: PodGroup named after the TrainJob, minMember = pods of ALL replicated jobs (initializers
included; one Job per replicated job, as upstream), minResources = sum of pod requests x count.
Coscheduling marks pods with the label `scheduling.x-k8s.io/pod-group`; Volcano with the annotation
`scheduling.k8s.io/group-name` (trainyard also puts it on the Job template so the Job-level object
names its group). No schedulerName is set: the runtime's pod template must carry it.
"""

from __future__ import annotations

from fractions import Fraction

from .. import constants as C
from .. import k8s
from ..info import RuntimeInfo
from ..resources import binary_resources, format_resource_list, pod_requests


def enforce(info: RuntimeInfo) -> None:
    policy = info.pod_group_policy or {}
    if "coscheduling" in policy:
        info.pod_labels[C.COSCHEDULING_POD_GROUP_LABEL] = info.name
    if "volcano" in policy:
        info.pod_annotations[C.VOLCANO_GROUP_ANNOTATION] = info.name
        info.job_annotations[C.VOLCANO_GROUP_ANNOTATION] = info.name


def _gang_size(info: RuntimeInfo) -> tuple[int, dict[str, str]]:
    members, totals, binary = 0, {}, set()
    for pod_set, job in zip(info.pod_sets, k8s.replicated_jobs(info.spec)):
        members += pod_set.count
        pod = k8s.pod_spec(job)
        binary |= binary_resources(pod)
        for name, quantity in pod_requests(pod).items():
            totals[name] = totals.get(name, Fraction(0)) + quantity * pod_set.count
    return members, format_resource_list(totals, binary)


def _may_apply(info: RuntimeInfo, api_version: str) -> bool:
    """An existing PodGroup is only re-applied while the TrainJob is suspended."""
    exists = k8s.find_object(info.existing, "PodGroup", info.name, k8s.namespace_of(info.trainjob),
                             api_group=api_version.rpartition("/")[0])
    return exists is None or bool(info.trainjob["spec"].get("suspend"))


def build(info: RuntimeInfo) -> None:
    policy = info.pod_group_policy or {}
    if "coscheduling" in policy and _may_apply(info, C.COSCHEDULING_PODGROUP_API_VERSION):
        members, resources = _gang_size(info)
        spec = {"minMember": members, "minResources": resources,
                "scheduleTimeoutSeconds": (policy["coscheduling"] or {}).get("scheduleTimeoutSeconds", 60)}
        info.pod_groups.append(_pod_group(info, C.COSCHEDULING_PODGROUP_API_VERSION, spec))
    if "volcano" in policy and _may_apply(info, C.VOLCANO_PODGROUP_API_VERSION):
        members, resources = _gang_size(info)
        spec = {"minMember": members, "minResources": resources}
        queue = info.annotations.get(C.VOLCANO_QUEUE_ANNOTATION)
        if queue is not None:
            spec["queue"] = queue
        priority = None
        for job in k8s.replicated_jobs(info.spec):  # the LAST job setting one wins (upstream #4084)
            priority = k8s.pod_spec(job).get("priorityClassName", priority)
        if priority is not None:
            spec["priorityClassName"] = priority
        topology = (policy["volcano"] or {}).get("networkTopology")
        if topology is not None:
            spec["networkTopology"] = {"mode": topology.get("mode", "hard"),
                                       "highestTierAllowed": topology.get("highestTierAllowed", 1)}
        info.pod_groups.append(_pod_group(info, C.VOLCANO_PODGROUP_API_VERSION, spec))


def _pod_group(info: RuntimeInfo, api_version: str, spec: dict) -> dict:
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": k8s.object_meta(info.name, info.trainjob),
            "spec": spec}
