"""Tenant namespaces: trainyard's platform layer on top of upstream's Volcano queue and priority handling.

Upstream (Kubeflow Trainer v2.3) takes the PodGroup queue from the annotation
`scheduling.volcano.sh/queue-name` (runtime template, seed-era `spec.annotations`, then
`runtimePatches[].trainingRuntimeSpec.template.metadata.annotations`) and the PodGroup
priorityClassName from the runtime's pod templates; a TrainJob cannot choose a priority class.
trainyard adds, without changing any upstream field:

- a tenant namespace carries its queue in the label `trainyard.dev/queue`, the priority classes it
  was granted in the annotation `trainyard.dev/priority-classes` (comma-separated) and its default
  class in `trainyard.dev/default-priority-class` (all written by the platform, not by tenants);
- a TrainJob that names no queue gets the namespace's queue, and pod templates that name no
  priority class get the namespace's default, whatever runtime kind it references;
- a TrainJob selects a priority class with the label `trainyard.dev/priority-class` (settable with
  kubectl or the SDK's `Labels` option); it replaces the runtime's priorityClassName on every pod
  template, so pods and the PodGroup carry it;
- admission refuses, at TrainJob create, another queue than the namespace's or a priority class the
  namespace was not granted, naming the field and the allowed values;
- in a tenant namespace every TrainJob is a Volcano gang in the tenant's queue: a runtime without
  `podGroupPolicy` gets `podGroupPolicy.volcano: {}` (`tenant_pod_group_policy`) and every pod template
  `schedulerName: volcano`; a coscheduling runtime is refused (its scheduler cannot honour the queue).
  So priority acts only inside Volcano's queue rules, never through kube-scheduler preemption;
- a tenant gang's JobSet is created suspended and resumed only once Volcano has admitted its PodGroup into
  the queue (phase Inqueue or later, `gang_admitted`), as Volcano's own vcjob controller creates pods only
  then. Upstream creates the JobSet running, so pods are created before admission, and a ResourceQuota
  counts every pod that exists, scheduled or not: two gangs submitted together under a GPU quota equal to
  the queue's capability each got some pods created before the quota filled, and both waited for ever;
- a Failed TrainJob's Volcano PodGroup is deleted (`failed_pod_group`): Volcano keeps an enqueued PodGroup
  Inqueue after its pods failed or were deleted (a deadline), and an Inqueue group reserves its minResources
  in the queue, so one failed gang would hold the tenant's capability until someone deleted the TrainJob
  (upstream v2.3 keeps it; kubeflow/trainer#4059 proposes deleting it). The JobSet and its pods stay, for
  logs. A Complete TrainJob's group is left: Volcano marks it Completed, which reserves nothing;
- a tenant whose GPU-hour budget is exhausted with action demotePriority (the controller's budget loop writes
  `trainyard.dev/budget-status` on the namespace) has its TrainJobs created since then built with the budget's
  `demoteTo` class on every pod template, whatever class they selected; once a new period begins the status says so
  and their builds (those not yet running) take their own class again;
- a tenant namespace pins a catalog release (label `trainyard.dev/catalog-version`): its TrainingRuntimes
  are that release's, and a ClusterTrainingRuntime rendered from another release (its own
  `trainyard.dev/catalog-version` label) is refused at TrainJob create, naming the pinned release's copy in
  the namespace or, when the pinned release has none, the release that has it. Cluster runtimes that are
  not from the catalog (no label) are not restricted.

A namespace without these labels/annotations is not restricted (plain upstream behaviour).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterable

from trainyard.tenant_policy import DEFAULT_MAX_GRACE_SECONDS, demotion
from trainyard.k8s import runtime_jobs
from trainyard.timestamps import parse_time

from trainyard import k8s as K
from . import constants as C
from . import k8s
from .errors import ValidationError
from .schema import FieldError
from .status import condition_true

QUEUE = K.VOLCANO_QUEUE_ANNOTATION


DEFAULT_SERVICE_ACCOUNT = "default"


@dataclass(frozen=True)
class TenantPolicy:
    queue: str | None = None
    priority_classes: tuple[str, ...] | None = None  # None: any class may be used
    default_priority_class: str | None = None
    catalog_version: str | None = None  # the runtime catalog release the namespace pins
    demotion: tuple[str, dt.datetime] | None = None
    """(class, since): the tenant's budget is exhausted with demotePriority; TrainJobs created since get the class."""
    service_accounts: tuple[str, ...] = (DEFAULT_SERVICE_ACCOUNT,)
    """The ServiceAccounts a tenant's TrainJob pods may run as (a tenant namespace only)."""
    max_grace_seconds: int = DEFAULT_MAX_GRACE_SECONDS
    """The longest terminationGracePeriodSeconds its pods may ask (a tenant namespace only)."""

    def demoted_class(self, trainjob: dict) -> str | None:
        """The class a budget demotion gives this TrainJob (created at or after the demotion), else None."""
        if self.demotion is None:
            return None
        created = (trainjob.get("metadata") or {}).get("creationTimestamp")
        try:
            return self.demotion[0] if created and parse_time(created) >= self.demotion[1] else None
        except ValueError:
            return None


