"""The platform's state as capacity: per-node free resources, racks/spines, per-queue use (pure).

Inputs are plain dicts as listed from the API server (Nodes, Pods, Volcano Queues and PodGroups,
HyperNodes). A pod holds resources on its node from the moment it is bound (`spec.nodeName`) until it
ends (phase Succeeded/Failed); its queue is its Volcano PodGroup's (annotation
`scheduling.k8s.io/group-name`); for a Volcano pod without one, the queue its own annotation names (Volcano
makes it a one-pod group there), else `default`; none for other schedulers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Collection, Iterable, Mapping

from trainyard.scheduling import fairness
from trainyard.k8s import parse_quantity
from trainyard.timestamps import parse_time
from trainyard.controller.resources import pod_requests
from trainyard import k8s as K

GPU = K.GPU_RESOURCE
RACK_LABEL = K.RACK_LABEL
SPINE_LABEL = K.SPINE_LABEL
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
FINISHED = ("Succeeded", "Failed")
FULL_POD_GPUS = 8  # "fragmented": free GPUs on nodes that cannot host one pod of this many GPUs

Resources = dict[str, Fraction]


def meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def resources(values: dict | None) -> Resources:
    out: Resources = {}
    for name, value in (values or {}).items():
        try:
            out[name] = parse_quantity(value, name)
        except Exception:  # noqa: BLE001 - a malformed quantity counts as nothing rather than breaking a report
            continue
    return out


def add(a: Resources, b: Resources, times: int = 1) -> Resources:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, Fraction(0)) + value * times
    return out


def number(value: Fraction | int | None) -> int | float:
    """A quantity for printing: whole numbers as int."""
    value = Fraction(value or 0)
    return int(value) if value.denominator == 1 else float(value)


@dataclass
class Node:
    name: str
    rack: str
    spine: str
    allocatable: Resources
    used: Resources = field(default_factory=dict)
    schedulable: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping, ...] = ()
    lost: bool = False
    """Its kubelet stopped reporting or reports it not ready: its pods hold nothing usable (`node_lost`)."""

    def free(self, resource: str = GPU) -> Fraction:
        if not self.schedulable:
            return Fraction(0)
        return max(Fraction(0), self.allocatable.get(resource, Fraction(0)) - self.used.get(resource, Fraction(0)))

    def fits(self, request: Resources) -> bool:
        return self.schedulable and all(
            amount <= self.allocatable.get(name, Fraction(0)) - self.used.get(name, Fraction(0))
            for name, amount in request.items() if amount > 0)


def is_active(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in FINISHED


def pod_resources(pod: dict) -> Resources:
    return pod_requests(pod.get("spec") or {})


def ready_condition(node: dict) -> dict | None:
    """The node's Ready condition; None when it reports none (a node object just created)."""
    return next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)


def node_lost(node: dict) -> bool:
    """The node's Ready condition is False or Unknown (its kubelet stopped posting, or says it is not ready). Its
    pods' objects still say Running until they are evicted, then Terminating until the node comes back or is
    removed; what they hold is gone with the node, so nothing counts it as used (fit, report, queues)."""
    ready = ready_condition(node)
    return ready is not None and ready.get("status") != "True"


def lost_nodes(node_objs: Iterable[dict]) -> frozenset[str]:
    return frozenset(str(meta(n).get("name")) for n in node_objs if node_lost(n))


def _node_ready(node: dict) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    ready = ready_condition(node)
    return ready is None or ready.get("status") == "True"  # no conditions reported yet: count it


