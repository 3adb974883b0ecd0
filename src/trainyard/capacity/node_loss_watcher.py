"""The controller's node-loss loop (the I/O half of `capacity.node_loss`): every `period` seconds, while this
replica leads, each lost node's pods are read and every TrainJob with a pod there gets a Warning Event
`NodeLost` (once per loss: the Event's name carries the node and when it was lost) that says what Kubernetes and
JobSet's failure policy will do with it."""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Callable

from trainyard import k8s as K
from trainyard.capacity import node_loss
from trainyard.capacity.loop import Loop
from trainyard.controller.runtime.apiserver import RESOURCES, ApiServer, Resource

log = logging.getLogger(__name__)

NODES = Resource("v1", "Node", "nodes", namespaced=False)


class NodeLossWatcher(Loop):
    def __init__(self, api: ApiServer, period: float = 10.0, leading: Callable[[], bool] = lambda: True):
        super().__init__(period)
        self.api, self.leading = api, leading

    def step(self) -> list[str]:
        """One round; returns the Events' names posted (or already there)."""
        if not self.leading():
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
                jobset = self.api.get(RESOURCES["JobSet"], name, namespace)
                event = node_loss.event_name(name, trainjob["metadata"]["uid"], node)
                self.api.event({**trainjob, "apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob"},
                               node_loss.REASON, node_loss.message(node, stranded, jobset),
                               component="trainyard-node-loss", name=event)
                posted.append(event)
        return posted
