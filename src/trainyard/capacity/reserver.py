"""Hold nodes for a starving gang on a live cluster (the I/O half of `scheduling.reservation`).

Every `period` seconds: one snapshot (`live.cluster_view`); plan the one reservation; taint the held nodes
NoSchedule (`trainyard.dev/reserved-for=<namespace>.<gang>`) and untaint the rest; give the gang's pending
pods the matching toleration (Kubernetes lets a pod gain tolerations after creation). Every reservation
taint is removed when the loop stops.
"""

from __future__ import annotations

import logging
import time

from trainyard.capacity import live
from trainyard.capacity.loop import Loop
from trainyard.scheduling.cluster_state import GROUP_ANNOTATION
from trainyard.scheduling.reservation import Reservation, plan, taint_changes, toleration, waiting_gangs
from trainyard.controller.runtime.apiserver import ApiServer

log = logging.getLogger(__name__)


def hold(api: ApiServer, nodes: list[dict], wanted: Reservation | None) -> None:
    """Taint `wanted`'s nodes for its gang and untaint every other node (None: untaint all)."""
    taints = {n["metadata"]["name"]: (n.get("spec") or {}).get("taints") or [] for n in nodes}
    for node, new in taint_changes(taints, wanted).items():
        api.merge_patch(live.NODES, node, {"spec": {"taints": new or None}})


def tolerate(api: ApiServer, gang: tuple[str, str], pods: list[dict]) -> None:
    """Give the gang's unbound pods the toleration of the nodes held for it."""
    namespace, name = gang
    wanted = toleration(gang)
    for pod in pods:
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if (metadata.get("namespace") != namespace or (metadata.get("annotations") or {}).get(GROUP_ANNOTATION) != name
                or spec.get("nodeName")):
            continue
        tolerations = spec.get("tolerations") or []
        if wanted not in tolerations:
            api.merge_patch(live.PODS, metadata["name"], {"spec": {"tolerations": tolerations + [wanted]}}, namespace)


class Reserver(Loop):
    def __init__(self, api: ApiServer, after_s: float = 20.0, period: float = 1.0):
        super().__init__(period)
        self.api, self.after_s = api, after_s
        self.current: Reservation | None = None
        self.history: list[tuple[float, Reservation | None]] = []

    def step(self) -> Reservation | None:
        view = live.cluster_view(self.api)
        wanted = plan(view.nodes, waiting_gangs(view.snapshot.pod_groups, time.time()), view.allocated, view.deserved,
                      self.current, self.after_s)
        hold(self.api, view.snapshot.nodes, wanted)
        if wanted is not None:
            tolerate(self.api, wanted.gang, view.snapshot.pods)
        if wanted != self.current:
            log.info("reservation %s", wanted)
            self.history.append((time.time(), wanted))
        self.current = wanted
        return wanted

    def finish(self) -> list[tuple[float, Reservation | None]]:
        """Stop, and remove every reservation taint."""
        self.halt()
        hold(self.api, live.snapshot(self.api, podgroup_events=False).nodes, None)
        self.current = None
        return self.history