def tenant_policy(namespace: dict | None) -> TenantPolicy:
    """What a Namespace object says about its tenant (empty policy for a plain namespace)."""
    meta = (namespace or {}).get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    granted = annotations.get(K.NAMESPACE_PRIORITY_CLASSES_ANNOTATION)
    classes = tuple(n.strip() for n in granted.split(",") if n.strip()) if granted else None
    accounts = annotations.get(K.NAMESPACE_SERVICE_ACCOUNTS_ANNOTATION) or ""
    grace = str(annotations.get(K.NAMESPACE_MAX_GRACE_ANNOTATION) or "")
    return TenantPolicy(max_grace_seconds=int(grace) if grace.isdigit() else DEFAULT_MAX_GRACE_SECONDS,
                        service_accounts=tuple(dict.fromkeys(
                            [DEFAULT_SERVICE_ACCOUNT] + [n.strip() for n in accounts.split(",") if n.strip()])),queue=labels.get(K.NAMESPACE_QUEUE_LABEL) or None, priority_classes=classes or None,
                        default_priority_class=annotations.get(K.NAMESPACE_DEFAULT_PRIORITY_CLASS_ANNOTATION) or None,
                        catalog_version=labels.get(K.CATALOG_VERSION_LABEL) or None,
                        demotion=demotion(annotations.get(K.NAMESPACE_BUDGET_STATUS_ANNOTATION)))


def namespace_policy(trainjob: dict, objects: Iterable[dict]) -> TenantPolicy:
    """The policy of the TrainJob's namespace, if its Namespace object is among `objects`."""
    return tenant_policy(k8s.find_object(objects, "Namespace", k8s.namespace_of(trainjob)))


COSCHEDULING_FIX = "use podGroupPolicy.volcano (or none: tenant namespaces get a Volcano gang)"


def tenant_pod_group_policy(policy: dict | None, namespace: dict | None) -> dict | None:
    """The pod-group policy a runtime gets in `namespace`: unchanged outside tenant namespaces; in one, a
    Volcano gang when the runtime names none (so no TrainJob bypasses the tenant's queue).
    Raises ValidationError for coscheduling, whose scheduler knows nothing of Volcano queues."""
    if tenant_policy(namespace).queue is None:
        return policy
    if policy and "coscheduling" in policy:
        error = coscheduling_error(k8s.name_of(namespace or {}))
        raise ValidationError(error.message, error.field)
    return policy if policy and "volcano" in policy else {**(policy or {}), "volcano": {}}


