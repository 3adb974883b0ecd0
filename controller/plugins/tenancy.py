"""Tenant defaults in the build (trainyard's platform layer, see `controller/tenant_namespace.py`).

The priority class is set while enforcing the pod-group policy, before any PodGroup is built, so the
Volcano PodGroup takes its priorityClassName from the pod templates as upstream does; the default queue
is filled while building, after the `volcano` plugin (registered before this one), and only where no
annotation named a queue. Both read the TrainJob's Namespace from `info.existing` (absent: nothing changes,
except that the TrainJob's own `trainyard.dev/priority-class` label still applies).

Staged runtimes: upstream's gang counts every replicated job, also those another one waits for with `dependsOn`
status Complete (the dataset and model initializers). JobSet creates the waiting jobs only after those finish,
and Volcano runs no member before minMember pods exist, so such a TrainJob never starts (upstream v2.3 too,
whenever a runtime has both; in a tenant namespace every runtime is a Volcano gang). There the staged jobs are
left out of the gang: not counted in minMember/minResources, no group name; their pods carry the tenant's queue,
so Volcano gives each its own one-pod group in that queue, and the gang is exactly the pods that run together.

Admission: in a tenant namespace the JobSet stays suspended until Volcano's enqueue action admits the PodGroup
(`tenant_namespace.gang_admitted`), so no pod exists, and counts against the namespace's ResourceQuota, before
the whole gang has room in the queue.
"""

from __future__ import annotations

from trainyard import k8s as K
from .. import k8s
from ..info import RuntimeInfo
from ..tenant_namespace import gang_admitted, namespace_policy, selected_priority_class
from .framework import Context


def enforce_pod_group_policy(info: RuntimeInfo, ctx: Context) -> None:
    """The selected class (or a budget's demotion) replaces every pod template's; otherwise the namespace default
    fills the gaps.
    In a tenant namespace every pod is Volcano's (the gang's members, GPU or not, must all be in its cache)."""
    policy = namespace_policy(info.trainjob, info.existing)
    selected = policy.demoted_class(info.trainjob) or selected_priority_class(info.trainjob)
    default = policy.default_priority_class
    for job in k8s.replicated_jobs(info.spec):
        pod = k8s.pod_spec(job)
        if policy.queue is not None:
            pod["schedulerName"] = K.VOLCANO_SCHEDULER_NAME
        if selected is not None:
            pod["priorityClassName"] = selected
            pod.pop("priority", None)  # the Priority admission plugin resolves it from the class
        elif default is not None and not pod.get("priorityClassName"):
            pod["priorityClassName"] = default
    if policy.queue is not None and "volcano" in (info.pod_group_policy or {}):
        info.staged_jobs = staged_jobs(info.spec)
        info.staged_pod_annotations = {K.VOLCANO_QUEUE_ANNOTATION: policy.queue}


def staged_jobs(jobset_spec: dict) -> frozenset[str]:
    """Replicated jobs that another one waits for with `dependsOn` status Complete: they finish before it starts."""
    return frozenset(str(dependency.get("name")) for job in k8s.replicated_jobs(jobset_spec)
                     for dependency in job.get("dependsOn") or []
                     if isinstance(dependency, dict) and dependency.get("status") == "Complete")


def build(info: RuntimeInfo, ctx: Context) -> None:
    """A Volcano PodGroup whose runtime and TrainJob name no queue gets the namespace's queue, and the JobSet
    waits suspended until Volcano admits the gang (`tenant_namespace.gang_admitted`)."""
    queue = namespace_policy(info.trainjob, info.existing).queue
    if queue is None:
        return
    for group in info.pod_groups:
        if group["apiVersion"] == K.VOLCANO_API_VERSION and "queue" not in group["spec"]:
            group["spec"]["queue"] = queue
    if "volcano" in (info.pod_group_policy or {}):
        existing = k8s.find_object(info.existing, "PodGroup", info.name, k8s.namespace_of(info.trainjob),
                                   api_group=K.VOLCANO_API_VERSION.rpartition("/")[0])
        info.awaiting_admission = not gang_admitted(existing)
