"""Builders for test TrainJobs, runtimes, Namespaces and tenants (plain dicts), in the spirit of upstream's wrappers.

The one place that knows their shapes, for every test suite (bench/ keeps its own: no benchmark imports
tests/). Defaults are the unit tests': a TrainJob as the controller reads it (namespace "ns", a uid) naming
ClusterTrainingRuntime "rt". Suites that talk to a cluster build what a user submits (`new_trainjob`) and the
catalog's torch runtime (`torch_runtime`).
"""

from __future__ import annotations

import copy
import uuid

from trainyard import k8s
from trainyard.platform.stack_config import TenantGroups, TenantQuota, TenantSpec
from trainyard.queues.volcano_queues import QueueSpec

ANCESTOR = k8s.LABEL_ANCESTOR
CLUSTER_RUNTIME = "ClusterTrainingRuntime"
READ_BACK = {"uid": "uid-1", "creationTimestamp": "2025-01-01T00:00:00Z"}
"""What the API server sets on a TrainJob, as the controller sees it."""
TORCH_IMAGE = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
TORCH_COMMAND = ("torchrun", "train.py")
EIGHT_GPUS = {"requests": {k8s.GPU_RESOURCE: "8"}}
"""A `per_node` of trainjob(): eight GPUs requested per node."""


# --------------------------------------------------------------------------- TrainJobs
def trainjob(name="tj", runtime_name="rt", kind=CLUSTER_RUNTIME, *, namespace="ns", stored=True,
             metadata_labels=None, nodes=None, per_node=None, **spec) -> dict:
    """A TrainJob; `spec` goes into its spec as given (its `labels` and `annotations` are the spec's fields).

    `kind=None` leaves runtimeRef.kind to the CRD's default and `namespace=None` to kubectl's; `stored=False`
    leaves out what the API server sets. `nodes` and `per_node` fill spec.trainer (numNodes, resourcesPerNode).
    """
    meta = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if stored:
        meta.update(READ_BACK)
    if metadata_labels:
        meta["labels"] = dict(metadata_labels)
    ref = {"name": runtime_name} if kind is None else {"name": runtime_name, "kind": kind}
    trainer = {}
    if nodes is not None:
        trainer["numNodes"] = nodes
    if per_node is not None:
        trainer["resourcesPerNode"] = copy.deepcopy(per_node)
    return {"apiVersion": k8s.TRAINER_API_VERSION, "kind": "TrainJob", "metadata": meta,
            "spec": {"runtimeRef": ref, **({"trainer": trainer} if trainer else {}), **spec}}


def new_trainjob(name: str, runtime_name: str, kind: str | None = None, *, namespace: str | None = None,
                 **fields) -> dict:
    """A TrainJob as a user submits it: nothing the API server sets, runtimeRef.kind only when given."""
    return trainjob(name, runtime_name, kind, namespace=namespace, stored=False, **fields)


# --------------------------------------------------------------------------- runtimes
def node_container(image="img", command=None, gpus=None) -> dict:
    """The trainer's container "node": `command` and a limit of `gpus` when given."""
    container = {"name": "node", "image": image}
    if command is not None:
        container["command"] = list(command)
    if gpus is not None:
        container["resources"] = {"limits": {k8s.GPU_RESOURCE: str(gpus)}}
    return container


def job(name, ancestor=None, containers=None, init_containers=None, **pod):
    """A replicated job; `pod` goes into its pod spec after the containers."""
    meta = {"labels": {ANCESTOR: ancestor}} if ancestor else {}
    spec = {"containers": containers if containers is not None else [node_container()]}
    if init_containers:
        spec["initContainers"] = init_containers
    spec.update(pod)
    return {"name": name, "template": {"metadata": meta, "spec": {"template": {"spec": spec}}}}


def runtime(jobs=None, ml=None, pod_group=None, kind=CLUSTER_RUNTIME, name="rt", annotations=None, labels=None, *,
            namespace="ns", image="img", command=None, gpus=None, scheduler=None, **jobset_spec):
    """A ClusterTrainingRuntime, or a TrainingRuntime in `namespace`; `annotations` are its JobSet template's.

    Without `jobs`, one trainer job "node" of `node_container(image, command, gpus)`, scheduled by `scheduler`.
    """
    if jobs is None:
        jobs = [job("node", "trainer", [node_container(image, command, gpus)],
                    **({"schedulerName": scheduler} if scheduler else {}))]
    spec = {"template": {"spec": {"replicatedJobs": jobs, **jobset_spec}}}
    if annotations:
        spec["template"]["metadata"] = {"annotations": annotations}
    if ml is not None:
        spec["mlPolicy"] = ml
    if pod_group is not None:
        spec["podGroupPolicy"] = pod_group
    meta = {"name": name}
    if kind == "TrainingRuntime" and namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return {"apiVersion": k8s.TRAINER_API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def torch_runtime(name: str, *, gpus: int | None = None, queue: str | None = None, volcano: bool = True,
                  image: str = TORCH_IMAGE, command=TORCH_COMMAND) -> dict:
    """The catalog's torch ClusterTrainingRuntime, a Volcano gang (in Volcano queue `queue` when given);
    `volcano=False` is upstream's torch-distributed shape: no podGroupPolicy, no schedulerName."""
    return runtime(name=name, ml={"numNodes": 1, "torch": {}}, pod_group={"volcano": {}} if volcano else None,
                   annotations={k8s.VOLCANO_QUEUE_ANNOTATION: queue} if queue else None,
                   labels={k8s.LABEL_FRAMEWORK: "torch"}, image=image, command=command, gpus=gpus,
                   scheduler=k8s.VOLCANO_SCHEDULER_NAME if volcano else None)


# --------------------------------------------------------------------------- tenants
def tenant_namespace(name="ns", queue=None, granted=None, default=None, annotations=None) -> dict:
    """A tenant's Namespace as the controller reads it: its queue label, granted and default priority classes.

    The annotations are there when any is given (`annotations={}`: there, empty)."""
    grants = dict(annotations or {})
    if granted is not None:
        grants[k8s.NAMESPACE_PRIORITY_CLASSES_ANNOTATION] = granted
    if default is not None:
        grants[k8s.NAMESPACE_DEFAULT_PRIORITY_CLASS_ANNOTATION] = default
    meta = {"name": name, "labels": {k8s.NAMESPACE_QUEUE_LABEL: queue} if queue else {}}
    if annotations is not None or grants:
        meta["annotations"] = grants
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def tenant_spec(gpus: int = 16, train_jobs: int = 50, priority_classes: tuple[str, ...] = (),
                default_priority_class: str | None = None, queue_gpus: int | None = None) -> TenantSpec:
    """A tenant of its own (fresh name), with `gpus` of quota and, unless `queue_gpus` says otherwise, of queue."""
    name = f"tn-{uuid.uuid4().hex[:6]}"
    capability = {"nvidia.com/gpu": gpus if queue_gpus is None else queue_gpus, "cpu": 192, "memory": "2048Gi"}
    return TenantSpec(name=name, namespace=name, catalog_version="1.2.0",
                      queue=QueueSpec(name=name, capability=capability),
                      quota=TenantQuota(cpu=192, memory="2048Gi", gpu=gpus, train_jobs=train_jobs),
                      default_priority_class=default_priority_class, priority_classes=priority_classes,
                      groups=TenantGroups(admins=(f"{name}-admins",), users=(f"{name}-users",)))