def tenant_runtime_document(runtime: dict, namespace: dict | None) -> dict:
    """`runtime` with the pod-group policy it gets in `namespace` (for `owned_objects`: a tenant gang's
    PodGroup is looked up like a runtime-declared one); unchanged where the policy is refused."""
    spec = K.mapping(runtime.get("spec"))
    try:
        policy = tenant_pod_group_policy(spec.get("podGroupPolicy"), namespace)
    except ValidationError:
        return runtime
    return runtime if policy is spec.get("podGroupPolicy") else {**runtime, "spec": {**spec, "podGroupPolicy": policy}}


def failed_pod_group(trainjob: dict, existing: Iterable[dict], namespace: dict | None) -> dict | None:
    """The Volcano PodGroup to delete: the one of a Failed TrainJob (with its new status) in a tenant namespace."""
    if not condition_true(trainjob.get("status") or {}, C.COND_FAILED) or tenant_policy(namespace).queue is None:
        return None
    return k8s.find_object(list(existing), "PodGroup", k8s.name_of(trainjob), k8s.namespace_of(trainjob),
                           api_group=K.VOLCANO_GROUP)


def coscheduling_error(namespace: str) -> FieldError:
    return FieldError("spec.runtimeRef", "Forbidden",
                      f"the runtime's podGroupPolicy is coscheduling, which cannot honour the Volcano queue of tenant "
                      f"namespace {namespace}; {COSCHEDULING_FIX}")


def _catalog_pin_errors(trainjob: dict, runtime: dict, policy: TenantPolicy, cluster_objects: list[dict]) -> list[FieldError]:
    """A ClusterTrainingRuntime from another catalog release than the namespace's pin is refused."""
    meta = runtime.get("metadata") or {}
    release = (meta.get("labels") or {}).get(K.CATALOG_VERSION_LABEL)
    if runtime.get("kind") != C.CLUSTER_TRAINING_RUNTIME_KIND or not policy.catalog_version or not release \
            or release == policy.catalog_version:
        return []
    name, namespace = meta.get("name", ""), k8s.namespace_of(trainjob)
    pinned = k8s.find_object(cluster_objects, C.TRAINING_RUNTIME_KIND, name, namespace)
    fix = (f"use runtimeRef kind TrainingRuntime, name {name}: release {policy.catalog_version}'s copy in this namespace"
           if pinned is not None else
           f"release {policy.catalog_version} has no runtime {name}; pick one of its runtimes (TrainingRuntimes in "
           f"namespace {namespace}) or ask the platform team to move the tenant's catalogVersion to {release}")
    return [FieldError("spec.runtimeRef", "Forbidden", f"namespace {namespace} pins runtime catalog "
                       f"{policy.catalog_version} and ClusterTrainingRuntime {name} is from catalog {release}: {fix}")]


def selected_priority_class(trainjob: dict) -> str | None:
    return ((trainjob.get("metadata") or {}).get("labels") or {}).get(K.PRIORITY_CLASS_LABEL) or None


def _runtime_template(runtime: dict) -> dict:
    return ((runtime.get("spec") or {}).get("template")) or {}


def _patch_template(patch: dict) -> dict:
    return ((patch.get("trainingRuntimeSpec") or {}).get("template")) or {}


def annotation_sources(trainjob: dict, runtime: dict) -> list[tuple[str, dict]]:
    """(field path, annotations) in the order upstream merges them onto the JobSet (later wins)."""
    spec = trainjob.get("spec") or {}
    sources = [("spec.runtimeRef", (_runtime_template(runtime).get("metadata") or {}).get("annotations") or {}),
               ("spec.annotations", spec.get("annotations") or {})]
    for i, patch in enumerate(spec.get("runtimePatches") or []):
        meta = _patch_template(patch).get("metadata") or {}
        sources.append((f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.metadata.annotations",
                        meta.get("annotations") or {}))
    return sources


