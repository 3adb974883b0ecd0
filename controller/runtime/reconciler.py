"""One reconcile of one TrainJob: read what exists, build with the pure pipeline, apply, write status.

What exists is the runtime snapshot plus whatever the registered plugins' `owned_objects` name for the
TrainJob's runtime (`plugins/framework.py`); reconcile knows no policy itself and builds once.

Mirrors upstream's TrainJob reconciler: objects are server-side applied with one field manager
and a controller ownerReference; a running JobSet is never updated (the pipeline leaves it out);
a TrainJob managed by another controller is left alone; a finished one gets no new objects; an
expired activeDeadlineSeconds fails the TrainJob and deletes its JobSet.

Beyond upstream: the TrainJob's Namespace is read for the tenant's queue and default priority class
(`tenant_namespace.py`; there a Failed TrainJob's Volcano PodGroup is deleted, so it stops holding the
queue), and every failure to create the children (build error, missing runtime, API error while
applying, missing Volcano queue, gang beyond a ResourceQuota, pods the tenant may not have) reaches the TrainJob
as the condition `ResourcesCreationFailed` plus one Warning event per distinct cause, then is raised so the work
queue retries with backoff; the condition goes away with the first reconcile that applies everything. Pods the API
server refuses after the JobSet was made (`pod_refusals.py`) fail the TrainJob when no retry can cure it, and
release its gang from the queue after `gang_start_timeout` when one may.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from types import ModuleType
from typing import Sequence

from trainyard.k8s import resource_version

from trainyard import k8s as K
from trainyard.timestamps import now_time
from .. import constants as C
from .. import k8s
from .. import dra, failures, gang_pending, pod_refusals
from trainyard.toolchain.flux_templates import read_flux_templates

from ..build import build_objects, is_managed_by_us
from ..errors import ControllerError, PreflightError
from ..plugins import REGISTRY, framework
from ..plugins.framework import StatusServerConfig
from ..snapshot import runtime_key, snapshot_name, stored_runtime_document
from ..status import build_status, controller_failed, is_finished, requeue_after_seconds, with_pods_refused
from ..tenant_namespace import failed_pod_group, pod_policy_errors, tenant_runtime_document
from . import gang_events
from .apiserver import FAILED_CREATE_EVENTS, RESOURCES, ApiView, Resource, resource_for
from .apply_record import edit_basis
from .transport import ApiError

log = logging.getLogger("trainyard.controller")

TRANSIENT_API_STATUSES = (409, 429)  # conflict, throttled: retried without bothering the user


@dataclass
class Outcome:
    applied: list[str]  # children this reconcile created or changed (an apply that changed nothing is left out)
    status_changed: bool
    requeue_after: float | None = None


def existing_objects(api: ApiView, trainjob: dict, snapshot: dict | None, runtime: dict | None,
                     plugins: Sequence[ModuleType] = REGISTRY, namespace: dict | None = None) -> list[dict]:
    """What an earlier reconcile may have created that this build must see: the runtime snapshot, and what the
    plugins' `owned_objects` name for the runtime the build will use (the snapshot's, else `runtime`, with the
    gang a tenant `namespace` gives it), so a TrainJob pays no GET for a policy its runtime does not use; and
    the ResourceClaimTemplates its `resourceClaimsPerNode` name."""
    document = stored_runtime_document(snapshot) if snapshot is not None else (runtime or {})
    document = tenant_runtime_document(document, namespace)
    refs = [ref for refs in framework.run(plugins, "owned_objects", trainjob, document) for ref in refs]
    found = [snapshot] if snapshot is not None else []
    for ref in dict.fromkeys(refs):
        obj = get_typed(api, resource_for(ref.kind, ref.api_version), ref.name, trainjob["metadata"]["namespace"])
        if obj is not None:
            found.append(obj)
    for kind, name, template_namespace in dra.template_refs(trainjob):  # what its resourceClaimsPerNode give each node
        if (template := get_typed(api, RESOURCES[kind], name, template_namespace)) is not None:
            found.append(template)
    return found


def get_typed(api: ApiView, resource: Resource, name: str, namespace: str | None) -> dict | None:
    obj = api.get(resource, name, namespace)
    if obj is not None:
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
    return obj


def fetch_runtime(api: ApiView, trainjob: dict) -> dict | None:
    ref = trainjob["spec"].get("runtimeRef") or {}
    kind = ref.get("kind", C.CLUSTER_TRAINING_RUNTIME_KIND)
    if ref.get("apiGroup", K.TRAINER_GROUP) != K.TRAINER_GROUP or kind not in C.RUNTIME_KINDS:
        return None
    namespace = trainjob["metadata"]["namespace"] if kind == C.TRAINING_RUNTIME_KIND else None
    obj = api.get(RESOURCES[kind], ref.get("name", ""), namespace)
    if obj is not None:
        obj.setdefault("apiVersion", K.TRAINER_API_VERSION)
        obj.setdefault("kind", kind)
    return obj


def _key(obj: dict) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def reconcile(api: ApiView, namespace: str, name: str, status_server: StatusServerConfig | None = None,
              plugins: Sequence[ModuleType] = REGISTRY, seal_key: bytes | None = None,
              gang_start_timeout: float = 0.0) -> Outcome | None:
    """Returns None when the TrainJob is gone or not ours; raises on errors worth retrying.
    `status_server`: set when the TrainJobStatus feature gate is on. `plugins`: the registry (tests pass another).
    `seal_key`: seals new runtime snapshots and checks existing ones (`snapshot_seal.py`).
    `gang_start_timeout`: seconds an admitted Volcano gang may hold its queue while the API server refuses its pods
    for a reason that may pass (a full quota) before it is released (0: never)."""
    trainjob = api.get(RESOURCES["TrainJob"], name, namespace)
    if trainjob is None or not is_managed_by_us(trainjob):
        return None
    trainjob.setdefault("apiVersion", K.TRAINER_API_VERSION)
    trainjob.setdefault("kind", C.TRAINJOB_KIND)
    snapshot = get_typed(api, RESOURCES["ConfigMap"], snapshot_name(trainjob), namespace)
    has_snapshot = snapshot is not None
    runtime = None if has_snapshot else fetch_runtime(api, trainjob)
    namespace_objects = namespace_objects_of(api, namespace)
    existing = existing_objects(api, trainjob, snapshot, runtime, plugins, next(iter(namespace_objects), None))
    applied: list[str] = []
    failure: failures.Failure | None = None
    error: Exception | None = None
    try:
        objects = build_objects(trainjob, runtime, existing + namespace_objects, status_server=status_server,
                                plugins=plugins, seal_key=seal_key, flux_templates=read_flux_templates)
        failure = _preflight(api, namespace, objects, existing, next(iter(namespace_objects), None))
        if failure is not None:
            error = PreflightError(failure.message)
        else:
            versions = {_key(obj): resource_version(obj) for obj in existing}
            basis = edit_basis(trainjob)
            for obj in objects:
                answer = api.apply(obj, basis=basis)
                if resource_version(answer) is None or resource_version(answer) != versions.get(_key(obj)):
                    applied.append(_key(obj))
    except ControllerError as exc:
        failure, error = failures.build_failure(str(exc), _runtime_missing(trainjob, runtime, has_snapshot)), exc
    except ApiError as exc:
        if exc.status in TRANSIENT_API_STATUSES:
            raise
        failure, error = failures.api_failure(exc), exc
    jobset = api.get(RESOURCES["JobSet"], name, namespace)
    now = now_time()
    status = failures.with_failure(build_status(trainjob, jobset, now), failure, now)
    if failure is not None and failures.is_new(trainjob.get("status") or {}, failure):
        api.event(trainjob, C.EVENT_RESOURCES_CREATION_FAILED, failures.event_message(failure))
    existed = any(o.get("kind") == "JobSet" for o in existing)  # a JobSet made by this reconcile has no Job yet
    refusal = pods_refused(api, {**trainjob, "status": status}, jobset) if failure is None and existed else None
    release_in = None
    if refusal is not None and refusal.permanent:  # the TrainJob fails: its JobSet (below) and PodGroup go
        status = with_pods_refused(status, refusal.text(), now)
        api.event(trainjob, pod_refusals.EVENT_PODS_REFUSED, refusal.text())
        api.merge_patch(RESOURCES["TrainJob"], name, {"metadata": {"labels": {
            K.NEVER_STARTS_LABEL: C.REASON_PODS_REFUSED}}}, namespace)  # so `report` finds it without listing all
    elif refusal is not None and jobset is not None:
        release_in = release_gang(api, trainjob, existing, jobset, refusal, now, gang_start_timeout)
    waiting_gang = gang_events.report(api, trainjob, existing) if failure is None and refusal is None else None
    if controller_failed(status) and jobset is not None:
        api.delete(RESOURCES["JobSet"], name, namespace)
    failed_group = failed_pod_group({**trainjob, "status": status}, existing, next(iter(namespace_objects), None))
    if failed_group is not None:  # it would hold the tenant's queue (see tenant_namespace.py)
        api.delete(resource_for(failed_group), name, namespace, propagation="Background")
    # status.trainerStatus belongs to the status server (its own field manager): never written back here,
    # so a report arriving between our read and our patch is not lost.
    ours = _without_trainer_status(status)
    changed = ours != _without_trainer_status(trainjob.get("status") or {})
    if changed:
        api.patch_status(RESOURCES["TrainJob"], name, namespace, ours)
    if error is not None:
        raise error
    requeue = requeue_after_seconds({**trainjob, "status": status}, now)
    for recheck in (gang_pending.recheck_after(waiting_gang, now), release_in):
        if recheck is not None:
            requeue = recheck if requeue is None else min(requeue, recheck)
    return Outcome(applied=applied, status_changed=changed, requeue_after=requeue)


def pods_refused(api: ApiView, trainjob: dict, jobset: dict | None) -> pod_refusals.Refusal | None:
    """A refusal of this running JobSet's pods (`pod_refusals.py`), one that repeating cannot cure first: the Job
    controller's FailedCreate Event (from the controller's Events store: no request) names it, the Job's own status
    confirms it (one GET, only then)."""
    if jobset is None or is_finished(trainjob) or K.mapping(jobset.get("spec")).get("suspend") \
            or pod_refusals.has_pods(jobset):
        return None
    namespace = trainjob["metadata"]["namespace"]
    events = api.list(FAILED_CREATE_EVENTS, namespace).get("items") or []
    found = []
    for event in pod_refusals.candidate_events(jobset, events)[:3]:
        job = api.get(RESOURCES["Job"], str(K.mapping(event.get("involvedObject")).get("name")), namespace)
        if pod_refusals.confirmed(event, job, jobset):
            found.append(pod_refusals.refusal_of(event))
    return min(found, key=lambda r: (not r.permanent, r.since), default=None)


def release_gang(api: ApiView, trainjob: dict, existing: list[dict], jobset: dict, refusal: pod_refusals.Refusal,
                 now: str, timeout_s: float) -> float | None:
    """An admitted Volcano gang whose pods the API server has refused for `timeout_s` (for a reason that may pass)
    stops holding its queue: its JobSet is suspended (no more pod creates) and its PodGroup deleted; the next
    reconcile makes a new, not yet admitted PodGroup, and the JobSet waits suspended for its admission. One Warning
    Event says why. Returns the seconds until the release is due (None: nothing to release, or done)."""
    group = k8s.find_object(existing, "PodGroup", k8s.name_of(trainjob), k8s.namespace_of(trainjob),
                            api_group=K.VOLCANO_GROUP)
    if group is None:
        return None
    # a gang admitted again after a release retries the same Jobs, whose refusal Event is older: count from the
    # new PodGroup
    created = str(K.mapping(group.get("metadata")).get("creationTimestamp") or "")
    due = pod_refusals.release_due(pod_refusals.counted_from(refusal, created), now, timeout_s)
    if due is None or due > 0:
        return due
    namespace = k8s.namespace_of(trainjob)
    api.merge_patch(RESOURCES["JobSet"], k8s.name_of(jobset), {"spec": {"suspend": True}}, namespace)
    api.delete(RESOURCES["PodGroup"], k8s.name_of(group), namespace, propagation="Background")
    api.event(trainjob, pod_refusals.EVENT_GANG_RELEASED, pod_refusals.released_message(refusal, timeout_s),
              name=pod_refusals.released_event_name(trainjob, refusal))
    return None


def _runtime_missing(trainjob: dict, runtime: dict | None, has_snapshot: bool) -> bool:
    kind, group = runtime_key(trainjob)
    return runtime is None and not has_snapshot and group == K.TRAINER_GROUP and kind in C.RUNTIME_KINDS


def namespace_objects_of(api: ApiView, namespace: str) -> list[dict]:
    """The TrainJob's Namespace (tenant queue, default priority class); none when it cannot be read,
    e.g. a controller deployed without the right to get namespaces: then nothing is defaulted."""
    try:
        found = get_typed(api, RESOURCES["Namespace"], namespace, None)
    except ApiError as exc:
        if exc.status != 403:
            raise
        log.warning("cannot read namespace %s (forbidden): no tenant queue/priority defaults", namespace)
        return []
    return [found] if found else []


def _preflight(api: ApiView, namespace: str, objects: list[dict], existing: list[dict],
               namespace_object: dict | None) -> failures.Failure | None:
    """Causes the API server would not report at apply time: a missing Volcano queue, and (when the JobSet
    is about to be created) pods the tenant may not have (a ServiceAccount it was not given, the platform's taint
    tolerated, a grace period above its limit), or a gang larger than a ResourceQuota's hard limit."""
    missing = [q for q in dict.fromkeys(failures.volcano_queues(objects)) if api.get(RESOURCES["Queue"], q) is None]
    if missing:
        return failures.queue_failure(missing)
    jobset = next((o for o in objects if o["kind"] == "JobSet"), None)
    if jobset is None or any(o["kind"] == "JobSet" for o in existing):
        return None
    forbidden = pod_policy_errors(jobset, namespace_object, "spec")
    if forbidden:  # admission refuses it; this holds when the webhook was bypassed or the grant was withdrawn since
        return failures.Failure(C.REASON_POD_NOT_ALLOWED, forbidden[0].message)
    try:
        quotas = api.list(RESOURCES["ResourceQuota"], namespace).get("items") or []
    except ApiError as exc:
        if exc.status != 403:
            raise
        return None  # not allowed to read quotas: the Job controller's refusal stays the only report
    return failures.quota_failure(jobset, quotas, existing)


def _without_trainer_status(status: dict) -> dict:
    return {k: v for k, v in status.items() if k != "trainerStatus"}


def owner_trainjob(obj: dict) -> tuple[str, str] | None:
    """(namespace, name) of the TrainJob controlling an owned object, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == C.TRAINJOB_KIND and ref.get("controller") and \
                ref.get("apiVersion", "").startswith(K.TRAINER_GROUP + "/"):
            return obj["metadata"].get("namespace"), ref["name"]
    return None


__all__ = ["reconcile", "owner_trainjob", "existing_objects", "fetch_runtime", "Outcome"]
