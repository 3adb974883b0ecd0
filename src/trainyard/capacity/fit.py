"""Would this gang run now? Quota, queue, then placement on the free GPUs under its topology (pure).

The gang is what the controller would create for the TrainJob (`gang_from_objects` reads `build_objects`'
PodGroup and JobSet). Checks run in the order the platform applies them and the first one that blocks
is the answer, phrased for the user:

1. ResourceQuota: the whole gang above a hard limit is refused for good; used + gang above it waits
   (pods are refused by quota admission until others end).
2. Queue (Volcano enqueue): the queue must be Open, and allocated + admitted-but-not-running (inqueue)
   + the gang's minResources must stay within its capability (the cluster's total when it has none).
3. Placement (Volcano allocate): a pod larger than every node (by allocatable) is refused for good; else the gang's pods are bin-packed, largest first, onto the nodes' free
   resources (best fit: the fullest node that still fits). When that fails the reason is named:
   - not enough free GPUs in the whole cluster;
   - fragmentation: enough free GPUs in total, but spread so no node set hosts every pod;
   - topology: the PodGroup's `networkTopology` (mode hard) keeps the gang within one tier-N HyperNode
     (tier 1 = rack, 2 = spine) and none has room, although the cluster as a whole has.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable

from trainyard import k8s as K
from trainyard.controller import dra, k8s
from trainyard.controller.resources import pod_requests

from trainyard.scheduling.cluster_state import GPU, Node, QueueUse, Resources, add, number, resources

WAITS, FITS, REFUSED = "waits", "fits", "refused"


@dataclass
class Gang:
    namespace: str
    name: str
    queue: str | None
    priority_class: str | None
    min_member: int
    min_resources: Resources
    pods: list[Resources]
    topology: dict | None = None
    in_volcano: bool = True  # False: no Volcano queue applies (kube-scheduler or coscheduling places the pods)
    claimed_devices: Resources = field(default_factory=dict)
    """Quota key `<device class>.deviceclass.resource.k8s.io/devices` -> devices the gang's pods claim through DRA
    (`resourceClaimsPerNode`): counted by quotas, not by Volcano queues or the nodes' extended resources."""

    @property
    def queue_text(self) -> str:
        return f"queue {self.queue or 'default'}" if self.in_volcano else \
            "no Volcano queue (no Volcano PodGroup: pods are placed by their own scheduler)"

    @property
    def total(self) -> Resources:
        out: Resources = {}
        for pod in self.pods:
            out = add(out, pod)
        return out


@dataclass
class Verdict:
    outcome: str  # fits | waits | refused
    check: str  # admission | quota | queue | node size | cluster | fragmentation | topology | placement
    message: str
    placement: dict[str, int] = field(default_factory=dict)

    @property
    def line(self) -> str:
        return self.message if self.outcome == FITS else f"{self.outcome}: {self.message}"


def jobs_of(objects: Iterable[dict]) -> list[dict]:
    """The batch/v1 Jobs the JobSet controller will create from the built JobSet, one per replicated job (the first
    replica's name): what the API server validates only then, such as a GPU request that differs from its limit."""
    jobsets = [o for o in objects if o.get("kind") == "JobSet"]
    out = []
    for jobset in jobsets:
        for job in k8s.replicated_jobs(jobset.get("spec") or {}):
            template = job.get("template") or {}
            out.append({"apiVersion": "batch/v1", "kind": "Job",
                        "metadata": {"name": f"{k8s.name_of(jobset)}-{job.get('name', '')}-0",
                                     "namespace": k8s.namespace_of(jobset),
                                     "labels": dict((template.get("metadata") or {}).get("labels") or {})},
                        "spec": copy.deepcopy(template.get("spec") or {})})
    return out


def job_refusal_hint(refusal: str) -> str:
    """The fix for the Job refusal a user meets most: a TrainJob's GPU limit over a runtime's GPU request."""
    if "must be equal to" in refusal and "limit" in refusal:
        return ("; set spec.trainer.resourcesPerNode.requests equal to its limits (the runtime's requests are kept "
                "where the TrainJob gives none, and an extended resource's request must equal its limit)")
    return ""