def jobset_annotations(trainjob: dict, runtime: dict) -> dict:
    """Annotations the JobSet will carry: runtime template, spec.annotations, runtimePatches (in order)."""
    out: dict = {}
    for _, extra in annotation_sources(trainjob, runtime):
        out.update(extra)
    return out


def queue_origin(trainjob: dict, runtime: dict) -> tuple[str, str] | None:
    """(queue, field naming it) of the queue annotation that wins, or None when nothing names one."""
    found = None
    for path, named in annotation_sources(trainjob, runtime):
        if QUEUE in named:
            found = (named[QUEUE], path if path == "spec.runtimeRef" else f"{path}[{QUEUE}]")
    return found


def runtime_priority_classes(runtime: dict) -> list[str]:
    names = [(k8s.pod_template(dict(j)).get("spec") or {}).get("priorityClassName") for j in runtime_jobs(runtime)]
    return [n for n in names if n]


def _supported(values: Iterable[str]) -> str:
    return "supported values: " + ", ".join(f'"{v}"' for v in values)


def admission_lookups(trainjob: dict) -> list[tuple[str, str, str | None]]:
    """(kind, name, namespace) the webhook reads for `admission_errors`: the Namespace, the selected class."""
    wanted: list[tuple[str, str, str | None]] = [("Namespace", k8s.namespace_of(trainjob), None)]
    ref = ((trainjob.get("spec") or {}).get("runtimeRef")) or {}
    if ref.get("kind", C.CLUSTER_TRAINING_RUNTIME_KIND) == C.CLUSTER_TRAINING_RUNTIME_KIND and ref.get("name"):
        wanted.append((C.TRAINING_RUNTIME_KIND, ref["name"], k8s.namespace_of(trainjob)))  # the pinned copy
    if (selected := selected_priority_class(trainjob)) is not None:
        wanted.append(("PriorityClass", selected, None))
    return wanted


def admission_errors(trainjob: dict, runtime: dict, cluster_objects: Iterable[dict], old: dict | None = None) -> list[FieldError]:
    """Queue and priority class against the namespace's tenant policy (and the selected class must exist).
    On update only what the update introduces: a TrainJob created before its namespace became a tenant (or
    before a grant was withdrawn) can still be suspended or deleted; the reconcile reports the refusal."""
    cluster_objects = list(cluster_objects)
    errors = _policy_errors(trainjob, runtime, cluster_objects)
    if old is None:
        return errors
    before = {str(e) for e in _policy_errors(old, runtime, cluster_objects)}
    return [e for e in errors if str(e) not in before]


def _policy_errors(trainjob: dict, runtime: dict, cluster_objects: list[dict]) -> list[FieldError]:
    policy = namespace_policy(trainjob, cluster_objects)
    namespace = k8s.namespace_of(trainjob)
    errors = []
    if policy.queue and "coscheduling" in (((runtime.get("spec") or {}).get("podGroupPolicy")) or {}):
        errors.append(coscheduling_error(namespace))
    errors += _catalog_pin_errors(trainjob, runtime, policy, cluster_objects)
    origin = queue_origin(trainjob, runtime)
    if policy.queue and origin and origin[0] != policy.queue:
        errors.append(FieldError(origin[1], "Unsupported value", f"{_supported([policy.queue])} (the Volcano queue of "
                                 f"namespace {namespace}; name no queue to get it)", origin[0]))
    selected = selected_priority_class(trainjob)
    allowed = policy.priority_classes
    if selected is not None:
        path = f"metadata.labels[{K.PRIORITY_CLASS_LABEL}]"
        if allowed is not None and selected not in allowed:
            errors.append(FieldError(path, "Unsupported value", f"{_supported(allowed)} (the priority classes "
                                     f"namespace {namespace} was granted)", selected))
        elif selected not in C.SYSTEM_PRIORITY_CLASSES and k8s.find_object(cluster_objects, "PriorityClass", selected) is None:
            errors.append(FieldError(path, "Invalid", f'PriorityClass "{selected}" doesn\'t exist', selected))
    elif allowed is not None:
        for name in dict.fromkeys(runtime_priority_classes(runtime)):
            if name not in allowed:
                errors.append(FieldError("spec.runtimeRef", "Unsupported value",
                                         f"the runtime's pods use priorityClassName {name!r}, which namespace {namespace} "
                                         f"was not granted; select a granted class with the label "
                                         f"{K.PRIORITY_CLASS_LABEL} ({_supported(allowed)})", name))
    return errors


