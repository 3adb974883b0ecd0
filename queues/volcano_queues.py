"""Volcano Queues (`scheduling.volcano.sh/v1beta1`, cluster-scoped), one per tenant plus optional parents.

The tenant API stores weight, capability, deserved and guarantee whatever the queue plugin is,
so switching between `proportion` and `capacity` is a scheduler-config change, not a tenant edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from trainyard.k8s import VOLCANO_API_VERSION
from trainyard.queues.resources import as_strings, over

RESERVED_QUEUES = ("root", "default")
"""Created by vc-scheduler at startup; tenants must not claim them."""


@dataclass(frozen=True)
class QueueSpec:
    name: str
    """The Volcano queue's name."""
    weight: int = 1
    """Its share of the cluster relative to the other queues."""
    capability: Mapping[str, object] = field(default_factory=dict)
    """The most the queue may hold; a tenant's queue defaults to its quota."""
    deserved: Mapping[str, object] = field(default_factory=dict)
    """What the queue is entitled to; above it, it borrows."""
    guarantee: Mapping[str, object] = field(default_factory=dict)
    """Resources reserved for the queue."""
    reclaimable: bool = True
    """Whether other queues may reclaim what it borrowed."""
    parent: str | None = None
    """The parent queue (hierarchical queues, capacity plugin only)."""
    priority: int | None = None
    """The queue's priority among queues."""


def ordering_problems(spec: QueueSpec) -> list[tuple[str, str, str]]:
    """(field, message, fix) where guarantee <= deserved <= capability fails, as Volcano's webhook checks."""
    out = []
    for name in over(spec.deserved, spec.capability):
        out.append((f"deserved.{name}", f"deserved {spec.deserved[name]} is above capability {spec.capability[name]}",
                    "lower deserved or raise capability"))
    for name in over(spec.guarantee, spec.deserved or spec.capability):
        out.append((f"guarantee.{name}", f"guarantee {spec.guarantee[name]} is above deserved/capability",
                    "lower the guarantee"))
    for name in spec.guarantee:
        if spec.deserved and name not in spec.deserved:
            out.append((f"guarantee.{name}", "a guarantee needs a deserved value for the same resource",
                        f"add deserved.{name}"))
    return out


def render_queue(spec: QueueSpec, labels: Mapping[str, str] | None = None) -> dict:
    """One Queue object; empty resource lists are left out so Volcano's defaults apply."""
    body: dict = {"weight": spec.weight, "reclaimable": spec.reclaimable}
    for key, resources in (("capability", spec.capability), ("deserved", spec.deserved)):
        if resources:
            body[key] = as_strings(resources)
    if spec.guarantee:
        body["guarantee"] = {"resource": as_strings(spec.guarantee)}
    if spec.parent:
        body["parent"] = spec.parent
    if spec.priority is not None:
        body["priority"] = spec.priority
    metadata: dict = {"name": spec.name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": VOLCANO_API_VERSION, "kind": "Queue", "metadata": metadata, "spec": body}
