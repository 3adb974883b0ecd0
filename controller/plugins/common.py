"""Bits several ML plugins share."""

from __future__ import annotations

from .. import constants as C
from trainyard import k8s as K
from .. import dra, k8s
from ..info import RuntimeInfo
from ..resources import gpu_count


def set_trainer_count_from_num_nodes(info: RuntimeInfo) -> None:
    """`spec.trainer.numNodes` sets the trainer pod set count (0 allowed, as in JobSet)."""
    num_nodes = (info.trainer or {}).get("numNodes")
    pod_set = info.pod_set_by_ancestor(C.ANCESTOR_TRAINER)
    if pod_set is not None and num_nodes is not None:
        pod_set.count = num_nodes


def trainer_count(info: RuntimeInfo) -> int:
    pod_set = info.pod_set_by_ancestor(C.ANCESTOR_TRAINER)
    return pod_set.count if pod_set is not None else 1


def runtime_node_resources(info: RuntimeInfo) -> dict | None:
    """Resources of container `node` in the first job named `node` or labelled trainer."""
    for job in k8s.replicated_jobs(info.spec):
        if job.get("name") == C.NODE or K.ancestor_of(job) == C.ANCESTOR_TRAINER:
            for container in K.job_containers(job):
                if container.get("name") == C.NODE and container.get("resources") is not None:
                    return container["resources"]
    return None


def resources_per_node(info: RuntimeInfo) -> dict:
    """trainer.resourcesPerNode when set, even to {} (upstream tests the pointer; NOT the merged result),
    else the runtime's."""
    trainer = info.trainer or {}
    if trainer.get("resourcesPerNode") is not None:
        return trainer["resourcesPerNode"]
    return runtime_node_resources(info) or {}


def node_gpus(info: RuntimeInfo) -> int:
    """GPUs per node: those of `resources_per_node`, else the GPU devices of the TrainJob's
    `resourceClaimsPerNode` templates (among the objects the build was given; `dra.py`)."""
    gpus = gpu_count(resources_per_node(info))
    if gpus or not dra.claims_of(info.trainjob):
        return gpus
    return dra.gpus_per_node(info.trainjob, info.existing)


def master_host(info: RuntimeInfo) -> str:
    """Upstream hard-codes job `node` and the TrainJob name as subdomain."""
    return f"{info.name}-{C.NODE}-0-0.{info.name}"


def upsert_trainer_env(info: RuntimeInfo) -> dict | None:
    """Trainer env into `node` of the trainer job (only when spec.trainer is set); returns the container."""
    if info.trainer is None:
        return None
    container = info.trainer_node_container()
    if container is not None:
        k8s.upsert_env(container, info.trainer.get("env") or [])
    return container


def node_container_with_num_nodes(info: RuntimeInfo) -> dict | None:
    """Apply spec.trainer.numNodes, then the trainer job's `node` container (None: nothing to inject)."""
    set_trainer_count_from_num_nodes(info)
    if info.trainer is None:
        return None
    return info.trainer_node_container()
