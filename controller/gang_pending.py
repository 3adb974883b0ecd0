"""Why a TrainJob's gang waits: the Volcano PodGroup's scheduling verdict, copied onto the TrainJob as an Event.

Volcano records why it cannot place a gang on the PodGroup (`status.conditions` type `Unschedulable`,
reason `NotEnoughResources`, a message such as "2/2 tasks in gang unschedulable: pod group is not ready,
2 Pending, 2 minAvailable; Pending: 2 Unschedulable"), which a data scientist never looks at. Upstream
Trainer has nothing for it. trainyard emits one Warning Event, reason `TrainJobGangPending`, on the
TrainJob with the PodGroup's reason and message, so `kubectl describe trainjob` shows it next to the
controller's other events.

Why an Event and not a status condition: the Kubeflow SDK calls a TrainJob "Running" only when its
status has no conditions at all (kubeflow 0.5.0, `KubernetesBackend.__get_trainjob_from_cr`), so any extra
condition left behind (even one set back to False once the gang runs) would hide a running job from the
SDK; and the status belongs to upstream's API. An Event changes neither spec nor status.

Deduplication is stateless: the Event's name is derived from the TrainJob's uid and the PodGroup's
reason and message, so repeated reconciles of the same verdict POST the same name and the API server
refuses the duplicate (409, ignored: events are best effort). A new verdict gets a new Event; a
controller restart or another replica does not repeat one. After the API server's event TTL (1 h by
default) a still-pending gang is reported once more.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable

from trainyard import k8s as K
from trainyard.timestamps import parse_time

from . import k8s

EVENT_REASON = "TrainJobGangPending"
UNSCHEDULABLE = "Unschedulable"
# PodGroup phases in which the gang has not started (Volcano: Pending before enqueue, Inqueue after).
WAITING_PHASES = ("", "Pending", "Inqueue", "Unknown")


@dataclass(frozen=True)
class GangPending:
    pod_group: str
    queue: str | None
    phase: str
    reason: str
    message: str
    cause: str = ""
    since: str = ""  # the condition's lastTransitionTime
    """Why Volcano did not admit the gang into its queue (phase Pending): its PodGroup event, e.g.
    "queue resource quota insufficient: insufficient nvidia.com/gpu" or "resource in cluster is overused: ..."."""


def _is_gang_summary(message: str) -> bool:
    """Volcano's gang plugin summary ("2/2 tasks in gang unschedulable: ..."), also mirrored as an event."""
    return "tasks in gang unschedulable" in message


ENQUEUE_WINDOW_SECONDS = 30


def enqueue_cause(events: Iterable[dict], pod_group: dict) -> str:
    """Volcano's enqueue verdicts for `pod_group`: its `Unschedulable` events other than the gang summary, those
    seen within 30 s of the newest (several plugins refuse in the same session, e.g. `proportion`'s "queue
    resource quota insufficient" and `overcommit`'s "resource in cluster is overused"), sorted and joined."""
    meta = K.mapping(pod_group.get("metadata"))
    found = []
    for event in events:
        involved = K.mapping(event.get("involvedObject"))
        if involved.get("kind") != "PodGroup" or involved.get("name") != meta.get("name") \
                or (meta.get("uid") and involved.get("uid") and involved.get("uid") != meta.get("uid")):
            continue
        message = str(event.get("message") or "")
        if event.get("reason") != UNSCHEDULABLE or not message or _is_gang_summary(message):
            continue
        try:
            when = parse_time(event.get("lastTimestamp") or event.get("eventTime") or "")
        except ValueError:
            when = None
        found.append((when, message))
    if not found:
        return ""
    times = [when for when, _ in found if when is not None]
    newest = max(times) if times else None
    recent = {message for when, message in found
              if newest is None or when is None or (newest - when).total_seconds() <= ENQUEUE_WINDOW_SECONDS}
    return "; ".join(sorted(recent))


