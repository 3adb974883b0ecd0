"""A generated platform at scale: the local stack grown to N tenants on a cluster of M nodes (bench/scale.py).

Pure: the reviewed `local` stack document in, a bigger one out. Every tenant looks like the ones a platform
team writes by hand (a namespace, a queue with a weight and a capability, quotas with GPUs, two groups, a
default priority class of its own and a shared high one), so the Pulumi program does per tenant at scale
what it does for two.
"""

from __future__ import annotations

import copy

from trainyard import k8s as K
from trainyard.cluster.spec import ClusterSpec, rack_name, spine_name, spine_of_rack
from trainyard.platform.stack_config import NAMESPACE

WEIGHTS = (1, 2, 3, 4)
"""Queue weights cycle through these, so shares differ from tenant to tenant."""
CATALOG_VERSIONS = ("1.0.0", "1.2.0")
"""Tenants pin catalog releases alternately: both releases' runtimes are rendered, as on a real platform."""
SHARED_PRIORITY_CLASS = "training-high"


def tenant_name(index: int) -> str:
    return f"tenant-{index:03d}"


def tenant_entry(index: int, capability_gpus: int, gpus_per_node: int, cpu_per_gpu: int, memory_gib_per_gpu: int) -> dict:
    """One tenant as a platform engineer would write it: queue capability and quota sized to `capability_gpus`."""
    name = tenant_name(index)
    cpu, memory = capability_gpus * cpu_per_gpu, f"{capability_gpus * memory_gib_per_gpu}Gi"
    return {
        "name": name, "namespace": name, "catalogVersion": CATALOG_VERSIONS[index % len(CATALOG_VERSIONS)],
        "queue": {"name": name, "weight": WEIGHTS[index % len(WEIGHTS)],
                  "capability": {K.GPU_RESOURCE: capability_gpus, "cpu": cpu, "memory": memory}},
        "defaultPriorityClass": f"{name}-default",
        "priorityClasses": [SHARED_PRIORITY_CLASS],
        "quota": {"cpu": cpu, "memory": memory, "gpu": capability_gpus, "trainJobs": 200},
        "groups": {"admins": [f"{name}-admins"], "users": [f"{name}-users"]},
    }


def scale_stack_document(base: dict, spec: ClusterSpec, tenants: int, capability_share: float = 0.1) -> dict:
    """`base` (the local stack document) for cluster `spec` with `tenants` generated tenants. Each tenant's queue
    may grow to `capability_share` of the cluster's GPUs (rounded to whole nodes): together they oversubscribe
    it, as real platforms do, and the queue weights decide who gets what when it is full."""
    if tenants < 1:
        raise ValueError(f"tenants must be at least 1, not {tenants}")
    document = copy.deepcopy(base)
    config = document.setdefault("config", {})
    cluster = dict(config.get(f"{NAMESPACE}:cluster") or {})
    cluster.update({"nodes": spec.nodes, "gpusPerNode": spec.gpus_per_node, "cpuPerNode": spec.cpu_per_node,
                    "memoryPerNode": f"{spec.memory_gib_per_node}Gi", "gpuProduct": spec.gpu_product})
    config[f"{NAMESPACE}:cluster"] = cluster
    topology = dict(config.get(f"{NAMESPACE}:topology") or {})
    topology["racks"] = [{"name": rack_name(r), "spine": spine_name(spine_of_rack(r, spec))} for r in range(spec.racks)]
    config[f"{NAMESPACE}:topology"] = topology
    total_gpus = spec.nodes * spec.gpus_per_node
    capability = max(spec.gpus_per_node, round(total_gpus * capability_share / spec.gpus_per_node) * spec.gpus_per_node)
    per_gpu_cpu = max(1, spec.cpu_per_node // max(1, spec.gpus_per_node))
    per_gpu_memory = max(1, spec.memory_gib_per_node // max(1, spec.gpus_per_node))
    entries = [tenant_entry(i, capability, spec.gpus_per_node, per_gpu_cpu, per_gpu_memory) for i in range(tenants)]
    config[f"{NAMESPACE}:tenants"] = entries
    shared = [pc for pc in config.get(f"{NAMESPACE}:priorityClasses") or [] if pc.get("name") == SHARED_PRIORITY_CLASS]
    config[f"{NAMESPACE}:priorityClasses"] = shared + [
        {"name": entry["defaultPriorityClass"], "value": 1000, "description": f"{entry['name']} batch training"}
        for entry in entries]
    return document


def with_tenant_weight(document: dict, index: int, weight: int) -> dict:
    """The same stack with one tenant's queue weight changed: the one-tenant change a review lands."""
    changed = copy.deepcopy(document)
    tenants = changed["config"][f"{NAMESPACE}:tenants"]
    if not 0 <= index < len(tenants):
        raise ValueError(f"tenant index {index} out of range (the stack has {len(tenants)} tenants)")
    tenants[index]["queue"]["weight"] = weight
    return changed
