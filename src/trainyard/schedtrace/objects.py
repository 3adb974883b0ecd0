"""The Kubernetes objects a replay creates, as plain dicts (pure).

Tenants, queues, HyperNodes and the scheduler configuration come from the platform's own renderers, so
the benchmark measures what trainyard generates. Jobs go either the real path (a TrainJob on a catalog-
style ClusterTrainingRuntime; trainyard's controller builds the JobSet and PodGroup) or, `direct`, as a
PodGroup plus bare pods, which isolates the scheduler. The kube-scheduler baseline uses the same two
paths without a gang: a runtime with no podGroupPolicy, or bare pods with the default scheduler.
"""

from __future__ import annotations

from trainyard import k8s as K
from trainyard.platform import tenant_objects
from trainyard.platform.stack_config import PolicySpec, TenantGroups, TenantQuota, TenantSpec
from trainyard.queues.hypernodes import TopologySpec, racks_from_node_labels, render_hypernodes
from trainyard.queues.volcano_queues import QueueSpec
from trainyard.scheduling.trace import Tenant, TraceJob

VOLCANO_SCHEDULER = "volcano"
KUBE_SCHEDULER = "kube-scheduler"
"""The baseline's name in profiles: the default scheduler, no gang, no queues."""
RUNTIME_PREFIX = "trace"
PATCH_MANAGER = f"{K.TRAINYARD_DOMAIN}/trace-bench"
CONTAINER = "node"


def weighted_deserved(tenants: tuple[Tenant, ...], capacity_gpus: int) -> dict[str, int]:
    """Each tenant's weight share of the cluster's GPUs, whole GPUs summing to the capacity (largest
    remainders first): the `deserved` the `capacity` queue plugin orders and reclaims by."""
    total = sum(t.weight for t in tenants)
    exact = {t.name: capacity_gpus * t.weight / total for t in tenants}
    out = {name: int(value) for name, value in exact.items()}
    by_remainder = sorted(exact, key=lambda name: (out[name] - exact[name], name))
    for name in by_remainder[:capacity_gpus - sum(out.values())]:
        out[name] += 1
    return out


def tenant_spec(tenant: Tenant, capacity_gpus: int, deserved_gpus: int | None = None) -> TenantSpec:
    """A stack-like tenant: its own namespace and queue (weight from the trace; capability = the cluster,
    so only the weights divide it; `deserved_gpus` for the `capacity` plugin, which ignores weights)."""
    deserved = {} if deserved_gpus is None else {K.GPU_RESOURCE: deserved_gpus}
    return TenantSpec(name=tenant.name, namespace=tenant.name, catalog_version="1.2.0",
                      queue=QueueSpec(name=tenant.name, weight=tenant.weight, deserved=deserved,
                                      capability={K.GPU_RESOURCE: capacity_gpus}),
                      quota=TenantQuota(cpu=10000, memory="100Ti", gpu=capacity_gpus, train_jobs=10000),
                      groups=TenantGroups.defaults_for(tenant.name))


def tenant_objects_for(tenants: tuple[Tenant, ...], capacity_gpus: int) -> list[dict]:
    """Namespace (with its queue label, read by the controller) and Volcano Queue of each tenant."""
    out = []
    for tenant in tenants:
        spec = tenant_spec(tenant, capacity_gpus)
        out += [tenant_objects.render_namespace(spec, PolicySpec()), tenant_objects.render_tenant_queue(spec)]
    return out


def tenant_queues_for(tenants: tuple[Tenant, ...], capacity_gpus: int, queue_plugin: str) -> list[dict]:
    """The tenants' Volcano Queues for a queue plugin: `capacity` gets each queue's weighted deserved."""
    deserved = weighted_deserved(tenants, capacity_gpus) if queue_plugin == "capacity" else {}
    return [tenant_objects.render_tenant_queue(tenant_spec(t, capacity_gpus, deserved.get(t.name)))
            for t in tenants]


def hypernodes_for(nodes: list[dict]) -> list[dict]:
    """Rack (tier 1) and spine (tier 2) HyperNodes from the nodes' topology labels."""
    return render_hypernodes(TopologySpec(racks=racks_from_node_labels(nodes, K.RACK_LABEL, K.SPINE_LABEL)))


def runtime_name(tier: int | None, gang: bool) -> str:
    if not gang:
        return f"{RUNTIME_PREFIX}-plain"
    return f"{RUNTIME_PREFIX}-tier{tier}" if tier else f"{RUNTIME_PREFIX}-any"