def gang_from_objects(objects: Iterable[dict], templates: Iterable[dict] = ()) -> Gang:
    """The gang one reconcile would create: pods from the JobSet, queue/priority/topology from the PodGroup, and
    the devices its pods claim from the ResourceClaimTemplates among `templates`."""
    objects, templates = list(objects), list(templates)
    claimed: Resources = {}
    jobset = next((o for o in objects if o.get("kind") == "JobSet"), None)
    group = next((o for o in objects if o.get("kind") == "PodGroup"), None)
    if jobset is None:
        raise ValueError("the TrainJob builds no JobSet (finished, or managed by another controller)")
    pods: list[Resources] = []
    priority = None
    schedulers, pod_queues = set(), set()
    volcano_group = group is not None and str(group.get("apiVersion", "")).startswith(K.VOLCANO_GROUP + "/")
    for job in k8s.replicated_jobs(jobset.get("spec") or {}):
        spec = k8s.job_spec(job)
        template = spec.get("template") or {}
        pod = template.get("spec") or {}
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        if volcano_group and K.VOLCANO_GROUP_ANNOTATION not in annotations:
            continue  # a staged job (initializers): it runs, in its own one-pod groups, before the gang
        count = int(job.get("replicas", 1)) * int(spec.get("parallelism", 1))
        pods += [pod_requests(pod) for _ in range(count)]
        for key, devices in dra.pod_devices(pod, templates, k8s.namespace_of(jobset)).items():
            claimed[key] = claimed.get(key, Fraction(0)) + devices * count
        priority = pod.get("priorityClassName", priority)
        schedulers.add(pod.get("schedulerName") or "default-scheduler")
        pod_queues.add(annotations.get(K.VOLCANO_QUEUE_ANNOTATION))
    gspec = (group or {}).get("spec") or {}
    # no PodGroup but every pod Volcano's: Volcano gives them one-pod groups in the pods' queue
    in_volcano = volcano_group or (group is None and schedulers == {K.VOLCANO_SCHEDULER_NAME})
    queue = gspec.get("queue") if volcano_group else (next(iter(pod_queues)) if len(pod_queues) == 1 else None)
    return Gang(namespace=k8s.namespace_of(jobset), name=k8s.name_of(jobset), queue=queue, in_volcano=in_volcano,
                priority_class=gspec.get("priorityClassName", priority),
                min_member=int(gspec.get("minMember") or len(pods)),
                min_resources=resources(gspec.get("minResources")), pods=pods,
                topology=gspec.get("networkTopology"), claimed_devices=claimed)


def _fmt(amount: Fraction) -> str:
    return str(number(amount))


# ---------------------------------------------------------------- quota
def _scope_matches(quota: dict, priority_class: str | None) -> bool:
    spec = quota.get("spec") or {}
    if spec.get("scopes"):
        return False  # Terminating/BestEffort/...: not modelled, not counted against a training gang
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        if expr.get("scopeName") != "PriorityClass":
            return False
        values = expr.get("values") or []
        ok = {"In": priority_class in values, "NotIn": priority_class not in values,
              "Exists": priority_class is not None, "DoesNotExist": priority_class is None}.get(expr.get("operator"))
        if not ok:
            return False
    return True


def quota_totals(gang: Gang) -> Resources:
    """What the gang's pods count in a ResourceQuota (requests.<r>, and cpu/memory also bare; pods; the devices
    they claim through DRA)."""
    out: Resources = {"pods": Fraction(len(gang.pods)), **gang.claimed_devices}
    for name, amount in gang.total.items():
        for key in ([f"requests.{name}", name] if name in ("cpu", "memory") else [f"requests.{name}"]):
            out[key] = out.get(key, Fraction(0)) + amount
    return out


def check_quota(gang: Gang, quotas: Iterable[dict]) -> Verdict | None:
    need = quota_totals(gang)
    for quota in quotas:
        if k8s.namespace_of(quota) != gang.namespace or not _scope_matches(quota, gang.priority_class):
            continue
        hard = resources((quota.get("spec") or {}).get("hard"))
        used = resources((quota.get("status") or {}).get("used"))
        name = k8s.name_of(quota)
        for key in sorted(need):
            if key not in hard or need[key] == 0:
                continue
            if need[key] > hard[key]:
                return Verdict(REFUSED, "quota", f"quota {name} in {gang.namespace} allows {key} {_fmt(hard[key])}, "
                                                 f"this job needs {_fmt(need[key])}: it can never start")
            if used.get(key, Fraction(0)) + need[key] > hard[key]:
                return Verdict(WAITS, "quota", f"quota {name} in {gang.namespace} {key} {_fmt(hard[key])}, "
                                               f"used {_fmt(used.get(key, Fraction(0)))}, this job needs {_fmt(need[key])}")
    return None


