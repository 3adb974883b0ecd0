"""`build_status`: the `.status` one reconcile writes for a TrainJob, given the observed JobSet.

Upstream semantics: Suspended (True/Suspended, or False/Resumed after a suspension), Complete and
Failed copied from the JobSet's Completed/Failed conditions (reason and message kept), jobsStatus from
the JobSet's replicatedJobsStatus, and Failed/DeadlineExceeded once `activeDeadlineSeconds` have passed
since creation (or since the last resume). No Running/Pending condition exists upstream.
"""

from __future__ import annotations

import datetime as dt

from trainyard.k8s import json_copy
from trainyard import k8s as K
from trainyard.timestamps import parse_time

from . import constants as C


def find_condition(status: dict, kind: str) -> dict | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def condition_true(status: dict, kind: str) -> bool:
    cond = find_condition(status, kind)
    return cond is not None and cond.get("status") == "True"


def is_finished(trainjob: dict) -> bool:
    status = trainjob.get("status") or {}
    return condition_true(status, C.COND_COMPLETE) or condition_true(status, C.COND_FAILED)


def set_condition(status: dict, new: dict, now: str) -> None:
    """apimachinery `meta.SetStatusCondition`: lastTransitionTime only moves when the status flips."""
    conditions = status.setdefault("conditions", [])
    current = next((c for c in conditions if c.get("type") == new["type"]), None)
    if current is None:
        conditions.append({**new, "lastTransitionTime": new.get("lastTransitionTime") or now})
        return
    if current.get("status") != new["status"]:
        current["status"] = new["status"]
        current["lastTransitionTime"] = new.get("lastTransitionTime") or now
    current["reason"] = new.get("reason", "")
    current["message"] = new.get("message", "")
    if "observedGeneration" in new:
        current["observedGeneration"] = new["observedGeneration"]


def _condition(kind: str, value: str, reason: str, message: str) -> dict:
    return {"type": kind, "status": value, "reason": reason, "message": message}


def _set_suspended(status: dict, suspend: bool, now: str) -> None:
    if suspend:
        set_condition(status, _condition(C.COND_SUSPENDED, "True", C.REASON_SUSPENDED, C.MSG_SUSPENDED), now)
    elif condition_true(status, C.COND_SUSPENDED):
        set_condition(status, _condition(C.COND_SUSPENDED, "False", C.REASON_RESUMED, C.MSG_RESUMED), now)


def _copy_jobset_status(status: dict, jobset: dict, now: str) -> None:
    js_status = jobset.get("status") or {}
    deadline_failed = controller_failed(status)
    for source, target in (("Completed", C.COND_COMPLETE), ("Failed", C.COND_FAILED)):
        cond = find_condition(js_status, source)
        if cond is None or cond.get("status") != "True":
            continue
        if target == C.COND_FAILED and deadline_failed:
            continue
        copied = {k: v for k, v in cond.items() if k in ("status", "reason", "message", "lastTransitionTime", "observedGeneration")}
        set_condition(status, {**copied, "type": target}, now)
    jobs = [{"name": j.get("name", ""), **{k: j.get(k, 0) for k in ("ready", "succeeded", "failed", "active", "suspended")}}
            for j in js_status.get("replicatedJobsStatus") or []]
    if jobs:
        status["jobsStatus"] = jobs
    else:
        status.pop("jobsStatus", None)


def deadline(trainjob: dict, status: dict | None = None) -> dt.datetime | None:
    """When the active deadline expires (None: no deadline, suspended, or finished)."""
    spec = trainjob.get("spec") or {}
    seconds = spec.get("activeDeadlineSeconds")
    status = status if status is not None else (trainjob.get("status") or {})
    if not seconds or seconds <= 0 or spec.get("suspend") or condition_true(status, C.COND_COMPLETE) \
            or condition_true(status, C.COND_FAILED):
        return None
    resumed = find_condition(status, C.COND_SUSPENDED)
    if resumed is not None and resumed.get("status") == "False" and resumed.get("lastTransitionTime"):
        start = resumed["lastTransitionTime"]
    else:
        start = (trainjob.get("metadata") or {}).get("creationTimestamp")
    if not start:
        return None
    return parse_time(start) + dt.timedelta(seconds=seconds)


def requeue_after_seconds(trainjob: dict, now: str) -> float | None:
    """Seconds until the deadline must be checked again (None: no deadline pending)."""
    due = deadline(trainjob)
    if due is None:
        return None
    return max(0.0, (due - parse_time(now)).total_seconds())


def deadline_exceeded(status: dict) -> bool:
    """True when the JobSet must be deleted because the TrainJob ran past its deadline."""
    cond = find_condition(status, C.COND_FAILED)
    return bool(cond and cond.get("status") == "True" and cond.get("reason") == C.REASON_DEADLINE_EXCEEDED)


def controller_failed(status: dict) -> bool:
    """True when the controller itself failed the TrainJob (past its deadline, or pods the API server refuses):
    its JobSet must be deleted, and a later JobSet condition must not overwrite the reason."""
    cond = find_condition(status, C.COND_FAILED)
    return bool(cond and cond.get("status") == "True" and cond.get("reason") in C.CONTROLLER_FAILURE_REASONS)


def with_pods_refused(status: dict, message: str, now: str) -> dict:
    """`status` failed because the API server refuses the TrainJob's pods (`pod_refusals.py`)."""
    out = json_copy(status)
    set_condition(out, _condition(C.COND_FAILED, "True", C.REASON_PODS_REFUSED, message), now)
    return out


def build_status(trainjob: dict, jobset: dict | None, now: str) -> dict:
    """The status to write; `now` is an RFC 3339 time ('2025-01-02T03:04:05Z').

    Raises `InputError` (a BuildError) for a TrainJob that is not well formed."""
    from .inputs import load_trainjob

    trainjob = load_trainjob(trainjob)
    status = json_copy(trainjob.get("status") or {})
    status_conditions = status.get("conditions")
    if status_conditions is not None:
        status["conditions"] = [c for c in status_conditions if isinstance(c, dict)] if isinstance(status_conditions, list) else []
    if jobset is not None and not isinstance(jobset.get("status", {}), dict):
        jobset = None
    parse_time(now)
    spec = trainjob["spec"]
    if spec.get("managedBy", K.MANAGED_BY_CONTROLLER) != K.MANAGED_BY_CONTROLLER:
        return status
    ref = spec.get("runtimeRef") or {}
    kind, group = ref.get("kind", C.CLUSTER_TRAINING_RUNTIME_KIND), ref.get("apiGroup", K.TRAINER_GROUP)
    if group != K.TRAINER_GROUP or kind not in C.RUNTIME_KINDS:
        set_condition(status, _condition(C.COND_FAILED, "True", C.REASON_RUNTIME_NOT_SUPPORTED,
                                         f"unsupported runtime: {kind}.{group}"), now)
        return status
    _set_suspended(status, bool(spec.get("suspend")), now)
    if jobset is not None:
        _copy_jobset_status(status, jobset, now)
    due = deadline(trainjob, status)
    if due is not None and parse_time(now) >= due:
        set_condition(status, _condition(C.COND_FAILED, "True", C.REASON_DEADLINE_EXCEEDED, C.MSG_DEADLINE_EXCEEDED), now)
    return status
