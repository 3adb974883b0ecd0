"""JobSet plugin: endpoints/parallelism, initializer and trainer overrides, and the complete JobSet.

Registered last: its build reads the pod templates every other plugin has finished with.

The JobSet is written COMPLETE: everything JobSet's defaulting webhook (v0.12.0) and CRD defaults would
add is filled in here, so what we apply is what the API server stores (server-side apply stays
conflict-free and `render` shows the real object).
"""

from __future__ import annotations

from trainyard import k8s as K
from .. import constants as C
from .. import k8s
from ..api_jobset import MAX_NUM_NODES
from ..errors import ValidationError
from ..info import RuntimeInfo
from ..resources import mirror_extended_limits
from .framework import Context, ObjectRef



def subdomain(info: RuntimeInfo) -> str:
    return (info.spec.get("network") or {}).get("subdomain") or info.name


def endpoints(info: RuntimeInfo) -> dict[str, list[str]]:
    """`<trainjob>-<job>-<replica>-<pod>.<subdomain>` for every pod, per replicated job."""
    out = {}
    for pod_set, job in zip(info.pod_sets, k8s.replicated_jobs(info.spec)):
        replicas = job.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or not 0 <= replicas <= MAX_NUM_NODES:
            raise ValidationError(f"must be an integer from 0 to {MAX_NUM_NODES} (a hostname is built per pod); "
                                  "fix the runtime", f"spec.template.spec.replicatedJobs[{job.get('name')}].replicas")
        out[pod_set.name] = [f"{info.name}-{pod_set.name}-{r}-{p}.{subdomain(info)}"
                             for r in range(job.get("replicas", 1)) for p in range(pod_set.count)]
    return out


def sync_parallelism(info: RuntimeInfo) -> None:
    for pod_set, job in zip(info.pod_sets, k8s.replicated_jobs(info.spec)):
        spec = k8s.job_spec(job)
        spec["parallelism"] = spec["completions"] = pod_set.count


def pre_build(info: RuntimeInfo, ctx: Context) -> None:
    """Pod counts are final: record every pod's hostname and size each Job to its pod set."""
    ctx.endpoints = endpoints(info)
    sync_parallelism(info)


def apply_initializers(info: RuntimeInfo) -> None:
    initializer = info.trainjob["spec"].get("initializer") or {}
    for ancestor, key in ((C.DATASET_INITIALIZER, "dataset"), (C.MODEL_INITIALIZER, "model")):
        for job in k8s.replicated_jobs(info.spec):
            if K.ancestor_of(job) != ancestor:
                continue
            job["replicas"] = 1
            source = initializer.get(key)
            container = k8s.find_container(job, ancestor)
            if source is None or container is None:
                continue
            if source.get("storageUri") is not None:
                k8s.upsert_env(container, [k8s.env_value(C.ENV_STORAGE_URI, source["storageUri"])])
            k8s.upsert_env(container, source.get("env") or [])
            if source.get("secretRef"):
                container.setdefault("envFrom", []).append({"secretRef": {"name": source["secretRef"].get("name", "")}})


def apply_trainer(info: RuntimeInfo) -> None:
    """spec.trainer onto the trainer job's `node` container. For an MPI runtime the image also goes to the worker
    job `node` (Kubeflow Trainer v2.4, kubeflow/trainer#4301: launcher and workers must run the same MPI build);
    command and args stay the launcher's (the workers run sshd)."""
    trainer = info.trainer
    mpi = (info.ml_policy or {}).get("mpi")
    launcher_as_node = bool((mpi or {}).get("runLauncherAsNode"))
    for job in k8s.replicated_jobs(info.spec):
        is_trainer = K.ancestor_of(job) == C.ANCESTOR_TRAINER
        if is_trainer:
            job["replicas"] = 1
        container = k8s.find_container(job, C.NODE)
        if trainer is None or container is None:
            continue
        if is_trainer:
            for field in ("image", "command", "args"):
                if trainer.get(field) is not None:
                    container[field] = trainer[field]
        elif mpi is not None and job.get("name") == C.NODE and trainer.get("image") is not None:
            container["image"] = trainer["image"]
        if is_trainer or (launcher_as_node and job.get("name") == C.NODE):
            k8s.upsert_env(container, trainer.get("env") or [])