def waiting(group: dict) -> dict | None:
    """The True `Unschedulable` condition of a Volcano PodGroup whose gang has not started, else None.

    A PodGroup that runs (phase Running/Completed, or as many running pods as minMember) waits for nothing,
    whatever stale condition it still carries."""
    if group.get("kind") != "PodGroup" or group.get("apiVersion") != K.VOLCANO_API_VERSION:
        return None
    status = K.mapping(group.get("status"))
    if status.get("phase", "") not in WAITING_PHASES:
        return None
    if int(status.get("running") or 0) >= int(K.mapping(group.get("spec")).get("minMember") or 1):
        return None
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)
                  and c.get("type") == UNSCHEDULABLE and c.get("status") == "True"]
    if conditions:
        return max(conditions, key=lambda c: str(c.get("lastTransitionTime") or ""))
    if status.get("phase") == "Pending" and not status.get("conditions"):
        return not_admitted_condition(group)
    return None


NOT_ADMITTED_REASON = "NotAdmitted"


def not_admitted_condition(group: dict) -> dict:
    """What stands for the condition of a gang Volcano keeps out of its queue before any of its pods exists (a
    tenant gang, whose JobSet waits suspended): Volcano's gang plugin sets no condition on a group without pods,
    and says why only in the group's events (`enqueue_cause`). Dated from the group's creation."""
    return {"type": UNSCHEDULABLE, "status": "True", "reason": NOT_ADMITTED_REASON,
            "message": "no pod is created until Volcano admits the whole gang into its queue",
            "lastTransitionTime": K.mapping(group.get("metadata")).get("creationTimestamp") or ""}


def gang_pending(pod_groups: Iterable[dict], events: Iterable[dict] = ()) -> GangPending | None:
    """The verdict for the first waiting Volcano PodGroup (None when none waits).

    `events`: the PodGroups' events; Volcano reports why it keeps a gang out of its queue (phase Pending)
    only there (its condition then carries the gang plugin's generic summary)."""
    events = list(events)
    for group in pod_groups:
        condition = waiting(group)
        if condition is None:
            continue
        phase = str(K.mapping(group.get("status")).get("phase") or "Pending")
        return GangPending(pod_group=k8s.name_of(group), queue=K.mapping(group.get("spec")).get("queue"),
                           phase=phase, reason=str(condition.get("reason") or UNSCHEDULABLE),
                           message=str(condition.get("message") or ""),
                           cause=enqueue_cause(events, group) if phase == "Pending" else "",
                           since=str(condition.get("lastTransitionTime") or ""))
    return None


RECHECK_SECONDS, RECHECK_WINDOW_SECONDS = 5.0, 60.0


def recheck_after(pending: GangPending | None, now: str) -> float | None:
    """Volcano records its enqueue verdict as an event, asynchronously, around the time it sets the condition
    that triggered this reconcile: while a fresh (< 60 s) Pending verdict has no cause yet, look again in 5 s."""
    if pending is None or pending.phase != "Pending" or pending.cause or not pending.since:
        return None
    try:
        age = (parse_time(now) - parse_time(pending.since)).total_seconds()
    except ValueError:
        return None
    return RECHECK_SECONDS if age < RECHECK_WINDOW_SECONDS else None


def event_message(pending: GangPending) -> str:
    """One line in the user's words: where it waits, the scheduler's verdict, then the PodGroup's condition."""
    if pending.phase == "Pending":
        head = "gang waits to enter" + (f" queue {pending.queue}" if pending.queue else "")
        head += f": {pending.cause}" if pending.cause else ""
    else:
        head = "gang admitted" + (f" in queue {pending.queue}" if pending.queue else "") + " but cannot be placed on nodes"
    detail = f"PodGroup {pending.pod_group} {UNSCHEDULABLE}/{pending.reason}"
    detail += f": {pending.message}" if pending.message else ""
    return f"{head} ({detail})"


def event_name(trainjob: dict, pending: GangPending) -> str:
    """Deterministic per (TrainJob uid, verdict): the same verdict is reported once."""
    meta = K.mapping(trainjob.get("metadata"))
    text = "\0".join([str(meta.get("uid", "")), pending.phase, pending.reason, pending.message, pending.cause])
    return f"{meta.get('name', '')}.gangpending.{hashlib.sha256(text.encode()).hexdigest()[:12]}"


__all__ = ["EVENT_REASON", "GangPending", "recheck_after", "gang_pending", "enqueue_cause", "waiting", "event_message", "event_name"]
