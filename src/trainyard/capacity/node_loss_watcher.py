"""The controller's node-loss loop (the I/O half of `capacity.node_loss`): every `period` seconds, while this
replica leads, each lost node's pods are read and every TrainJob with a pod there gets a Warning Event
`NodeLost` (once per loss: the Event's name carries the node and when it was lost) that says what Kubernetes and
JobSet's failure policy will do with it; its evicted pods are deleted for good `release_after_s` after their grace
period (Event `NodeLostPodsDeleted`), so that JobSet can recreate the gang."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Callable

from trainyard import k8s as K
from trainyard.capacity import node_loss
from trainyard.capacity.loop import Loop
from trainyard.controller.runtime.apiserver import RESOURCES, ApiServer, Resource

log = logging.getLogger(__name__)

NODES = Resource("v1", "Node", "nodes", namespaced=False)


class NodeLossWatcher(Loop):
    def __init__(self, api: ApiServer, period: float = 10.0, leading: Callable[[], bool] = lambda: True,
                 release_after_s: float | None = 60.0, clock: Callable[[], float] = time.time):
        """`release_after_s`: None never deletes an evicted pod (the node's return or an operator does)."""
        super().__init__(period)
        self.api, self.leading, self.release_after_s, self.clock = api, leading, release_after_s, clock
        self.posted: set[str] = set()  # NodeLost Events this replica posted: not read and posted again each round

    def step(self) -> list[str]:
        """One round; returns the Events' names posted (or already there)."""
        if not self.leading():
            self.posted.clear()
            return []
        lost = [n for n in map(node_loss.lost_node, self.api.list(NODES).get("items") or []) if n]
        if not lost:
            return []
        trainjobs = self.api.list(RESOURCES["TrainJob"]).get("items") or []
        names: dict[str, list[str]] = defaultdict(list)
        for trainjob in trainjobs:
            names[trainjob["metadata"]["namespace"]].append(trainjob["metadata"]["name"])
        by_key = {(t["metadata"]["namespace"], t["metadata"]["name"]): t for t in trainjobs}
        posted = []
        for node in lost:
            pods = self.api.list(RESOURCES["Pod"], field_selector=f"spec.nodeName={node.name}").get("items") or []
            for (namespace, name), stranded in sorted(node_loss.stranded(pods, names).items()):
                trainjob = by_key[(namespace, name)]
                event = node_loss.event_name(name, trainjob["metadata"]["uid"], node)
                involved = {**trainjob, "apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob"}
                if event not in self.posted:  # a new leader posts again: the fixed name makes that a no-op
                    jobset = self.api.get(RESOURCES["JobSet"], name, namespace)
                    self.api.event(involved, node_loss.REASON, node_loss.message(node, stranded, jobset),
                                   component="trainyard-node-loss", name=event)
                    self.posted.add(event)
                posted.append(event)
                if self.release_after_s is not None:
                    self.release(involved, node, stranded)
        return posted

    def release(self, trainjob: dict, node: node_loss.LostNode, pods: list[dict]) -> None:
        due = [p for p in pods if node_loss.due_for_release(p, self.clock(), float(self.release_after_s or 0))]
        for pod in due:
            self.api.delete(RESOURCES["Pod"], pod["metadata"]["name"], pod["metadata"]["namespace"],
                            propagation="Background", grace_seconds=0)
            log.info("deleted pod %s/%s evicted from lost node %s", pod["metadata"]["namespace"],
                     pod["metadata"]["name"], node.name)
        if due:
            self.api.event(trainjob, node_loss.RELEASED_REASON, node_loss.released_message(node, due),
                           component="trainyard-node-loss")
