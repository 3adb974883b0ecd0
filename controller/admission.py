"""Admission webhooks (pure): answers to AdmissionReviews for TrainJobs and (Cluster)TrainingRuntimes, and the
mutating patch that stamps `runtimePatches[].time`.

The checks themselves live in `runtime_validation.py` and `trainjob_validation.py` (which runs each
plugin's `validate`); this module looks up what they need through the caller's `lookup` (the
referenced runtime, the TrainJob's JobSet, Volcano Queues, PriorityClasses, the tenant Namespace).
"""

from __future__ import annotations

from typing import Any, Protocol

from trainyard import k8s as K
from . import constants as C
from . import dra, k8s
from .build import build_objects
from .errors import ControllerError, InputError
from .failures import quota_never_fits
from .plugins.framework import FluxTemplates
from .pod_refusals import classify, permanent_fix, pods_to_try
from .inputs import load_runtime, load_trainjob
from .runtime_validation import validate_runtime
from .schema import FieldError
from .tenant_namespace import admission_lookups, jobset_annotations, pod_policy_errors
from .trainjob_validation import validate_trainjob
from .validation import Result, input_error, runtime_jobs

__all__ = ["Result", "Lookup", "admission_review_response", "default_trainjob_patch", "validate_runtime",
           "validate_trainjob"]

class DryRunPod(Protocol):
    """Create `pod` (or the JobSet the pods come from) with `dryRun=All` through every admission layer of the API
    server: None when it would be admitted, else the API server's message."""

    def __call__(self, pod: dict) -> str | None: ...


class Lookup(Protocol):
    """Admission's reads: one object by kind and name (None when absent), or with `name` None a list."""

    def __call__(self, kind: str, name: str | None, namespace: str | None = None) -> Any: ...


# Annotations on a TrainJob that only the platform's own loops write (the reclaim loop's note on a TrainJob it
# suspended: a forged one made the loop wait for a gang that does not exist, and reclaim stopped cluster-wide).
PLATFORM_ANNOTATIONS = (K.RECLAIMED_FOR_ANNOTATION,)


def platform_annotation_errors(new: dict, old: dict | None, user: str, platform_users: frozenset[str]) -> list[FieldError]:
    """Changes to `PLATFORM_ANNOTATIONS` by anyone but the controller itself (`platform_users`: its identity; empty
    when unknown, then nothing is checked, or the controller would refuse its own writes)."""
    if not platform_users or user in platform_users:
        return []
    before = K.mapping(K.mapping((old or {}).get("metadata")).get("annotations"))
    after = K.mapping(K.mapping(new.get("metadata")).get("annotations"))
    return [FieldError(f"metadata.annotations[{key}]", "Forbidden", "written by the platform's reclaim loop only; "
                       "remove it (suspend the TrainJob with spec.suspend instead)")
            for key in PLATFORM_ANNOTATIONS if before.get(key) != after.get(key)]