# ---------------------------------------------------------------- queue
def check_queue(gang: Gang, queue: QueueUse | None, cluster_total: Resources) -> Verdict | None:
    name = gang.queue or "default"
    if queue is None:
        return Verdict(REFUSED, "queue", f"queue {name} does not exist")
    if queue.state and queue.state != "Open":
        return Verdict(WAITS, "queue", f"queue {name} is {queue.state}, it admits no new gang")
    need = gang.min_resources or gang.total
    for resource in sorted(need):
        if need[resource] == 0:
            continue
        limit = queue.capability.get(resource, cluster_total.get(resource))
        if limit is None:
            continue
        what = "capability" if resource in queue.capability else "cluster total"
        if need[resource] > limit:  # a queue's capability is a hard cap: no amount of waiting helps
            fix = "ask for a larger queue capability" if what == "capability" else "the cluster is smaller than the job"
            return Verdict(REFUSED, "queue", f"queue {name} {what} {resource} {_fmt(limit)}, this job needs "
                                             f"{_fmt(need[resource])}: it can never start; use fewer GPUs or {fix}")
        held = queue.allocated.get(resource, Fraction(0))
        reserved = queue.inqueue.get(resource, Fraction(0))
        if held + reserved + need[resource] > limit:
            extra = f", admitted gangs hold {_fmt(reserved)} more" if reserved else ""
            return Verdict(WAITS, "queue", f"queue {name} {what} {resource} {_fmt(limit)}, allocated {_fmt(held)}"
                                           f"{extra}, this job needs {_fmt(need[resource])}")
    return None


# ---------------------------------------------------------------- placement
def pack(pods: list[Resources], nodes: list[Node]) -> dict[str, int] | None:
    """Pods per node, or None: largest pod first onto the fullest node that still fits it (best fit)."""
    free = {n.name: Node(n.name, n.rack, n.spine, dict(n.allocatable), dict(n.used), n.schedulable) for n in nodes}
    placement: dict[str, int] = {}
    for pod in sorted(pods, key=lambda p: (-p.get(GPU, 0), -sum(p.values()))):
        candidates = [n for n in free.values() if n.fits(pod)]
        if not candidates:
            return None
        best = min(candidates, key=lambda n: (n.free(GPU) - pod.get(GPU, 0), n.name))
        best.used = add(best.used, pod)
        placement[best.name] = placement.get(best.name, 0) + 1
    return placement


def topology_domains(nodes: list[Node], tier: int) -> dict[str, list[Node]]:
    """Nodes grouped by their tier-1 (rack) or tier-2 (spine) HyperNode; above 2: one domain."""
    out: dict[str, list[Node]] = {}
    for node in nodes:
        key = node.rack if tier <= 1 else node.spine if tier == 2 else "*"
        out.setdefault(key, []).append(node)
    return out


def _per(nodes: Iterable[Node]) -> str:
    return ", ".join(f"{n.name} {_fmt(n.free())}" for n in nodes)


def check_node_size(gang: Gang, nodes: list[Node]) -> Verdict | None:
    """A pod that needs more of a resource than any schedulable node has at all can never be placed."""
    candidates = [n for n in nodes if n.schedulable]
    for pod in gang.pods:
        for name, amount in sorted(pod.items()):
            if amount <= 0:
                continue
            largest = max(candidates, key=lambda n: n.allocatable.get(name, Fraction(0)), default=None)
            has = largest.allocatable.get(name, Fraction(0)) if largest else Fraction(0)
            if amount > has:
                where = f"the largest node, {largest.name}, has {_fmt(has)} allocatable" if largest else "no node is schedulable"
                return Verdict(REFUSED, "node size", f"a pod of this job needs {_fmt(amount)} {name} and {where}: "
                                                     f"it can never start; use more, smaller pods (numNodes)")
    return None


def _domain_name(tier: int) -> str:
    return {1: "rack", 2: "spine"}.get(tier, f"tier-{tier} HyperNode")


def check_never(gang: Gang, nodes: list[Node]) -> Verdict | None:
    """What no amount of waiting fixes: the gang does not fit the cluster (or, under a hard topology, any one
    rack or spine) even with every node free."""
    idle = [Node(n.name, n.rack, n.spine, dict(n.allocatable), {}, n.schedulable) for n in nodes]
    biggest = max((p.get(GPU, Fraction(0)) for p in gang.pods), default=Fraction(0))
    pods = f"its {len(gang.pods)} pods of up to {_fmt(biggest)} {GPU}"
    if pack(gang.pods, idle) is None:
        total = sum((n.allocatable.get(GPU, Fraction(0)) for n in idle if n.schedulable), Fraction(0))
        return Verdict(REFUSED, "cluster", f"even with every node free the cluster ({_fmt(total)} {GPU} allocatable) "
                                           f"cannot host {pods}: it can never start; use fewer or smaller pods")
    topology = gang.topology or {}
    if topology and topology.get("mode", "hard") == "hard":
        tier = int(topology.get("highestTierAllowed") or 1)
        domains = topology_domains(idle, tier)
        if all(pack(gang.pods, members) is None for members in domains.values()):
            level = _domain_name(tier)
            sizes = ", ".join(f"{d} {_fmt(sum((n.allocatable.get(GPU, Fraction(0)) for n in m), Fraction(0)))}"
                              for d, m in sorted(domains.items()))
            return Verdict(REFUSED, "topology", f"topology: no {level} could ever hold {pods} (networkTopology hard, "
                                                f"highestTierAllowed {tier}; {GPU} allocatable per {level}: {sizes}): it "
                                                f"can never start; allow a higher tier or use fewer GPUs")
    return None


