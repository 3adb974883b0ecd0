"""`trainyard fit --explain`: the smallest changes that make a waiting (or never-starting) gang fit now (pure).

Each suggestion is checked by the same checks `fit` runs (quota, queue, placement) on the changed gang or cluster:
fewer nodes (the most that fit), a hard topology tier one step wider (a runtime that allows it), or the running jobs
whose end would make room (soonest first, with the time they have left); a priority class the tenant is granted
above the gang's own is checked by the start-estimate model instead (a priority moves a gang up its queue, it
makes no room now).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable, Iterable, Mapping, Sequence

from trainyard import k8s as K
from trainyard.capacity.fit import FITS, WAITS, Gang, Verdict, fit
from trainyard.k8s import parse_quantity
from trainyard.scheduling.cluster_state import (GPU, GROUPLESS, Node, QueueUse, Resources, active_pods_by_group, hard_tier,
                                      meta, pod_resources)

MOST_JOBS_ENDING = 3
"""At most this many running jobs named together in one `after ... end` suggestion."""


@dataclass(frozen=True)
class Holder:
    """A running job as `--explain` frees it: what its pods use on each node, its queue and namespace."""

    key: str
    """namespace/PodGroup."""
    namespace: str
    queue: str | None
    on_nodes: Mapping[str, Resources]
    remaining_s: float


def holders(pods: Iterable[dict], queue_of: Mapping[str, str], remaining: Mapping[str, float]) -> list[Holder]:
    """Bound, active pods by PodGroup (group-less pods are not jobs anyone can wait for), soonest ending first."""
    out = []
    for (namespace, group), members in active_pods_by_group(pods).items():
        if group.startswith(GROUPLESS):
            continue
        per_node: dict[str, Resources] = {}
        for pod in members:
            here = per_node.setdefault(pod["spec"]["nodeName"], {})
            for name, amount in pod_resources(pod).items():
                here[name] = here.get(name, Fraction(0)) + amount
        key = f"{namespace}/{group}"
        if any(r.get(GPU, 0) for r in per_node.values()):
            out.append(Holder(key, namespace, queue_of.get(key), per_node, remaining.get(key, float("inf"))))
    return sorted(out, key=lambda h: (h.remaining_s, h.key))


def without(nodes: Sequence[Node], queues: Mapping[str, QueueUse], quotas: Sequence[dict], gone: Sequence[Holder]
            ) -> tuple[list[Node], dict[str, QueueUse], list[dict]]:
    """The cluster, queues and quotas as they would be once `gone` ended."""
    freed: dict[str, Resources] = {}
    by_queue: dict[str, Fraction] = {}
    by_namespace: dict[str, Fraction] = {}
    for holder in gone:
        for node, used in holder.on_nodes.items():
            into = freed.setdefault(node, {})
            for name, amount in used.items():
                into[name] = into.get(name, Fraction(0)) + amount
            gpus = used.get(GPU, Fraction(0))
            if holder.queue:
                by_queue[holder.queue] = by_queue.get(holder.queue, Fraction(0)) + gpus
            by_namespace[holder.namespace] = by_namespace.get(holder.namespace, Fraction(0)) + gpus
    after_nodes = [replace(n, used={k: v - freed.get(n.name, {}).get(k, Fraction(0)) for k, v in n.used.items()})
                   for n in nodes]
    after_queues = {name: replace(q, allocated={**q.allocated, GPU: q.allocated.get(GPU, Fraction(0))
                                                 - by_queue.get(name, Fraction(0))}) for name, q in queues.items()}
    after_quotas = [_quota_without(q, by_namespace.get(meta(q).get("namespace", ""), Fraction(0))) for q in quotas]
    return after_nodes, after_queues, after_quotas


def _quota_without(quota: dict, gpus: Fraction) -> dict:
    if not gpus:
        return quota
    used = dict((quota.get("status") or {}).get("used") or {})
    for key in (f"requests.{GPU}", f"limits.{GPU}"):
        if key in used:
            used[key] = str(max(Fraction(0), Fraction(parse_quantity(used[key])) - gpus))
    return {**quota, "status": {**(quota.get("status") or {}), "used": used}}


def smaller(gang: Gang, pods: int) -> Gang | None:
    """The gang with `pods` of its (identical) pods; None when its pods differ (a launcher beside workers)."""
    if any(p != gang.pods[0] for p in gang.pods):
        return None
    total: Resources = {k: v * pods for k, v in gang.pods[0].items()}
    return replace(gang, pods=gang.pods[:pods], min_member=min(gang.min_member, pods), min_resources=total)


def _fits(gang: Gang, quotas: Sequence[dict], queues: Mapping[str, QueueUse], nodes: list[Node]) -> Verdict | None:
    verdict = fit(gang, quotas, dict(queues), nodes)[-1]
    return verdict if verdict.outcome == FITS else None


def fewer_nodes(gang: Gang, quotas: Sequence[dict], queues: Mapping[str, QueueUse], nodes: list[Node]) -> str | None:
    for count in range(len(gang.pods) - 1, 0, -1):
        less = smaller(gang, count)
        if less is None:
            return None
        verdict = _fits(less, quotas, queues, nodes)
        if verdict is not None:
            return f"numNodes {count} instead of {len(gang.pods)}: {verdict.line}"
    return None


def wider_topology(gang: Gang, quotas: Sequence[dict], queues: Mapping[str, QueueUse], nodes: list[Node],
                   runtimes: Mapping[int | None, Sequence[str]] | None = None) -> str | None:
    """A hard tier one step wider, else none, if the gang then fits; naming the `runtimes` that pin it
    (`usable_runtimes`; None: not known, the words then say "a runtime that allows it")."""
    topology = gang.topology or {}
    if not topology or topology.get("mode", "hard") != "hard":
        return None
    tier = int(topology.get("highestTierAllowed") or 1)
    for wider, words in ((tier + 1, f"networkTopology highestTierAllowed {tier + 1}"), (None, "no hard networkTopology")):
        if wider is not None and wider > 2:
            continue
        changed = replace(gang, topology={**topology, "highestTierAllowed": wider} if wider else None)
        verdict = _fits(changed, quotas, queues, nodes)
        if verdict is not None:
            return f"{words} ({_runtime_words(runtimes, wider, gang.namespace)}): {verdict.line}"
    return None


def _runtime_words(runtimes: Mapping[int | None, Sequence[str]] | None, tier: int | None, namespace: str) -> str:
    if runtimes is None:
        return "a runtime that allows it" if tier else "a runtime without one"
    names = runtimes.get(tier) or ()
    if not names:
        return f"no runtime of this framework usable in {namespace} has it: ask the platform team"
    return f"runtime{'s' if len(names) > 1 else ''} {', '.join(names)}"


def usable_runtimes(runtimes: Iterable[dict], namespace: str, catalog_version: str | None,
                    framework: str | None) -> dict[int | None, list[str]]:
    """The runtimes a TrainJob in `namespace` may name that have the job's framework (label
    `trainer.kubeflow.org/framework`), by the hard tier they pin (None: no hard networkTopology), as `Kind/name`:
    the namespace's TrainingRuntimes, and the ClusterTrainingRuntimes not from another catalog release than the
    namespace pins (admission refuses those). Empty when the framework is not known."""
    out: dict[int | None, list[str]] = {}
    if not framework:
        return out
    for runtime in runtimes:
        labels = meta(runtime).get("labels") or {}
        if labels.get(K.LABEL_FRAMEWORK) != framework:
            continue
        kind = runtime.get("kind")
        if kind == "TrainingRuntime" and meta(runtime).get("namespace") != namespace:
            continue
        release = labels.get(K.CATALOG_VERSION_LABEL)
        if kind == "ClusterTrainingRuntime" and catalog_version and release and release != catalog_version:
            continue
        volcano = ((runtime.get("spec") or {}).get("podGroupPolicy") or {}).get("volcano") or {}
        out.setdefault(hard_tier(volcano.get("networkTopology")), []).append(f"{kind}/{meta(runtime).get('name', '')}")
    return {tier: sorted(names) for tier, names in out.items()}


def after_jobs_end(gang: Gang, quotas: Sequence[dict], queues: Mapping[str, QueueUse], nodes: list[Node],
                   running: Sequence[Holder], words: Callable[[float], str]) -> str | None:
    """The soonest-ending running job whose end alone makes room; else the fewest soonest-ending ones together."""
    for holder in running:
        verdict = _fits(gang, *_after(quotas, queues, nodes, [holder]))
        if verdict is not None:
            return f"after {holder.key} ends ({_left(holder, words)}): {verdict.line}"
    for count in range(2, min(MOST_JOBS_ENDING, len(running)) + 1):
        gone = list(running[:count])
        verdict = _fits(gang, *_after(quotas, queues, nodes, gone))
        if verdict is not None:
            names = ", ".join(h.key for h in gone)
            return f"after {names} end ({_left(gone[-1], words)}): {verdict.line}"
    return None


def _after(quotas, queues, nodes, gone) -> tuple[list[dict], dict[str, QueueUse], list[Node]]:
    after_nodes, after_queues, after_quotas = without(nodes, queues, quotas, gone)
    return after_quotas, after_queues, after_nodes


def _left(holder: Holder, words: Callable[[float], str]) -> str:
    return "time left unknown" if holder.remaining_s == float("inf") else f"about {words(holder.remaining_s)} left"


def priority_can_help(verdict: Verdict) -> bool:
    """Whether a higher priority class can bring the start closer: it orders a queue's gangs, so only for a job that
    waits, and not on a namespace quota (every pod that exists counts against it, whatever its priority)."""
    return verdict.outcome == WAITS and verdict.check != "quota"


def higher_priorities(current: str | None, granted: Sequence[str], values: Mapping[str, int]) -> list[str]:
    """The classes the tenant may use that rank above the gang's own, highest first."""
    mine = values.get(current or "", 0)
    return sorted((c for c in granted if values.get(c, 0) > mine), key=lambda c: -values.get(c, 0))


def explain(gang: Gang, quotas: Sequence[dict], queues: Mapping[str, QueueUse], nodes: list[Node],
            running: Sequence[Holder], words: Callable[[float], str],
            runtimes: Mapping[int | None, Sequence[str]] | None = None) -> list[str]:
    """The suggestions that pass `fit` now, in the order a user would try them (`runtimes`: see `wider_topology`)."""
    found = [fewer_nodes(gang, quotas, queues, nodes), wider_topology(gang, quotas, queues, nodes, runtimes),
             after_jobs_end(gang, quotas, queues, nodes, running, words)]
    return [line for line in found if line]