def admission_review_response(review: dict, lookup: Lookup, dry_run_pod: DryRunPod | None = None,
                              platform_users: frozenset[str] = frozenset(),
                              flux_templates: FluxTemplates | None = None) -> dict:
    """Answer an admission.k8s.io/v1 AdmissionReview for TrainJob / (Cluster)TrainingRuntime.

    `lookup(kind, name, namespace)` returns a live object or None; it is asked for the referenced
    runtime, the TrainJob's JobSet, Volcano Queues and PriorityClasses; `lookup("ResourceQuota", None, ns)`
    lists the namespace's ResourceQuotas (None or [] when unknown). `dry_run_pod`: when given, a new or changed
    TrainJob's pods are dry-run created first (`pod_refusals`), and one the API server would refuse is refused.
    `platform_users`: the controller's own identity, the only one that may write `PLATFORM_ANNOTATIONS`.
    `flux_templates`: what the trial builds of a Flux TrainJob read its scripts with (see `build_objects`).
    """
    request = (review or {}).get("request") or {}
    uid = request.get("uid", "")
    kind = (request.get("kind") or {}).get("kind") or ((request.get("object") or {}).get("kind"))
    operation = request.get("operation", "CREATE")
    new, old = request.get("object"), request.get("oldObject") if operation == "UPDATE" else None
    try:
        if operation == "DELETE":
            result = Result()
        elif not isinstance(new, dict):
            result = Result(errors=[FieldError("object", "Required", "the AdmissionReview request has no object")])
        elif kind == C.TRAINJOB_KIND:
            user = str(K.mapping(request.get("userInfo")).get("username") or "")
            forged = platform_annotation_errors(new, old, user, platform_users)
            result = Result(errors=forged) if forged else _review_trainjob(new, old, lookup, dry_run_pod, flux_templates)
        elif kind in C.RUNTIME_KINDS:
            result = validate_runtime(new, old)
        else:
            result = Result(errors=[FieldError("kind", "Invalid", f"trainyard does not validate {kind!r}")])
    except ControllerError as err:  # a malformed level the checks walk into: refuse naming it
        result = Result(errors=[input_error(err)])
    response: dict = {"uid": uid, "allowed": result.allowed}
    if result.warnings:
        response["warnings"] = result.warnings
    if not result.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": result.message()}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _review_trainjob(new: dict, old: dict | None, lookup: Lookup, dry_run_pod: DryRunPod | None = None,
                     flux_templates: FluxTemplates | None = None) -> Result:
    try:
        trainjob = load_trainjob(new)
    except InputError as err:
        return Result(errors=[input_error(err)])
    ref = trainjob["spec"]["runtimeRef"]
    namespace = k8s.namespace_of(trainjob)
    runtime = lookup(ref["kind"], ref["name"], namespace if ref["kind"] == C.TRAINING_RUNTIME_KIND else None) \
        if ref.get("kind") in C.RUNTIME_KINDS else None
    cluster: list[dict] = []
    jobset = lookup("JobSet", k8s.name_of(trainjob), namespace)
    if jobset:
        cluster.append(jobset)
    cluster += [found for kind, name, ns in admission_lookups(trainjob) + dra.template_refs(trainjob)
                if (found := lookup(kind, name, ns))]
    try:  # a malformed runtime is reported by validate_trainjob; nothing more to look up for it
        loaded = load_runtime(runtime) if isinstance(runtime, dict) else None
    except InputError:
        loaded = None
    if loaded:
        queue = jobset_annotations(trainjob, loaded).get(K.VOLCANO_QUEUE_ANNOTATION)
        if queue and (found := lookup("Queue", queue, None)):
            cluster.append(found)
        for job in runtime_jobs(loaded):
            name = K.mapping(k8s.pod_template(dict(job)).get("spec")).get("priorityClassName")
            if name and (found := lookup("PriorityClass", name, None)):
                cluster.append(found)
    result = validate_trainjob(new, runtime, old, cluster, flux_templates=flux_templates)
    quotas = (lookup("ResourceQuota", None, namespace) or []) if result.allowed and old is None else []
    if result.allowed and old is None:
        result.errors += dra.admission_errors(trainjob, cluster, quotas)
    if result.allowed and loaded and old is None:
        result.errors += quota_errors(trainjob, loaded, cluster, quotas, flux_templates)
    if result.allowed and loaded and not jobset and \
            (old is None or K.mapping(old.get("spec")) != K.mapping(new.get("spec"))):
        result.errors += pod_errors(trainjob, loaded, cluster, dry_run_pod, flux_templates)
    return result