def _hypernode_parents(hypernodes: Iterable[dict], nodes: list[dict]) -> dict[str, dict[int, str]]:
    """node name -> {tier: HyperNode name} from HyperNodes (members by exactMatch / regexMatch-free labelMatch)."""
    by_name = {meta(h).get("name"): h for h in hypernodes}
    by_label: dict[tuple[str, str], set[str]] = {}  # (label, value) -> nodes: one lookup per matchLabels pair
    for n in nodes:
        for key, value in (meta(n).get("labels") or {}).items():
            by_label.setdefault((key, str(value)), set()).add(str(meta(n).get("name")))

    def members(h: dict, seen: frozenset = frozenset()) -> set[str]:
        out: set[str] = set()
        for member in (h.get("spec") or {}).get("members") or []:
            selector = member.get("selector") or {}
            exact = str((selector.get("exactMatch") or {}).get("name") or "")
            if member.get("type") == "HyperNode":
                child = by_name.get(exact)
                if child is not None and exact not in seen:
                    out |= members(child, seen | {exact})
                continue
            if exact:
                out.add(exact)
            match = (selector.get("labelMatch") or {}).get("matchLabels") or {}
            if match:
                out |= set.intersection(*(by_label.get((k, str(v)), set()) for k, v in match.items()))
        return out

    parents: dict[str, dict[int, str]] = {}
    for name, h in by_name.items():
        tier = int((h.get("spec") or {}).get("tier") or 0)
        for node in members(h):
            parents.setdefault(node, {})[tier] = str(name)
    return parents


def nodes_from(node_objs: Iterable[dict], pods: Iterable[dict], hypernodes: Iterable[dict] = (),
               resource: str = GPU) -> list[Node]:
    """Nodes that offer `resource`, with what their active pods use; rack/spine from HyperNodes (tiers 1/2)
    when there are any, else from the `trainyard.dev/rack`/`spine` labels."""
    node_objs = [n for n in node_objs if resources((n.get("status") or {}).get("allocatable")).get(resource)]
    parents = _hypernode_parents(list(hypernodes), node_objs)
    out = {}
    for n in node_objs:
        name, labels = meta(n).get("name", ""), meta(n).get("labels") or {}
        tiers = parents.get(name, {})
        out[name] = Node(name=name, rack=tiers.get(1) or labels.get(RACK_LABEL, "-"),
                         spine=tiers.get(2) or labels.get(SPINE_LABEL, "-"),
                         allocatable=resources((n.get("status") or {}).get("allocatable")),
                         schedulable=_node_ready(n), labels=dict(labels),
                         taints=tuple((n.get("spec") or {}).get("taints") or ()), lost=node_lost(n))
    for pod in pods:
        node = out.get((pod.get("spec") or {}).get("nodeName"))
        if node is not None and not node.lost and is_active(pod):
            node.used = add(node.used, pod_resources(pod))
    return sorted(out.values(), key=lambda n: (n.rack, n.name))


def pod_group_key(obj: dict) -> tuple[str, str]:
    return meta(obj).get("namespace", ""), meta(obj).get("name", "")


def pod_group_queues(pod_groups: Iterable[dict]) -> dict[tuple[str, str], str]:
    """(namespace, PodGroup) -> its Volcano queue (`default` when it names none)."""
    return {pod_group_key(g): (g.get("spec") or {}).get("queue") or "default" for g in pod_groups}


GROUPLESS = "pod:"
"""Key prefix of a pod that names no PodGroup, a gang of its own (`active_pods_by_group`)."""


def active_pods_by_group(pods: Iterable[dict]) -> dict[tuple[str, str], list[dict]]:
    """Bound, active pods by (namespace, PodGroup name); a pod naming no group is (namespace, "pod:<name>")."""
    out: dict[tuple[str, str], list[dict]] = {}
    for pod in pods:
        if not is_active(pod):
            continue
        group = (meta(pod).get("annotations") or {}).get(GROUP_ANNOTATION)
        out.setdefault((meta(pod).get("namespace", ""), group or GROUPLESS + meta(pod).get("name", "")), []).append(pod)
    return out


def first_start_s(pods: Iterable[dict]) -> float | None:
    """When the earliest of `pods` started (epoch seconds), None when none has."""
    starts = [parse_time(start).timestamp() for pod in pods if (start := (pod.get("status") or {}).get("startTime"))]
    return min(starts) if starts else None


