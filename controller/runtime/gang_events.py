"""Post the waiting gang's verdict as a Warning event on its TrainJob (the I/O half of `gang_pending`).

The verdict itself (`trainyard.controller.gang_pending`) is pure and shared with `trainyard fit`; this module
lists the PodGroup's events and writes the TrainJob's event, once per verdict (the event's name is derived
from it, so the API server refuses a duplicate).
"""

from __future__ import annotations

from typing import Iterable

from trainyard import k8s as K

from .. import k8s
from ..gang_pending import EVENT_REASON, GangPending, event_message, event_name, gang_pending, waiting
from .apiserver import RESOURCES, ApiView
from .transport import ApiError


def _pod_group_events(api: ApiView, group: dict) -> list[dict]:
    selector = f"involvedObject.kind=PodGroup,involvedObject.name={k8s.name_of(group)}"
    try:
        return api.list(RESOURCES["Event"], k8s.namespace_of(group), field_selector=selector).get("items") or []
    except ApiError as exc:
        if exc.status == 403:  # a controller deployed without `list events`: the condition alone
            return []
        raise


def report(api: ApiView, trainjob: dict, existing: Iterable[dict]) -> GangPending | None:
    """Emit the Event for the TrainJob's waiting gang among `existing` (what reconcile read); returns the verdict.

    The PodGroup's events are only listed when its condition says it waits. A suspended TrainJob waits on
    purpose (its JobSet has no pods): nothing is reported."""
    if K.mapping(trainjob.get("spec")).get("suspend"):
        return None
    name, namespace = k8s.name_of(trainjob), k8s.namespace_of(trainjob)
    own = [o for o in existing if o.get("kind") == "PodGroup" and k8s.name_of(o) == name
           and k8s.namespace_of(o) == namespace and waiting(o) is not None]
    if not own:
        return None
    pending = gang_pending(own, _pod_group_events(api, own[0]))
    if pending is not None:
        api.event(trainjob, EVENT_REASON, event_message(pending), name=event_name(trainjob, pending))
    return pending
