"""The runtime info model: one mutable description of what a TrainJob + runtime will become.

`new_runtime_info` resolves, in this order (upstream `newRuntimeInfo` plus the seed-era fields):
runtime template metadata -> TrainJob `spec.labels`/`spec.annotations` (seed era; also written onto every
Job template) -> `podTemplateOverrides` (seed era, SMP on the targeted pod templates, later entries win)
-> `runtimePatches` (metadata merged in list order, spec SMP'd, jobs kept in template order) -> pod sets
(counts) -> `trainer.resourcesPerNode` merged per key into the trainer `node` container -> `trainer.resourceClaimsPerNode`
onto its pods and that container (`dra.py`). In a tenant
namespace (its Namespace among `existing`) the pod-group policy is at least a Volcano gang (`tenant_namespace.py`).
Plugins then mutate the info; component builders turn it into objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainyard.k8s import json_copy
from trainyard import k8s as K
from . import constants as C
from . import dra, k8s
from .errors import BuildError, ValidationError
from .smp import JOBSET_MERGE_KEYS, POD_MERGE_KEYS, strategic_merge
from .tenant_namespace import tenant_pod_group_policy


@dataclass
class PodSet:
    """One replicated job as the plugins see it: how many pods each of its Jobs runs."""

    name: str
    ancestor: str | None
    count: int


@dataclass
class RuntimeInfo:
    trainjob: dict
    runtime: dict
    labels: dict
    annotations: dict
    ml_policy: dict | None
    pod_group_policy: dict | None
    spec: dict
    pod_sets: list[PodSet]
    existing: tuple = ()
    pod_labels: dict = field(default_factory=dict)
    pod_annotations: dict = field(default_factory=dict)
    job_annotations: dict = field(default_factory=dict)
    secrets: list = field(default_factory=list)
    config_maps: list = field(default_factory=list)
    pod_groups: list = field(default_factory=list)
    jobset: dict | None = None  # None: the JobSet is left as it is (running, see jobset.may_apply_jobset)
    mpi_slots: int = 1
    staged_jobs: frozenset = frozenset()  # replicated jobs that finish before the gang starts (not its members)
    staged_pod_annotations: dict = field(default_factory=dict)  # what their pods carry instead of the group's
    awaiting_admission: bool = False  # tenant gang not yet admitted by Volcano: its JobSet stays suspended

    @property
    def name(self) -> str:
        return k8s.name_of(self.trainjob)

    @property
    def trainer(self) -> dict | None:
        return self.trainjob["spec"].get("trainer")

    def pod_set(self, name: str) -> PodSet | None:
        return next((p for p in self.pod_sets if p.name == name), None)

    def pod_set_by_ancestor(self, ancestor: str) -> PodSet | None:
        return next((p for p in self.pod_sets if p.ancestor == ancestor), None)

    def trainer_node_container(self) -> dict | None:
        """Container `node` of the job labelled trainer: the only one TrainJob trainer fields touch."""
        return k8s.find_container(k8s.job_to_edit_by_ancestor(self.spec, C.ANCESTOR_TRAINER), C.NODE)


def new_runtime_info(trainjob: dict, runtime: dict, existing=()) -> RuntimeInfo:
    rt_spec = runtime.get("spec") or {}
    template = rt_spec.get("template") or {}
    tj_spec = trainjob["spec"]
    metadata = template.get("metadata") or {}
    labels = dict(metadata.get("labels") or {})
    annotations = dict(metadata.get("annotations") or {})
    spec = json_copy(template.get("spec") or {})
    if not isinstance(spec.get("replicatedJobs", []), list):
        raise BuildError("must be a list of replicated jobs", "spec.template.spec.replicatedJobs")

    labels.update(tj_spec.get("labels") or {})
    annotations.update(tj_spec.get("annotations") or {})
    _propagate_seed_metadata(spec, tj_spec)
    _apply_pod_template_overrides(spec, tj_spec.get("podTemplateOverrides") or [])
    _apply_runtime_patches(spec, labels, annotations, tj_spec.get("runtimePatches") or [])

    ml_policy = rt_spec.get("mlPolicy")
    info = RuntimeInfo(
        trainjob=trainjob, runtime=runtime, labels=labels, annotations=annotations, ml_policy=ml_policy,
        pod_group_policy=tenant_pod_group_policy(rt_spec.get("podGroupPolicy"), k8s.find_object(existing, "Namespace", k8s.namespace_of(trainjob))),
        spec=spec, pod_sets=_pod_sets(spec, ml_policy),
        existing=tuple(existing),
    )
    _merge_resources_per_node(info)
    dra.apply_claims(info.spec, trainjob)
    return info


def _propagate_seed_metadata(spec: dict, tj_spec: dict) -> None:
    """Seed-era spec.labels/annotations also land on every Job template (v2.1 docs: 'JobSet and Jobs')."""
    labels, annotations = tj_spec.get("labels") or {}, tj_spec.get("annotations") or {}
    if K.LABEL_ANCESTOR in labels:
        raise ValidationError(f"must not set the reserved label {K.LABEL_ANCESTOR}; it is owned by the runtime",
                              f"spec.labels[{K.LABEL_ANCESTOR}]")
    if not labels and not annotations:
        return
    for job in k8s.replicated_jobs(spec):
        meta = job.setdefault("template", {}).setdefault("metadata", {})
        if labels:
            meta.setdefault("labels", {}).update(labels)
        if annotations:
            meta.setdefault("annotations", {}).update(annotations)


def _apply_pod_template_overrides(spec: dict, overrides: list[dict]) -> None:
    for override in overrides:
        targets = {t.get("name") for t in override.get("targetJobs") or []}
        patch = {}
        meta = {k: v for k, v in (override.get("metadata") or {}).items() if k in ("labels", "annotations") and v}
        if meta:
            patch["metadata"] = meta
        if override.get("spec"):
            patch["spec"] = override["spec"]
        for job in k8s.replicated_jobs(spec):
            if job.get("name") in targets:
                tmpl = k8s.job_spec(job).get("template") or {}
                k8s.job_spec(job)["template"] = strategic_merge(tmpl, patch, POD_MERGE_KEYS)


def _apply_runtime_patches(spec: dict, labels: dict, annotations: dict, patches: list[dict]) -> None:
    order = [j.get("name") for j in k8s.replicated_jobs(spec)]
    for patch in patches:
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        meta = template.get("metadata") or {}
        labels.update(meta.get("labels") or {})
        annotations.update(meta.get("annotations") or {})
        if template.get("spec"):
            spec.update(strategic_merge(spec, template["spec"], JOBSET_MERGE_KEYS))
    jobs = k8s.replicated_jobs(spec)
    jobs.sort(key=lambda j: order.index(j.get("name")) if j.get("name") in order else len(order))


def _pod_sets(spec: dict, ml_policy: dict | None) -> list[PodSet]:
    pod_sets = []
    for i, job in enumerate(k8s.replicated_jobs(spec)):
        if not isinstance(job, dict) or not isinstance(job.get("name"), str):
            raise BuildError("every replicated job needs a name", f"spec.template.spec.replicatedJobs[{i}].name")
        count = k8s.job_spec(job).get("parallelism", 1)
        ancestor = K.ancestor_of(job)
        if ancestor == C.ANCESTOR_TRAINER and ml_policy is not None:
            count = ml_policy.get("numNodes", 1)
        if not isinstance(count, int) or isinstance(count, bool):
            raise BuildError("must be an integer", f"spec.template.spec.replicatedJobs[{i}].template.spec.parallelism")
        pod_sets.append(PodSet(job["name"], ancestor, max(count, 1)))
    return pod_sets


def _merge_resources_per_node(info: RuntimeInfo) -> None:
    """v2.3: trainer.resourcesPerNode is merged per key (not replaced); ignored without an mlPolicy."""
    resources = (info.trainer or {}).get("resourcesPerNode")
    if not resources or info.ml_policy is None:
        return
    launcher_as_node = bool((info.ml_policy.get("mpi") or {}).get("runLauncherAsNode"))
    for job in k8s.replicated_jobs(info.spec):
        if K.ancestor_of(job) == C.ANCESTOR_TRAINER or (launcher_as_node and job.get("name") == C.NODE):
            container = k8s.find_container(job, C.NODE)
            if container is not None:
                merged = container.setdefault("resources", {})
                for key in ("limits", "requests"):
                    if resources.get(key):
                        merged.setdefault(key, {}).update(resources[key])
                if resources.get("claims"):
                    k8s.upsert(merged.setdefault("claims", []), resources["claims"], "name")