def hard_tier(topology: Mapping | None) -> int | None:
    """The highest HyperNode tier (1 rack, 2 spine) a gang may span when its network topology is hard, else None."""
    topology = topology or {}
    tier = topology.get("highestTierAllowed") if topology.get("mode", "hard") == "hard" else None
    return int(tier) if tier else None


WAITING_PHASES = ("Pending", "Inqueue", "")
"""PodGroup phases of a gang that has not started ("": Volcano has not seen it yet)."""


@dataclass(frozen=True)
class WaitingGroup:
    """A Volcano PodGroup that waits for GPUs with no member running."""

    key: tuple[str, str]
    queue: str
    pods: int
    gpus: Fraction
    tier: int | None
    priority_class: str
    created: str


def waiting_groups(pod_groups: Iterable[dict]) -> list[WaitingGroup]:
    """The PodGroups asking for GPUs whose gang has not started (phase in `WAITING_PHASES`, none running)."""
    out = []
    for group in pod_groups:
        spec, status = group.get("spec") or {}, group.get("status") or {}
        gpus = resources(spec.get("minResources")).get(GPU, Fraction(0))
        if gpus <= 0 or status.get("phase", "") not in WAITING_PHASES or int(status.get("running") or 0):
            continue
        out.append(WaitingGroup(pod_group_key(group), spec.get("queue") or "default", int(spec.get("minMember") or 1),
                                gpus, hard_tier(spec.get("networkTopology")), spec.get("priorityClassName") or "",
                                meta(group).get("creationTimestamp") or ""))
    return out


def pod_queue(pod: dict, pod_groups: dict[tuple[str, str], dict]) -> str | None:
    group = (meta(pod).get("annotations") or {}).get(GROUP_ANNOTATION)
    if group:
        pg = pod_groups.get((meta(pod).get("namespace", ""), group))
        return ((pg or {}).get("spec") or {}).get("queue") or "default"
    if (pod.get("spec") or {}).get("schedulerName") != "volcano":
        return None
    return (meta(pod).get("annotations") or {}).get(K.VOLCANO_QUEUE_ANNOTATION) or "default"


@dataclass
class QueueUse:
    name: str
    state: str
    weight: int
    capability: Resources
    deserved: Resources
    guarantee: Resources
    allocated: Resources = field(default_factory=dict)
    inqueue: Resources = field(default_factory=dict)
    """minResources of admitted (Inqueue) gangs not running yet: Volcano holds them for these gangs."""
    volcano_allocated: Resources = field(default_factory=dict)
    """Volcano's own figure (Queue `status.allocated`), for comparison."""
    running_gangs: int = 0
    pending_gangs: list[tuple[str, str, str]] = field(default_factory=list)
    """(namespace/name, phase, why) of gangs that wait."""
    pending_priorities: list[str | None] = field(default_factory=list)
    """priorityClassName of each waiting gang (same order)."""


