"""HyperNodes (`topology.volcano.sh/v1alpha1`) describing the network tiers for topology-aware gangs.

Tier 1 = racks (members are Nodes, by label or by exact name), tier 2 = spines (members are the
rack HyperNodes, which Volcano only accepts by exactMatch). Hand-written HyperNodes keep names
stable and need no discovery controller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from trainyard.k8s import RACK_LABEL
from trainyard.k8s import part_of_trainyard

HYPERNODE_API_VERSION = "topology.volcano.sh/v1alpha1"
RACK_TIER, SPINE_TIER = 1, 2


@dataclass(frozen=True)
class RackSpec:
    name: str
    """The rack's HyperNode name (and its label value on the nodes)."""
    spine: str = "spine-0"
    """The spine HyperNode the rack belongs to."""
    nodes: tuple[str, ...] = ()
    """Exact node names; empty means "nodes labelled <rackLabel>=<name>"."""


@dataclass(frozen=True)
class TopologySpec:
    rack_label: str = RACK_LABEL
    """The node label that names a node's rack."""
    racks: tuple[RackSpec, ...] = field(default_factory=tuple)
    """The racks; none, no HyperNodes."""


def _hypernode(name: str, tier: int, tier_name: str, members: list[dict]) -> dict:
    return {
        "apiVersion": HYPERNODE_API_VERSION,
        "kind": "HyperNode",
        "metadata": {"name": name, "labels": part_of_trainyard()},
        "spec": {"tier": tier, "tierName": tier_name, "members": members},
    }


def rack_members(rack: RackSpec, rack_label: str) -> list[dict]:
    if rack.nodes:
        return [{"type": "Node", "selector": {"exactMatch": {"name": node}}} for node in rack.nodes]
    return [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {rack_label: rack.name}}}}]


def render_hypernodes(topology: TopologySpec) -> list[dict]:
    """Racks first, then spines (a parent refers to its children by name)."""
    racks = [_hypernode(r.name, RACK_TIER, "rack", rack_members(r, topology.rack_label)) for r in topology.racks]
    spines: dict[str, list[str]] = {}
    for rack in topology.racks:
        spines.setdefault(rack.spine, []).append(rack.name)
    parents = [
        _hypernode(spine, SPINE_TIER, "spine",
                   [{"type": "HyperNode", "selector": {"exactMatch": {"name": name}}} for name in children])
        for spine, children in spines.items()
    ]
    return racks + parents


def racks_from_node_labels(nodes: Iterable[dict], rack_label: str, spine_label: str) -> tuple[RackSpec, ...]:
    """Derive racks from Node objects' topology labels (e.g. a `kubectl get nodes -o json` dump)."""
    racks: dict[str, str] = {}
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if rack_label in labels:
            racks.setdefault(labels[rack_label], labels.get(spine_label, "spine-0"))
    return tuple(RackSpec(name=name, spine=spine) for name, spine in sorted(racks.items()))
