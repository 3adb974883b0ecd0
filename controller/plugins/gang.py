"""What the two gang-scheduling plugins (`coscheduling`, `volcano`) share: size and shape of a PodGroup.

A PodGroup is named after the TrainJob; minMember = pods of ALL replicated jobs (initializers included;
one Job per replicated job, as upstream), minResources = sum of pod requests x count; except, in a tenant
namespace, the replicated jobs that finish before the others start (`info.staged_jobs`, see `tenancy.py`).
No schedulerName is set: the runtime's pod template must carry it.
"""

from __future__ import annotations

from fractions import Fraction
from trainyard import k8s as K

from .. import k8s
from ..info import RuntimeInfo
from ..resources import binary_resources, format_resource_list, pod_requests
from .framework import ObjectRef


def gang_size(info: RuntimeInfo) -> tuple[int, dict[str, str]]:
    members = 0
    totals: dict[str, Fraction] = {}
    binary: set[str] = set()
    for pod_set, job in zip(info.pod_sets, k8s.replicated_jobs(info.spec)):
        if pod_set.name in info.staged_jobs:
            continue
        members += pod_set.count
        pod = k8s.pod_spec(job)
        binary |= binary_resources(pod)
        for name, quantity in pod_requests(pod).items():
            totals[name] = totals.get(name, Fraction(0)) + quantity * pod_set.count
    return members, format_resource_list(totals, binary)


def may_apply(info: RuntimeInfo, api_version: str) -> bool:
    """An existing PodGroup is only re-applied while the TrainJob is suspended."""
    exists = k8s.find_object(info.existing, "PodGroup", info.name, k8s.namespace_of(info.trainjob),
                             api_group=api_version.rpartition("/")[0])
    return exists is None or bool(info.trainjob["spec"].get("suspend"))


def pod_group(info: RuntimeInfo, api_version: str, spec: dict) -> dict:
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": k8s.object_meta(info.name, info.trainjob),
            "spec": spec}


def pod_group_policy(runtime: dict) -> dict:
    """`spec.podGroupPolicy` of a raw runtime document ({} when absent or malformed)."""
    return K.mapping(K.mapping(K.mapping(runtime).get("spec")).get("podGroupPolicy"))


def owned_pod_group(trainjob: dict, runtime: dict, policy: str, api_version: str) -> list[ObjectRef]:
    if policy not in pod_group_policy(runtime):
        return []
    return [ObjectRef(api_version, "PodGroup", k8s.name_of(trainjob))]
