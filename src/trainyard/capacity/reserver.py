"""Hold nodes for a starving gang on a live cluster (the I/O half of `capacity.reservation`).

Every `period` seconds: list nodes, active pods, PodGroups and Queues; plan the one reservation; taint the
held nodes NoSchedule (`trainyard.dev/reserved-for=<namespace>.<gang>`) and untaint the rest; give the
gang's pending pods the matching toleration (Kubernetes lets a pod gain tolerations after creation). Every
reservation taint is removed when the loop stops.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from fractions import Fraction

from trainyard import k8s as K
from trainyard.capacity.model import GPU, GROUP_ANNOTATION, nodes_from, queue_uses, weight_shares
from trainyard.capacity.reservation import Reservation, plan, taint_changes, toleration, waiting_gangs

log = logging.getLogger(__name__)
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class Reserver:
    def __init__(self, api_client, after_s: float = 20.0, period: float = 1.0):
        from kubernetes import client

        self.core, self.custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
        self.after_s, self.period = after_s, period
        self.current: Reservation | None = None
        self.history: list[tuple[float, Reservation | None]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _items(self, response) -> list[dict]:
        return json.loads(response.data).get("items") or []

    def observe(self) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
        nodes = self._items(self.core.list_node(_preload_content=False))
        pods = self._items(self.core.list_pod_for_all_namespaces(field_selector=ACTIVE_PODS, _preload_content=False))
        groups = self._items(self.custom.list_cluster_custom_object(K.VOLCANO_GROUP, K.VOLCANO_VERSION, K.PODGROUPS,
                                                                    _preload_content=False))
        queues = self._items(self.custom.list_cluster_custom_object(K.VOLCANO_GROUP, K.VOLCANO_VERSION, K.QUEUES,
                                                                    _preload_content=False))
        return nodes, pods, groups, queues

    def step(self) -> Reservation | None:
        nodes, pods, groups, queues = self.observe()
        models = nodes_from(nodes, pods)
        uses = queue_uses(queues, groups, pods)
        shares = weight_shares(uses, sum((n.allocatable.get(GPU, Fraction(0)) for n in models), Fraction(0)))
        deserved = {name: use.deserved.get(GPU) or shares.get(name, Fraction(0)) for name, use in uses.items()}
        allocated = {name: use.allocated.get(GPU, Fraction(0)) for name, use in uses.items()}
        wanted = plan(models, waiting_gangs(groups, time.time()), allocated, deserved, self.current, self.after_s)
        self._taint(nodes, wanted)
        if wanted is not None:
            self._tolerate(wanted, pods)
        if wanted != self.current:
            log.info("reservation %s", wanted)
            self.history.append((time.time(), wanted))
        self.current = wanted
        return wanted

    def _tolerate(self, reservation: Reservation, pods: list[dict]) -> None:
        namespace, name = reservation.gang
        wanted = toleration(reservation.gang)
        for pod in pods:
            metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            if (metadata.get("namespace") != namespace or (metadata.get("annotations") or {}).get(GROUP_ANNOTATION) != name
                    or spec.get("nodeName")):
                continue
            tolerations = spec.get("tolerations") or []
            if wanted not in tolerations:
                self.core.patch_namespaced_pod(metadata["name"], namespace, {"spec": {"tolerations": tolerations + [wanted]}})

    def release_all(self) -> None:
        self._taint(self._items(self.core.list_node(_preload_content=False)), None)
        self.current = None

    def _taint(self, nodes: list[dict], wanted: Reservation | None) -> None:
        taints = {n["metadata"]["name"]: (n.get("spec") or {}).get("taints") or [] for n in nodes}
        for node, new in taint_changes(taints, wanted).items():
            self.core.patch_node(node, {"spec": {"taints": new or None}})

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.step()
            except Exception:  # noqa: BLE001 - a busy API server or a conflict: the next round plans again
                log.exception("reservation round failed")
            self.stop.wait(self.period)

    def start(self) -> "Reserver":
        self.thread.start()
        return self

    def finish(self) -> list[tuple[float, Reservation | None]]:
        self.stop.set()
        self.thread.join()
        self.release_all()
        return self.history
