"""Which nodes to hold for a starving gang (pure): backfill with one reservation, as batch schedulers do.

With an elastic queue plugin (Volcano `capacity`: a queue may use idle GPUs beyond its deserved share) no
GPU idles while any job fits, but a big hard-topology gang of a queue under its share can wait for ever:
every GPU that frees up in its rack is taken by smaller jobs first. Volcano v1.14 has no reservation
(`sla` cannot hold resources for a gang: the gang plugin vetoes pipelining a partial gang). This plans one:
the gang of the queue furthest below its deserved share that has waited at least `after_s` gets the
`pods` nodes of one allowed domain (rack for tier 1, spine for tier 2, any for none) that hold the fewest
GPUs in use; those nodes are tainted NoSchedule for everyone but that gang, so they drain while the rest of
the cluster stays in use. The reservation is kept until the gang is placed or gone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping

from trainyard import k8s as K
from trainyard.scheduling.cluster_state import GPU, Node, waiting_groups
from trainyard.scheduling.placement import ANYWHERE, Placement
from trainyard.timestamps import parse_time

MAX_TAINT_VALUE = 63


@dataclass(frozen=True)
class WaitingGang:
    key: tuple[str, str]
    """(namespace, PodGroup name)."""
    queue: str
    pods: int
    gpus_per_pod: Fraction
    tier: int | None
    """Hard network topology: highest HyperNode tier allowed (1 rack, 2 spine), None: anywhere."""
    waiting_s: float
    placement: Placement = ANYWHERE
    """The node constraints of its pods (`scheduling.placement`): nodes it cannot use are never freed for it."""

    def may_use(self, node: Node) -> bool:
        return self.placement.allows(node.name, node.labels, node.taints)


@dataclass(frozen=True)
class Reservation:
    gang: tuple[str, str]
    nodes: tuple[str, ...]

    @property
    def taint_value(self) -> str:
        return taint_value(self.gang)


def taint_value(gang: tuple[str, str]) -> str:
    """`namespace.name`, or a digest when that would not fit a label value (63 characters)."""
    text = f"{gang[0]}.{gang[1]}"
    if len(text) <= MAX_TAINT_VALUE:
        return text
    return f"{text[:46]}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def toleration(gang: tuple[str, str]) -> dict:
    """What the gang's own pods carry to use the nodes held for them."""
    return {"key": K.RESERVATION_TAINT, "operator": "Equal", "value": taint_value(gang), "effect": "NoSchedule"}


def waiting_gangs(pod_groups: Iterable[dict], now_s: float) -> list[WaitingGang]:
    """PodGroups of two or more pods that wait (Pending/Inqueue) for GPUs; `now_s` in epoch seconds."""
    return [WaitingGang(key=w.key, queue=w.queue, pods=w.pods, gpus_per_pod=w.gpus / w.pods, tier=w.tier,
                        waiting_s=max(0.0, now_s - parse_time(w.created).timestamp()) if w.created else 0.0)
            for w in waiting_groups(pod_groups) if w.pods >= 2]


def waiting_gpus(pod_groups: Iterable[dict]) -> dict[str, Fraction]:
    """Queue -> GPUs of its PodGroups that wait (no member running yet)."""
    out: dict[str, Fraction] = {}
    for waiting in waiting_groups(pod_groups):
        out[waiting.queue] = out.get(waiting.queue, Fraction(0)) + waiting.gpus
    return out


def domain_of(node: Node, tier: int | None) -> str:
    return node.rack if tier == 1 else node.spine if tier == 2 else ""


def cheapest_nodes(nodes: Iterable[Node], gang: WaitingGang) -> tuple[str, ...] | None:
    """The gang's `pods` nodes in one allowed domain with the fewest GPUs in use (ties: domain, node name),
    or None when no domain has enough nodes big enough for one pod."""
    domains: dict[str, list[Node]] = {}
    for node in nodes:
        if node.schedulable and node.allocatable.get(GPU, 0) >= gang.gpus_per_pod and gang.may_use(node):
            domains.setdefault(domain_of(node, gang.tier), []).append(node)
    best: tuple[Fraction, str, tuple[str, ...]] | None = None
    for domain, members in domains.items():
        if len(members) < gang.pods:
            continue
        chosen = sorted(members, key=lambda n: (n.used.get(GPU, Fraction(0)), n.name))[:gang.pods]
        cost = sum((n.used.get(GPU, Fraction(0)) for n in chosen), Fraction(0))
        candidate = (cost, domain, tuple(sorted(n.name for n in chosen)))
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    return None if best is None else best[2]


def queue_share(allocated: Mapping[str, Fraction], deserved: Mapping[str, Fraction], queue: str) -> Fraction | None:
    """Allocated / deserved GPUs; None for a queue with no deserved share (never reserved for)."""
    owed = deserved.get(queue, Fraction(0))
    return None if owed <= 0 else allocated.get(queue, Fraction(0)) / owed


def plan(nodes: list[Node], gangs: list[WaitingGang], allocated: Mapping[str, Fraction],
         deserved: Mapping[str, Fraction], current: Reservation | None, after_s: float) -> Reservation | None:
    """The one reservation to hold now (None: hold nothing).

    The current reservation stays while its gang waits and its nodes exist (moving it would waste the draining
    done so far). Otherwise: among gangs that waited `after_s` or more in a queue below its deserved share,
    the lowest share first, then the longest wait."""
    names = {n.name for n in nodes}
    waiting = {g.key: g for g in gangs}
    if current is not None and current.gang in waiting and set(current.nodes) <= names:
        return current
    candidates = []
    for gang in gangs:
        share = queue_share(allocated, deserved, gang.queue)
        if gang.waiting_s >= after_s and share is not None and share < 1:
            candidates.append((share, -gang.waiting_s, gang.key, gang))
    for *_, gang in sorted(candidates, key=lambda c: c[:3]):
        chosen = cheapest_nodes(nodes, gang)
        if chosen is not None:
            return Reservation(gang.key, chosen)
    return None


def taint_changes(node_taints: Mapping[str, list[dict]], wanted: Reservation | None) -> dict[str, list[dict]]:
    """node -> its new taint list, for the nodes whose reservation taint must be added, changed or removed
    (other taints are kept as they are)."""
    out = {}
    held = set(wanted.nodes) if wanted else set()
    for node, taints in node_taints.items():
        others = [t for t in taints if t.get("key") != K.RESERVATION_TAINT]
        mine = [t for t in taints if t.get("key") == K.RESERVATION_TAINT]
        want = [{"key": K.RESERVATION_TAINT, "value": wanted.taint_value, "effect": "NoSchedule"}] \
            if wanted and node in held else []
        if [(t.get("value"), t.get("effect")) for t in mine] != [(t["value"], t["effect"]) for t in want]:
            out[node] = others + want
    return out
