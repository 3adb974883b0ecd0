"""One reconcile of one TrainJob: read what exists, build with the pure pipeline, apply, write status.

Mirrors upstream's TrainJob reconciler: objects are server-side applied with one field manager
and a controller ownerReference; a running JobSet is never updated (the pipeline leaves it out);
a TrainJob managed by another controller is left alone; a finished one gets no new objects; an
expired activeDeadlineSeconds fails the TrainJob and deletes its JobSet.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from . import constants as C
from .apiserver import COSCHEDULING_PODGROUP, RESOURCES, ApiServer
from .build import build_objects, is_managed_by_us
from .errors import ControllerError
from .plugins.trainjobstatus import StatusServerConfig
from .snapshot import snapshot_name
from .status import build_status, deadline_exceeded, requeue_after_seconds

log = logging.getLogger("trainyard.controller")

MAX_EVENT_MESSAGE = 950


@dataclass
class Outcome:
    applied: list[str]
    status_changed: bool
    requeue_after: float | None = None


def now_rfc3339() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def existing_objects(api: ApiServer, trainjob: dict) -> list[dict]:
    """The objects a previous reconcile may have created for this TrainJob (all named after it)."""
    name, ns = trainjob["metadata"]["name"], trainjob["metadata"]["namespace"]
    wanted = [
        (RESOURCES["ConfigMap"], snapshot_name(trainjob)),
        (RESOURCES["Secret"], name + C.MPI_SSH_SECRET_SUFFIX),
        (RESOURCES["ConfigMap"], name + C.MPI_HOSTFILE_SUFFIX),
        (RESOURCES["PodGroup"], name),
        (RESOURCES["JobSet"], name),
    ]
    found = []
    for resource, obj_name in wanted:
        obj = _get_typed(api, resource, obj_name, ns)
        if obj is not None:
            found.append(obj)
    return found


def _build(api: ApiServer, trainjob: dict, runtime: dict | None, existing: list[dict],
           status_server: StatusServerConfig | None) -> list[dict]:
    """build_objects, reading a coscheduling PodGroup back only when the runtime asks for one (so every
    other TrainJob pays no extra GET), then building again with it so the plugin decides as usual."""
    objects = build_objects(trainjob, runtime, existing, status_server=status_server)
    wants_coscheduling = any(o["kind"] == "PodGroup" and o["apiVersion"] == COSCHEDULING_PODGROUP.api_version
                             for o in objects)
    if wants_coscheduling:
        found = _get_typed(api, COSCHEDULING_PODGROUP, trainjob["metadata"]["name"], trainjob["metadata"]["namespace"])
        if found is not None:
            return build_objects(trainjob, runtime, existing + [found], status_server=status_server)
    return objects


def _get_typed(api: ApiServer, resource, name: str, namespace: str) -> dict | None:
    obj = api.get(resource, name, namespace)
    if obj is not None:
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
    return obj


def fetch_runtime(api: ApiServer, trainjob: dict) -> dict | None:
    ref = trainjob["spec"].get("runtimeRef") or {}
    kind = ref.get("kind", C.CLUSTER_TRAINING_RUNTIME_KIND)
    if ref.get("apiGroup", C.GROUP) != C.GROUP or kind not in C.RUNTIME_KINDS:
        return None
    namespace = trainjob["metadata"]["namespace"] if kind == C.TRAINING_RUNTIME_KIND else None
    obj = api.get(RESOURCES[kind], ref.get("name", ""), namespace)
    if obj is not None:
        obj.setdefault("apiVersion", C.API_VERSION)
        obj.setdefault("kind", kind)
    return obj


def _key(obj: dict) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def reconcile(api: ApiServer, namespace: str, name: str, status_server: StatusServerConfig | None = None) -> Outcome | None:
    """Returns None when the TrainJob is gone or not ours; raises on errors worth retrying.
    `status_server`: set when the TrainJobStatus feature gate is on."""
    trainjob = api.get(RESOURCES["TrainJob"], name, namespace)
    if trainjob is None or not is_managed_by_us(trainjob):
        return None
    trainjob.setdefault("apiVersion", C.API_VERSION)
    trainjob.setdefault("kind", C.TRAINJOB_KIND)
    existing = existing_objects(api, trainjob)
    has_snapshot = any(o["kind"] == "ConfigMap" and o["metadata"]["name"] == snapshot_name(trainjob) for o in existing)
    runtime = None if has_snapshot else fetch_runtime(api, trainjob)
    applied: list[str] = []
    try:
        objects = _build(api, trainjob, runtime, existing, status_server)
    except ControllerError as exc:
        message = f"TrainJob resources reconciliation failed: {str(exc)[:MAX_EVENT_MESSAGE]}"
        api.event(trainjob, "TrainJobResourcesCreationFailed", message)
        raise
    for obj in objects:
        api.apply(obj)
        applied.append(_key(obj))
    jobset = api.get(RESOURCES["JobSet"], name, namespace)
    now = now_rfc3339()
    status = build_status(trainjob, jobset, now)
    if deadline_exceeded(status) and jobset is not None:
        api.delete(RESOURCES["JobSet"], name, namespace)
    # status.trainerStatus belongs to the status server (its own field manager): never written back here,
    # so a report arriving between our read and our patch is not lost.
    ours = _without_trainer_status(status)
    changed = ours != _without_trainer_status(trainjob.get("status") or {})
    if changed:
        api.patch_status(RESOURCES["TrainJob"], name, namespace, ours)
    requeue = requeue_after_seconds({**trainjob, "status": status}, now)
    return Outcome(applied=applied, status_changed=changed, requeue_after=requeue)


def _without_trainer_status(status: dict) -> dict:
    return {k: v for k, v in status.items() if k != "trainerStatus"}


def owner_trainjob(obj: dict) -> tuple[str, str] | None:
    """(namespace, name) of the TrainJob controlling an owned object, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == C.TRAINJOB_KIND and ref.get("controller") and \
                ref.get("apiVersion", "").startswith(C.GROUP + "/"):
            return obj["metadata"].get("namespace"), ref["name"]
    return None


__all__ = ["reconcile", "owner_trainjob", "existing_objects", "fetch_runtime", "Outcome", "COSCHEDULING_PODGROUP"]