SERVICE_ACCOUNT_FIX = ("remove serviceAccountName (pods run as \"default\"), or ask the platform team to list the "
                       "account under the tenant's serviceAccounts in the stack")


def pod_policy_errors(jobset: dict, namespace: dict | None, field: str) -> list[FieldError]:
    """What a tenant's pods may not ask, checked on the JobSet about to be made (whatever set it: the runtime,
    runtimePatches, podTemplateOverrides), since the controller creates them on the tenant's behalf:
    - run as a ServiceAccount other than `default` and those the tenant's stack entry lists (a confused deputy:
      pods as an identity the TrainJob's author may not hold, a CI system's);
    - tolerate the platform's own reservation taint (or every taint): nodes held for another tenant's gang;
    - a terminationGracePeriodSeconds above the tenant's limit: a suspended job keeping its GPUs for a day."""
    policy = tenant_policy(namespace)
    if policy.queue is None:
        return []
    where = f"namespace {k8s.name_of(namespace or {})}"
    errors = []
    for job in K.mapping(jobset.get("spec")).get("replicatedJobs") or []:
        pod = K.mapping(K.mapping(K.mapping(K.mapping(K.mapping(job).get("template")).get("spec")).get("template")).get("spec"))
        label = f"replicated job {K.mapping(job).get('name')}"
        for key in ("serviceAccountName", "serviceAccount"):  # the second: the deprecated alias pods still honour
            name = pod.get(key)
            if name and name not in policy.service_accounts:
                errors.append(FieldError(field, "Forbidden", f"{label}: pods may not run as ServiceAccount {name!r} in "
                                         f"{where} ({_supported(policy.service_accounts)}); {SERVICE_ACCOUNT_FIX}", name))
        for toleration in pod.get("tolerations") or []:
            toleration = K.mapping(toleration)
            key = toleration.get("key") or ""
            if key == K.RESERVATION_TAINT or (not key and toleration.get("operator") == "Exists"):
                errors.append(FieldError(field, "Forbidden", f"{label}: pods may not tolerate "
                                         f"{'every taint' if not key else 'the taint ' + key}: the platform's "
                                         f"{K.RESERVATION_TAINT} holds nodes for another gang; tolerate named taints only"))
        grace = pod.get("terminationGracePeriodSeconds")
        if isinstance(grace, int) and not isinstance(grace, bool) and grace > policy.max_grace_seconds:
            errors.append(FieldError(field, "Forbidden", f"{label}: terminationGracePeriodSeconds {grace} is above "
                                     f"{where}'s limit of {policy.max_grace_seconds} (a suspended job keeps its GPUs "
                                     f"that long); ask for at most {policy.max_grace_seconds}, or ask the platform team "
                                     "to raise limits.maxTerminationGracePeriodSeconds", grace))
    return errors


# PodGroup phases before Volcano's enqueue action admitted the gang ("": Volcano has not seen it yet).
NOT_ADMITTED_PHASES = ("", "Pending")


def gang_admitted(pod_group: dict | None) -> bool:
    """Whether Volcano admitted the gang into its queue: its queue capability (and the cluster) had room for
    the whole group's minResources, so creating its pods cannot leave part of the gang holding the quota."""
    phase = K.mapping(K.mapping(pod_group).get("status")).get("phase") or ""
    return pod_group is not None and phase not in NOT_ADMITTED_PHASES