def pod_errors(trainjob: dict, runtime: dict, cluster_objects: list[dict],
               dry_run_pod: DryRunPod | None, flux_templates: FluxTemplates | None = None) -> list[FieldError]:
    """What the pods the Job controller would create may not be: run as a ServiceAccount the tenant was not given
    (`tenant_namespace.pod_policy_errors`), or refused by the API server's admission layers (Pod Security,
    LimitRange, ResourceQuota, ServiceAccount, admission policies and webhooks), found by a dry-run create of one
    pod per replicated job. A refusal that repeating cannot cure refuses the TrainJob in the API server's words,
    with the fix; a full quota or a busy webhook does not."""
    try:
        objects = build_objects(trainjob, runtime, cluster_objects, flux_templates=flux_templates)
    except ControllerError:
        return []  # validation already named what cannot be built
    jobset = next((o for o in objects if o["kind"] == "JobSet"), None)
    if jobset is None:
        return []
    namespace = k8s.find_object(cluster_objects, "Namespace", k8s.namespace_of(trainjob))
    errors = pod_policy_errors(jobset, namespace, _refused_field(trainjob))
    if errors or dry_run_pod is None:
        return errors
    errors += jobset_errors(trainjob, jobset, dry_run_pod)
    for job, pod in pods_to_try(jobset):
        message = dry_run_pod(pod)
        refusal = classify(f"replicated job {job}", message) if message else None
        if refusal is not None:
            errors.append(FieldError(_refused_field(trainjob), "Forbidden", refusal.text()))
    return errors


def jobset_errors(trainjob: dict, jobset: dict, dry_run: DryRunPod) -> list[FieldError]:
    """The JobSet itself, dry-run created: what the API server and JobSet's webhook refuse of what the TrainJob
    copies onto it (a label key that is no qualified name in `spec.labels`, say). A quota on JobSets is no verdict
    on the TrainJob: it may be raised, and the controller reports it while it holds (condition ApplyFailed)."""
    message = dry_run(jobset)
    if not message or "exceeded quota" in message or permanent_fix(message) is None:
        return []
    field = next((f"spec.{key}" for key in ("labels", "annotations") if f"metadata.{key}" in message
                  and K.mapping(trainjob.get("spec")).get(key)), _refused_field(trainjob))
    return [FieldError(field, "Invalid", f"the API server refuses the JobSet this TrainJob builds: {message}; "
                                         "fix: the field it names (a label or annotation key must be a qualified "
                                         "name such as example.com/team)")]


def _refused_field(trainjob: dict) -> str:
    """Where the user most likely set what is refused: their runtimePatches / podTemplateOverrides, else the
    runtime they named."""
    spec = K.mapping(trainjob.get("spec"))
    for key in ("runtimePatches", "podTemplateOverrides"):
        if spec.get(key):
            return f"spec.{key}"
    return "spec.runtimeRef"


def quota_errors(trainjob: dict, runtime: dict, cluster_objects: list[dict], quotas: list[dict],
                 flux_templates: FluxTemplates | None = None) -> list[FieldError]:
    """A gang beyond a ResourceQuota's hard limit in its namespace can never start: refused at create, in
    `trainyard fit`'s words. The gang is counted from the built JobSet's templates (per replicated job, never
    per pod), with the effective requests (an extended resource given only as a limit counts as requested)."""
    if not quotas:
        return []
    try:
        objects = build_objects(trainjob, runtime, cluster_objects, flux_templates=flux_templates)
    except ControllerError:
        return []  # validation already named what cannot be built
    jobset = next((o for o in objects if o["kind"] == "JobSet"), None)
    message = quota_never_fits(jobset, quotas, cluster_objects) if jobset is not None else None
    return [FieldError("spec.trainer.numNodes", "Forbidden", message)] if message else []


def default_trainjob_patch(trainjob: dict, old: dict | None, now: str) -> list[dict]:
    """The mutating webhook: JSON patch stamping `runtimePatches[].time` for new or changed entries
    (an unchanged entry keeps its old time)."""
    patches = (trainjob.get("spec") or {}).get("runtimePatches") or []
    previous = {p.get("manager"): p for p in ((old or {}).get("spec") or {}).get("runtimePatches") or []}
    ops = []
    for i, patch in enumerate(patches):
        before = previous.get(patch.get("manager"))
        same = before is not None and {k: v for k, v in before.items() if k != "time"} == {k: v for k, v in patch.items() if k != "time"}
        stamp = before.get("time", now) if before is not None and same and before.get("time") else now
        if patch.get("time") != stamp:
            ops.append({"op": "add", "path": f"/spec/runtimePatches/{i}/time", "value": stamp})
    return ops
