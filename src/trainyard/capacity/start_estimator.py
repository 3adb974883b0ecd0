"""Start estimates as Events on the TrainJobs that wait (the I/O half of `capacity.estimates`).

Every `period` seconds, while this replica leads: one snapshot, every waiting gang's estimate from the same model
`trainyard fit` and `report` use, and on each waiting gang's TrainJob one Normal Event, reason
`TrainJobStartEstimate`: "starts in about 12 min (around 14:05 UTC), position 3 in queue team-a (if nothing else
arrives; ...)". Each tenant's estimates read only its own trainers' reports of the time they have left
(`estimates.reports_one_tenant_may_see`), so no Event tells one tenant another's. One Event per TrainJob, updated in place (its name is fixed per TrainJob uid), and only when what
it says moves (`needs_writing`): the position or queue, or the expected start by more than 2 min and 20 %, or it
is 30 min old (the API server drops Events after an hour). `kubectl describe trainjob` shows the last one.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from trainyard import k8s as K
from trainyard.capacity import estimates, live
from trainyard.capacity.loop import Loop
from trainyard.scheduling.cluster_state import meta
from trainyard.controller.runtime.apiserver import ApiServer, event_body
from trainyard.controller.runtime.transport import ApiError
from trainyard.timestamps import now_time
from trainyard.scheduling.estimate import DEFAULT_RUN_S, StartEstimate, phrase

log = logging.getLogger(__name__)

REASON = "TrainJobStartEstimate"
COMPONENT = "trainyard-start-estimator"
MOVED_S, MOVED_FRACTION = 120.0, 0.2
"""An expected start that moved less than this (both) is not written again."""
REFRESH_S = 1800.0
"""Rewritten at least this often: the API server's Event TTL is one hour by default."""


@dataclass(frozen=True)
class Written:
    """What the Event of one TrainJob last said."""

    position: int
    queue: str
    starts_at_s: float | None
    """Expected start, epoch seconds (None: not within the model's horizon)."""
    at_s: float
    guessed: bool = False
    """It said there is no estimate (the start was the default run time's)."""


def needs_writing(previous: Written | None, found: StartEstimate, now_s: float) -> bool:
    """Whether the TrainJob's Event must say something new (pure)."""
    if previous is None or now_s - previous.at_s >= REFRESH_S:
        return True
    if (previous.position, previous.queue, previous.guessed) != (found.position, found.queue, found.guessed):
        return True
    if found.guessed:
        return False
    if (previous.starts_at_s is None) != (found.start_in_s is None):
        return True
    if found.start_in_s is None or previous.starts_at_s is None:
        return False
    moved = abs(now_s + found.start_in_s - previous.starts_at_s)
    return moved > MOVED_S and moved > MOVED_FRACTION * max(found.start_in_s, 1.0)


def event_message(found: StartEstimate, now_s: float, default_run_s: float) -> str:
    """The estimate's words, with the clock time it points at (an Event is read minutes after it was written)."""
    words = phrase(found)
    if found.guessed:
        return words
    if found.start_in_s is not None and found.start_in_s >= 30:
        at = dt.datetime.fromtimestamp(now_s + found.start_in_s, dt.timezone.utc).strftime("%H:%M UTC")
        head, _, where = words.partition(", ")
        words = f"{head} (around {at}), {where}"
    return f"{words} ({estimates.ASSUMPTION.format(minutes=default_run_s / 60)})"


def estimate_annotations(found: StartEstimate, now_s: float) -> dict[str, str | None]:
    """The Event's estimate for programs (the start_estimates_live bench, dashboards), pure: when the gang is
    expected to start and when that was estimated, epoch seconds; no expected start when the Event says there is no
    estimate (None removes a key in a merge patch)."""
    expected = None if found.guessed or found.start_in_s is None else f"{now_s + found.start_in_s:.1f}"
    return {K.EXPECTED_START_ANNOTATION: expected, K.ESTIMATED_AT_ANNOTATION: f"{now_s:.1f}"}