def apply_scheduler_metadata(info: RuntimeInfo) -> None:
    """The gang's labels and annotations on every Job and pod template; a staged job's (outside the gang, see
    `tenancy.py`) without the group name, with `info.staged_pod_annotations` instead."""
    for job in k8s.replicated_jobs(info.spec):
        job_annotations, pod_annotations = info.job_annotations, info.pod_annotations
        if job.get("name") in info.staged_jobs:
            job_annotations = {k: v for k, v in job_annotations.items() if k != K.VOLCANO_GROUP_ANNOTATION}
            pod_annotations = {**{k: v for k, v in pod_annotations.items() if k != K.VOLCANO_GROUP_ANNOTATION},
                               **info.staged_pod_annotations}
        if job_annotations:
            job.setdefault("template", {}).setdefault("metadata", {}).setdefault("annotations", {}).update(job_annotations)
        template = k8s.pod_template(job)
        if info.pod_labels:
            template.setdefault("metadata", {}).setdefault("labels", {}).update(info.pod_labels)
        if pod_annotations:
            template.setdefault("metadata", {}).setdefault("annotations", {}).update(pod_annotations)


def apply_webhook_defaults(spec: dict) -> None:
    """What JobSet v0.12.0's defaulting webhook and its CRD defaults add (the differential tests against
    upstream showed that neither sets `network.subdomain` nor a Job template's `backoffLimit`: batch/v1
    defaults that when the Job is created, outside the JobSet)."""
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    if "failurePolicy" in spec:
        spec["failurePolicy"].setdefault("restartStrategy", "Recreate")
        for i, rule in enumerate(spec["failurePolicy"].get("rules") or []):
            rule.setdefault("name", f"failurePolicyRule{i}")
    for policy in spec.get("volumeClaimPolicies") or []:
        policy.setdefault("retentionPolicy", {"whenDeleted": "Delete"})
    for job in k8s.replicated_jobs(spec):
        job.setdefault("groupName", "default")
        job.setdefault("replicas", 1)
        job_spec = k8s.job_spec(job)
        job_spec.setdefault("completionMode", "Indexed")
        k8s.pod_spec(job).setdefault("restartPolicy", "OnFailure")


def build_jobset(info: RuntimeInfo) -> dict:
    apply_initializers(info)
    apply_trainer(info)
    apply_scheduler_metadata(info)
    info.spec["suspend"] = bool(info.trainjob["spec"].get("suspend", False)) or info.awaiting_admission
    mirror_extended_limits(info.spec)
    apply_webhook_defaults(info.spec)
    metadata: dict = {"name": info.name, "namespace": k8s.namespace_of(info.trainjob)}
    if info.labels:
        metadata["labels"] = dict(info.labels)
    if info.annotations:
        metadata["annotations"] = dict(info.annotations)
    metadata["ownerReferences"] = [k8s.owner_reference(info.trainjob)]
    return {"apiVersion": K.JOBSET_API_VERSION, "kind": "JobSet", "metadata": metadata, "spec": info.spec}


def may_apply_jobset(trainjob: dict, existing_jobset: dict | None) -> bool:
    """A JobSet is never updated while running: (re)apply only when absent, or when the TrainJob or the
    JobSet is suspended (resume = the one update)."""
    if existing_jobset is None:
        return True
    return bool((trainjob.get("spec") or {}).get("suspend")) or bool((existing_jobset.get("spec") or {}).get("suspend"))


def build(info: RuntimeInfo, ctx: Context) -> None:
    existing = k8s.find_object(info.existing, "JobSet", info.name, k8s.namespace_of(info.trainjob))
    if may_apply_jobset(info.trainjob, existing):
        info.jobset = build_jobset(info)


def owned_objects(trainjob: dict, runtime: dict) -> list[ObjectRef]:
    return [ObjectRef(K.JOBSET_API_VERSION, "JobSet", k8s.name_of(trainjob))]
