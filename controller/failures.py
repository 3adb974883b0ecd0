"""Reconcile failures as the user sees them: a status condition and one Warning event per distinct cause.

Upstream only emits the event `TrainJobResourcesCreationFailed` on every retry and leaves the status
alone (a TODO in its reconciler), so a TrainJob whose children the API server refuses just hangs.
trainyard keeps upstream's event reason and adds the condition `ResourcesCreationFailed` (True, with the
API server's own message) while the cause lasts; it is removed by the first successful reconcile, so the
SDK, which calls a TrainJob Running only when it has no conditions, is not misled afterwards.

Two causes are caught before the API server would report them far from the TrainJob: a Volcano queue that
does not exist (the PodGroup would wait forever) and a gang larger than a ResourceQuota's hard limit (the
Job controller would create part of the gang and record the refusal on a Job nobody looks at).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable

from trainyard.k8s import QUEUES, VOLCANO_GROUP, resource_name
from trainyard.k8s import format_quantity, parse_quantity

from trainyard import k8s as K
from . import constants as C
from . import dra, k8s
from .resources import pod_requests
from .status import find_condition, set_condition

MAX_MESSAGE = 950  # the event message limit is 1024 characters, as upstream truncates


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str


def api_failure(exc) -> Failure:
    """An ApiError (status, reason, body) as the API server phrased it."""
    message = ""
    try:
        message = (json.loads(exc.body or "{}") or {}).get("message", "")
    except (TypeError, ValueError):
        message = str(exc.body or "")
    return Failure(C.REASON_APPLY_FAILED, _clip(message or f"{exc.status} {exc.reason}"))


def build_failure(message: str, runtime_missing: bool) -> Failure:
    return Failure(C.REASON_RUNTIME_NOT_FOUND if runtime_missing else C.REASON_BUILD_FAILED, _clip(message))


def _clip(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + " ..."


def with_failure(status: dict, failure: Failure | None, now: str) -> dict:
    """`status` with the failure condition set (failure) or removed (None; a list left empty becomes None,
    which the status merge patch turns into "no conditions")."""
    out = dict(status)
    if failure is None:
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != C.COND_RESOURCES_CREATION_FAILED]
        if len(conditions) != len(status.get("conditions") or []):
            out["conditions"] = conditions or None
        return out
    out["conditions"] = [dict(c) for c in status.get("conditions") or []]
    set_condition(out, {"type": C.COND_RESOURCES_CREATION_FAILED, "status": "True", "reason": failure.reason,
                        "message": failure.message}, now)
    return out


def is_new(old_status: dict, failure: Failure) -> bool:
    """True unless the TrainJob already shows this very failure (one event per cause, no event storm)."""
    current = find_condition(old_status or {}, C.COND_RESOURCES_CREATION_FAILED)
    return not (current and current.get("status") == "True" and current.get("reason") == failure.reason
                and current.get("message") == failure.message)


def event_message(failure: Failure) -> str:
    return f"TrainJob resources reconciliation failed: {failure.reason}: {failure.message}"


# ---- pre-flight checks on the objects about to be applied -------------------------------------

def volcano_queues(objects: Iterable[dict]) -> list[str]:
    """Queues named by the Volcano PodGroups about to be applied."""
    return [o["spec"]["queue"] for o in objects if o.get("kind") == "PodGroup"
            and o.get("apiVersion") == K.VOLCANO_API_VERSION and o["spec"].get("queue")]


def queue_failure(missing: list[str]) -> Failure | None:
    if not missing:
        return None
    return Failure(C.REASON_QUEUE_NOT_FOUND, f'Volcano queue "{missing[0]}" not found: {resource_name(QUEUES, VOLCANO_GROUP)} '
                   f'"{missing[0]}" not found; the PodGroup would never be scheduled (ask the platform team to '
                   "restore the queue, or name an existing one)")


def _gang(jobset: dict, templates: Iterable[dict] = ()) -> list[tuple[str | None, int, dict[str, Fraction]]]:
    """(priorityClassName, pods, requests per pod) for each replicated job of a JobSet; with the
    ResourceClaimTemplates its pods claim from (`templates`), the devices of each class too."""
    templates = list(templates)
    out = []
    for job in k8s.replicated_jobs(jobset.get("spec") or {}):
        spec = k8s.job_spec(job)
        pods = int(job.get("replicas", 1)) * int(spec.get("parallelism", 1))
        pod = (spec.get("template") or {}).get("spec") or {}
        devices = {key: Fraction(count) for key, count in dra.pod_devices(pod, templates, k8s.namespace_of(jobset)).items()}
        out.append((pod.get("priorityClassName"), pods, {**pod_requests(pod), **devices}))
    return out


def _scope_matches(quota: dict, priority_class: str | None) -> bool | None:
    """Whether a quota applies to pods of this class; None for scopes this check does not model."""
    spec = quota.get("spec") or {}
    if spec.get("scopes"):
        return None
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        if expr.get("scopeName") != "PriorityClass":
            return None
        operator, values = expr.get("operator"), expr.get("values") or []
        ok = {"In": priority_class in values, "NotIn": priority_class not in values,
              "Exists": priority_class is not None, "DoesNotExist": priority_class is None}.get(operator)
        if not ok:
            return False
    return True


def _quota_key(resource: str) -> list[str]:
    if resource.endswith(K.DRA_DEVICES_QUOTA_SUFFIX):
        return [resource]
    return [f"requests.{resource}", resource] if resource in ("cpu", "memory") else [f"requests.{resource}"]


def quota_overrun(jobset: dict, quotas: Iterable[dict], objects: Iterable[dict] = ()) -> tuple[dict, str, Fraction] | None:
    """(quota, key, what the gang needs) for the first ResourceQuota whose hard limit the whole gang exceeds
    (`objects`: where the ResourceClaimTemplates its pods claim from are found)."""
    gang = _gang(jobset, objects)
    for quota in quotas:
        hard = (quota.get("spec") or {}).get("hard") or {}
        totals: dict[str, Fraction] = {}
        for priority_class, pods, requests in gang:
            if not _scope_matches(quota, priority_class):
                continue
            totals["pods"] = totals.get("pods", Fraction(0)) + pods
            for resource, amount in requests.items():
                for key in _quota_key(resource):
                    totals[key] = totals.get(key, Fraction(0)) + amount * pods
        for key in sorted(totals):
            if key in hard and totals[key] > parse_quantity(hard[key], f"{k8s.name_of(quota)}.spec.hard.{key}"):
                return quota, key, totals[key]
    return None


QUOTA_FIX = "reduce numNodes or the resources per node, or ask for a larger quota"


def quota_failure(jobset: dict, quotas: Iterable[dict], objects: Iterable[dict] = ()) -> Failure | None:
    """The first ResourceQuota whose hard limit the whole gang exceeds (it could never run in this namespace)."""
    found = quota_overrun(jobset, quotas, objects)
    if found is None:
        return None
    quota, key, need = found
    hard = quota["spec"]["hard"][key]
    return Failure(C.REASON_QUOTA_EXCEEDED,
                   f'the gang needs {key}={format_quantity(need)} but ResourceQuota "{k8s.name_of(quota)}" allows at '
                   f"most {key}={hard} in namespace {k8s.namespace_of(jobset)}; it could never start ({QUOTA_FIX})")


def quota_never_fits(jobset: dict, quotas: Iterable[dict], objects: Iterable[dict] = ()) -> str | None:
    """`trainyard fit`'s words for a gang beyond a quota's hard limit (admission refuses it at create)."""
    found = quota_overrun(jobset, quotas, objects)
    if found is None:
        return None
    quota, key, need = found
    return (f"quota {k8s.name_of(quota)} in {k8s.namespace_of(jobset)} allows {key} {quota['spec']['hard'][key]}, "
            f"this job needs {format_quantity(need)}: it can never start; {QUOTA_FIX}")