def queue_uses(queues: Iterable[dict], pod_groups: Iterable[dict], pods: Iterable[dict],
               why: dict[tuple[str, str], str] | None = None, lost: Collection[str] = frozenset()) -> dict[str, QueueUse]:
    """Per queue: spec (capability, deserved, guarantee), what its bound pods hold, gangs admitted or waiting.

    `why`: (namespace, PodGroup) -> verdict text for waiting gangs (see `pending_reason`). `lost`: names of lost
    nodes (`lost_nodes`), whose pods hold nothing: a gang with members there is not running."""
    why = why or {}
    pods = list(pods)
    stranded = set(active_pods_by_group(p for p in pods if (p.get("spec") or {}).get("nodeName") in lost))
    pods = [p for p in pods if (p.get("spec") or {}).get("nodeName") not in lost] if lost else pods
    pod_groups = [g for g in pod_groups if g.get("apiVersion", K.VOLCANO_API_VERSION) == K.VOLCANO_API_VERSION]
    groups = {pod_group_key(g): g for g in pod_groups}
    out: dict[str, QueueUse] = {}
    for q in queues:
        spec, status = q.get("spec") or {}, q.get("status") or {}
        out[meta(q).get("name", "")] = QueueUse(
            name=meta(q).get("name", ""), state=status.get("state", ""), weight=int(spec.get("weight") or 1),
            capability=resources(spec.get("capability")), deserved=resources(spec.get("deserved")),
            guarantee=resources((spec.get("guarantee") or {}).get("resource")),
            volcano_allocated=resources(status.get("allocated")))
    for pod in pods:
        queue = pod_queue(pod, groups)
        if queue in out and is_active(pod):
            out[queue].allocated = add(out[queue].allocated, pod_resources(pod))
    # Volcano writes a gang's phase and `running` a cycle after binding its pods: a group whose pods are all bound
    # already holds what it needs (counted in allocated), so it is not also an admitted gang waiting
    bound = {key: len(members) for key, members in active_pods_by_group(
        pod for pod in pods if (pod.get("spec") or {}).get("nodeName")).items()}
    for key, g in sorted(groups.items()):
        use = out.get((g.get("spec") or {}).get("queue") or "default")
        if use is None:
            continue
        status = g.get("status") or {}
        phase, running = status.get("phase", "Pending"), int(status.get("running") or 0)
        if phase in ("Completed",):
            continue
        min_member = int((g.get("spec") or {}).get("minMember") or 1)
        if key in stranded and bound.get(key, 0) < min_member:
            continue  # members on a lost node: neither running nor waiting until JobSet's failure policy acts
        if phase == "Running" or max(running, bound.get(key, 0)) >= min_member:
            use.running_gangs += 1
        elif phase in ("Pending", "Inqueue", "Unknown", ""):
            if phase == "Inqueue":
                use.inqueue = add(use.inqueue, resources((g.get("spec") or {}).get("minResources")))
            use.pending_gangs.append((f"{key[0]}/{key[1]}", phase or "Pending", why.get(key, "")))
            use.pending_priorities.append((g.get("spec") or {}).get("priorityClassName"))
    return out


def weight_shares(uses: dict[str, QueueUse], cluster_total: Fraction) -> dict[str, Fraction]:
    """Each queue's weight share of the cluster's GPUs (the `root` of a hierarchy excluded), capped by its
    capability: what `proportion` would deserve it if every queue asked for everything."""
    leaves = {name: use for name, use in uses.items() if name != "root"}
    shares = fairness.weight_shares(cluster_total, {name: use.weight for name, use in leaves.items()})
    return {name: min(shares[name], use.capability[GPU]) if GPU in use.capability else shares[name]
            for name, use in leaves.items()}


def pending_reason(pod_group: dict, events: Iterable[dict] = ()) -> str:
    """Why a gang waits, from its PodGroup condition and (phase Pending) its Volcano events."""
    from trainyard.controller.gang_pending import gang_pending

    verdict = gang_pending([{"kind": "PodGroup", "apiVersion": K.VOLCANO_API_VERSION, **pod_group}], events)
    if verdict is None:
        return ""
    if verdict.cause:
        return verdict.cause
    return f"{verdict.reason}: {verdict.message}" if verdict.message else verdict.reason


def waiting_reasons(pod_groups: Iterable[dict], events: Iterable[dict]) -> dict[tuple[str, str], str]:
    """(namespace, PodGroup) -> why its gang waits (`pending_reason`; "" for one that does not). Each PodGroup is
    judged on its own events only (at 10,000 waiting gangs and 17,000 events, scanning them all for each took
    most of the report's own time)."""
    by_object: dict[tuple[str, str], list[dict]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        by_object.setdefault((involved.get("namespace") or "", involved.get("name") or ""), []).append(event)
    return {key: pending_reason(g, by_object.get(key, ())) for g in pod_groups for key in (pod_group_key(g),)}
