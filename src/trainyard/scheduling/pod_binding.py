"""Where the simulated vc-scheduler binds a job's pods (pure): `binpack` on GPUs plus the HyperNode binpack for
normal pods, a hard-topology gang in the rack (or spine) the HyperNode binpack likes best, ties broken by a seeded
draw as Volcano picks at random among equals."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from trainyard.scheduling.trace import RACK_TIER, SPINE_TIER, TraceJob

NORMAL_POD_FADING = 0.8
"""network-topology-aware's default `hypernode.binpack.normal-pod.fading`."""
@dataclass(frozen=True)
class ModelNode:
    name: str
    rack: str
    spine: str
    gpus: int


@dataclass
class NodeUse:
    nodes: list[ModelNode]
    used: dict[str, int]
    held_by: dict[str, str | None]
    """node -> the gang (job name) its reservation is for."""


def free_gpus(state: NodeUse, node: ModelNode) -> int:
    return node.gpus - state.used[node.name]


def used_in(state: NodeUse, members: Sequence[ModelNode]) -> int:
    return sum(state.used[n.name] for n in members)


class Topology:
    def __init__(self, nodes: Sequence[ModelNode]):
        self.racks: dict[str, list[ModelNode]] = {}
        self.spines: dict[str, list[ModelNode]] = {}
        for node in nodes:
            self.racks.setdefault(node.rack, []).append(node)
            self.spines.setdefault(node.spine, []).append(node)
        self.rack_gpus = {rack: sum(n.gpus for n in members) for rack, members in self.racks.items()}
        self.spine_gpus = {spine: sum(n.gpus for n in members) for spine, members in self.spines.items()}


@dataclass(frozen=True)
class DomainsUsed:
    """GPUs in use per rack and spine of the candidate nodes, summed once per pod placed (not once per candidate:
    at 1,000 nodes that sum was most of a start estimate's time)."""

    racks: dict[str, int]
    spines: dict[str, int]

    @classmethod
    def of(cls, state: NodeUse, topo: Topology, candidates: Sequence[ModelNode]) -> "DomainsUsed":
        racks = {rack: used_in(state, topo.racks[rack]) for rack in {n.rack for n in candidates}}
        spines = {spine: used_in(state, topo.spines[spine]) for spine in {n.spine for n in candidates}}
        return cls(racks, spines)


def node_score(state: NodeUse, topo: Topology, node: ModelNode, gpus: int, used: DomainsUsed) -> float:
    """binpack on GPUs plus the HyperNode binpack for normal pods (rack tier 1, spine tier 2 faded)."""
    binpack = (state.used[node.name] + gpus) / node.gpus
    rack_used, rack_total = used.racks[node.rack], topo.rack_gpus[node.rack]
    spine_used, spine_total = used.spines[node.spine], topo.spine_gpus[node.spine]
    hyper = ((rack_used + gpus) / rack_total + NORMAL_POD_FADING * (spine_used + gpus) / spine_total) / (1 + NORMAL_POD_FADING)
    return binpack + hyper


def place_pods(state: NodeUse, topo: Topology, members: Sequence[ModelNode], pods: int, gpus: int, job: str,
                rng: random.Random) -> list[str] | None:
    """Nodes for `pods` pods of `gpus` GPUs within `members`, one at a time by score; None if not all fit.
    Tentative: the caller undoes the fills when it discards the result."""
    chosen: list[str] = []
    for _ in range(pods):
        fits = [n for n in members if free_gpus(state, n) >= gpus and state.held_by[n.name] in (None, job)]
        if not fits:
            for name in chosen:
                state.used[name] -= gpus
            return None
        used = DomainsUsed.of(state, topo, fits)
        scores = [(node_score(state, topo, n, gpus, used), n) for n in fits]
        best = max(score for score, _ in scores)
        node = rng.choice([n for score, n in scores if score >= best - 1e-12])
        state.used[node.name] += gpus
        chosen.append(node.name)
    return chosen


def place(state: NodeUse, topo: Topology, job: TraceJob, rng: random.Random) -> list[str] | None:
    """Where the job's pods go now, or None (nothing is filled then)."""
    if job.tier is None:
        return place_pods(state, topo, state.nodes, job.pods, job.gpus_per_pod, job.name, rng)
    gradients = [(topo.racks, topo.rack_gpus)] if job.tier == RACK_TIER else \
        [(topo.racks, topo.rack_gpus), (topo.spines, topo.spine_gpus)] if job.tier == SPINE_TIER else []
    for domains, totals in gradients:
        solutions = []
        for name, members in sorted(domains.items()):
            chosen = place_pods(state, topo, members, job.pods, job.gpus_per_pod, job.name, rng)
            if chosen is None:
                continue
            solutions.append((used_in(state, members) / totals[name], name, chosen))
            for node in chosen:
                state.used[node] -= job.gpus_per_pod
        if solutions:
            best = max(score for score, _, _ in solutions)
            _, _, chosen = rng.choice([s for s in solutions if s[0] >= best - 1e-12])
            for node in chosen:
                state.used[node] += job.gpus_per_pod
            return chosen
    return None