def trainjob_owners(pod_groups: Iterable[dict]) -> dict[str, dict]:
    """namespace/PodGroup -> the TrainJob owning it, as an Event's involvedObject."""
    out = {}
    for group in pod_groups:
        for owner in meta(group).get("ownerReferences") or []:
            if owner.get("kind") == "TrainJob" and owner.get("controller"):
                namespace = meta(group).get("namespace", "")
                out[estimates.group_key(namespace, meta(group).get("name", ""))] = {
                    "apiVersion": owner.get("apiVersion"), "kind": "TrainJob", "name": owner.get("name"),
                    "namespace": namespace, "uid": owner.get("uid")}
    return out


def event_name(trainjob: dict) -> str:
    return f"{trainjob['name']}.startestimate.{str(trainjob.get('uid') or '')[:8]}"


def estimate_event(trainjob: dict, message: str, now: str, annotations: dict[str, str | None] | None = None) -> dict:
    body = event_body(trainjob, REASON, message, event_type="Normal", action="Estimating", component=COMPONENT,
                      name=event_name(trainjob), namespace=trainjob["namespace"], now=now)
    kept = {key: value for key, value in (annotations or {}).items() if value is not None}
    if kept:
        body["metadata"]["annotations"] = kept
    return body


def write_event(api: ApiServer, trainjob: dict, message: str, annotations: dict[str, str | None] | None = None) -> None:
    """Update the TrainJob's estimate Event in place, or create it."""
    now = now_time()
    patch: dict = {"message": message[:1000], "lastTimestamp": now}
    if annotations:
        patch["metadata"] = {"annotations": annotations}
    try:
        api.merge_patch(live.EVENTS, event_name(trainjob), patch, trainjob["namespace"])
    except ApiError as exc:
        if exc.status != 404:
            raise
        api.create(estimate_event(trainjob, message, now, annotations))


def told_to_their_tenants(per_namespace: dict[str, estimates.EstimateInputs]) -> list[tuple[str, StartEstimate]]:
    """Each namespace's waiting gangs' estimates, from the inputs that namespace may see (pure)."""
    return [(key, found) for namespace, given in sorted(per_namespace.items())
            for key, found in sorted(estimates.estimates(given).items()) if estimates.namespace_of(key) == namespace]


class StartEstimator(Loop):
    def __init__(self, api: ApiServer, period: float = 60.0, default_run_s: float = DEFAULT_RUN_S,
                 leading: Callable[[], bool] = lambda: True):
        super().__init__(period)
        self.api, self.default_run_s, self.leading = api, default_run_s, leading
        self.written: dict[str, Written] = {}

    def step(self) -> int:
        """One round; returns how many Events it wrote."""
        if not self.leading():
            self.written.clear()  # another replica writes them; start afresh if this one leads again
            return 0
        snap = live.snapshot(self.api, podgroup_events=False)  # the estimates read no Event
        waiting = estimates.waiting_count(snap.pod_groups)
        if not waiting:
            self.written.clear()
            return 0
        if waiting > estimates.MOST_PENDING:  # decided before the TrainJobs and PriorityClasses are read
            log.warning("%d waiting gangs: start estimates skipped above %d", waiting, estimates.MOST_PENDING)
            return 0
        owners = trainjob_owners(snap.pod_groups)
        per_namespace = live.estimate_inputs(self.api, snap, self.default_run_s,
                                             for_namespaces=sorted({owner["namespace"] for owner in owners.values()}))
        now_s, wrote, seen = time.time(), 0, set()
        for key, found in told_to_their_tenants(per_namespace):
            trainjob = owners.get(key)
            if trainjob is None:
                continue
            name = event_name(trainjob)
            seen.add(name)
            if not needs_writing(self.written.get(name), found, now_s):
                continue
            try:
                write_event(self.api, trainjob, event_message(found, now_s, self.default_run_s),
                            estimate_annotations(found, now_s))
            except ApiError as exc:  # the TrainJob's namespace is going away, or events are not allowed
                log.warning("start estimate of %s/%s not written: %s", trainjob["namespace"], trainjob["name"], exc)
                continue
            self.written[name] = Written(found.position, found.queue,
                                         None if found.start_in_s is None else now_s + found.start_in_s, now_s,
                                         found.guessed)
            wrote += 1
        self.written = {name: w for name, w in self.written.items() if name in seen}
        return wrote