def runtime(tier: int | None, gang: bool) -> dict:
    """A ClusterTrainingRuntime like the catalog's torch-distributed-volcano; `gang=False`: no PodGroup and
    the default scheduler (the kube-scheduler baseline)."""
    pod_spec: dict = {"containers": [{"name": CONTAINER, "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                                      "command": ["torchrun", "train.py"],
                                      "resources": {"limits": {K.GPU_RESOURCE: "8"}}}]}
    spec: dict = {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [{
        "name": CONTAINER,
        "template": {"metadata": {"labels": {K.LABEL_ANCESTOR: "trainer"}},
                     "spec": {"template": {"spec": pod_spec}}}}]}}}
    if gang:
        pod_spec["schedulerName"] = VOLCANO_SCHEDULER
        volcano = {"networkTopology": {"mode": "hard", "highestTierAllowed": tier}} if tier else {}
        spec["podGroupPolicy"] = {"volcano": volcano}
    return {"apiVersion": K.TRAINER_API_VERSION, "kind": "ClusterTrainingRuntime",
            "metadata": {"name": runtime_name(tier, gang), "labels": {K.LABEL_FRAMEWORK: "torch"}}, "spec": spec}


def runtimes(gang: bool) -> list[dict]:
    tiers = (None, 1, 2) if gang else (None,)
    return [runtime(tier, gang) for tier in tiers]


def pod_metadata(job: TraceJob) -> dict:
    """What every pod of a trace job carries: its job and tenant, and how long kwok lets it run."""
    return {"labels": {K.TRACE_JOB_LABEL: job.name, K.TRACE_TENANT_LABEL: job.tenant},
            "annotations": {K.KWOK_POD_COMPLETE_DELAY_ANNOTATION: f"{job.duration:g}s"}}


def trainjob(job: TraceJob, gang: bool) -> dict:
    """The job as a data scientist submits it: nodes and GPUs per node; the runtime patch only stamps the
    pods with the trace's bookkeeping (the delay kwok reads)."""
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": CONTAINER, "template": {"spec": {"template": {"metadata": pod_metadata(job)}}}}]}}}}
    return {"apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob",
            "metadata": {"name": job.name, "namespace": job.tenant, "labels": {K.TRACE_JOB_LABEL: job.name}},
            "spec": {"runtimeRef": {"name": runtime_name(job.tier, gang)},
                     "trainer": {"numNodes": job.pods,
                                 # both, as a user must: a runtime's GPU request (the catalog's is 1) is kept
                                 # by the merge, and a GPU request that differs from its limit is invalid
                                 "resourcesPerNode": {"limits": {K.GPU_RESOURCE: str(job.gpus_per_pod)},
                                                      "requests": {K.GPU_RESOURCE: str(job.gpus_per_pod)}}},
                     "runtimePatches": [patch]}}


def pod_group(job: TraceJob) -> dict:
    """The PodGroup trainyard's controller would build for the job (minMember = all pods, minResources)."""
    spec: dict = {"minMember": job.pods, "minResources": {K.GPU_RESOURCE: str(job.gpus)}, "queue": job.tenant}
    if job.tier:
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": job.tier}
    return {"apiVersion": K.VOLCANO_API_VERSION, "kind": "PodGroup",
            "metadata": {"name": job.name, "namespace": job.tenant}, "spec": spec}


def bare_pods(job: TraceJob, gang: bool) -> list[dict]:
    """The job's pods without a controller: in the job's PodGroup for Volcano, else for kube-scheduler."""
    out = []
    for index in range(job.pods):
        metadata = pod_metadata(job)
        metadata.update(name=f"{job.name}-{index}", namespace=job.tenant)
        spec: dict = {"restartPolicy": "Never", "containers": [{
            "name": CONTAINER, "image": "trace", "resources": {
                "limits": {K.GPU_RESOURCE: str(job.gpus_per_pod)}, "requests": {K.GPU_RESOURCE: str(job.gpus_per_pod)}}}]}
        if gang:
            metadata["annotations"][K.VOLCANO_GROUP_ANNOTATION] = job.name
            spec["schedulerName"] = VOLCANO_SCHEDULER
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    return out


def submissions(job: TraceJob, gang: bool, direct: bool) -> list[dict]:
    """What to create, in order, when the job arrives."""
    if not direct:
        return [trainjob(job, gang)]
    return ([pod_group(job)] if gang else []) + bare_pods(job, gang)