def check_placement(gang: Gang, nodes: list[Node]) -> Verdict:
    if (too_large := check_node_size(gang, nodes)) is not None:
        return too_large
    if (never := check_never(gang, nodes)) is not None:
        return never
    need_gpus = gang.total.get(GPU, Fraction(0))
    free_gpus = sum((n.free() for n in nodes), Fraction(0))
    biggest = max((p.get(GPU, Fraction(0)) for p in gang.pods), default=Fraction(0))
    placement = pack(gang.pods, nodes)
    if placement is None:
        if need_gpus > free_gpus:
            return Verdict(WAITS, "cluster", f"the cluster has {_fmt(free_gpus)} free {GPU}, this job needs "
                                             f"{_fmt(need_gpus)} ({len(gang.pods)} pods)")
        return Verdict(WAITS, "fragmentation",
                       f"fragmented: {_fmt(free_gpus)} free {GPU} in total, enough for this job's {_fmt(need_gpus)}, "
                       f"but no set of nodes hosts its {len(gang.pods)} pods of up to {_fmt(biggest)} {GPU} "
                       f"(free per node: {_per(nodes)})")
    topology = gang.topology or {}
    if topology and topology.get("mode", "hard") == "hard":
        tier = int(topology.get("highestTierAllowed") or 1)
        domains = topology_domains(nodes, tier)
        level = _domain_name(tier)
        for domain, members in sorted(domains.items(), key=lambda kv: sum(n.free() for n in kv[1])):
            inside = pack(gang.pods, members)
            if inside is not None:
                return Verdict(FITS, "placement", f"fits in {level} {domain}: {_placement(inside)}", inside)
        per_domain = ", ".join(f"{d} {_fmt(sum((n.free() for n in m), Fraction(0)))}" for d, m in sorted(domains.items()))
        return Verdict(WAITS, "topology",
                       f"topology: the gang must fit in one {level} (networkTopology hard, highestTierAllowed {tier}) "
                       f"and none has room for its {len(gang.pods)} pods of up to {_fmt(biggest)} {GPU} "
                       f"(free per {level}: {per_domain}; the cluster as a whole could host it)")
    return Verdict(FITS, "placement", f"fits now: {_placement(placement)}", placement)


def _placement(placement: dict[str, int]) -> str:
    return ", ".join(f"{node} {count} pod{'s' if count > 1 else ''}" for node, count in sorted(placement.items()))


def fit(gang: Gang, quotas: Iterable[dict], queues: dict[str, QueueUse], nodes: list[Node]) -> list[Verdict]:
    """Every check in order up to the first that blocks (its verdict last), or all passed ending with FITS."""
    cluster_total: Resources = {}
    for node in nodes:
        cluster_total = add(cluster_total, node.allocatable if node.schedulable else {})
    out: list[Verdict] = []
    checks = [lambda: check_quota(gang, quotas)]
    if gang.in_volcano:
        checks.append(lambda: check_queue(gang, queues.get(gang.queue or "default"), cluster_total))
    for check in checks:
        verdict = check()
        if verdict is not None:
            return out + [verdict]
    return out + [check_placement(gang, nodes)]


def priority_note(gang: Gang, queue: QueueUse | None, values: dict[str, int]) -> str:
    """The gang's priority and the gangs already waiting in its queue at that priority or above (Volcano orders a
    queue's gangs by priority, then creation time; without preemption in the profile, nothing running is evicted)."""
    mine = values.get(gang.priority_class or "", 0)
    text = f"priority {gang.priority_class or '(none)'} = {mine}"
    if queue is None or not queue.pending_gangs:
        return text + f"; no gang waits in queue {gang.queue or 'default'}"
    ahead = sum(1 for name in queue.pending_priorities if values.get(name or "", 0) >= mine)
    return text + (f"; {len(queue.pending_gangs)} gang(s) wait in queue {queue.name}, {ahead} of them at this "
                   "priority or above (they go first)")


def exit_code(verdict: Verdict) -> int:
    """0 fits, 1 would wait, 2 refused (admission, or more than a hard quota: it can never start)."""
    return {FITS: 0, WAITS: 1}.get(verdict.outcome, 2)
