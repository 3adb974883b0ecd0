"""Which limit holds a tenant back in a replay (pure): over the moments some of its demand waited, how often it
held so many GPUs that not even its smallest job fitted under its cap (the lower of its queue capability and its
namespace quota). A what-if whose change moves nothing says which limit binds instead of showing equal columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from trainyard.scheduling.trace import TraceJob
from trainyard.schedtrace import metrics as M
from trainyard.whatif.scenario import Scenario, TenantTerms

CAPPED_SHARE = 0.9
"""A tenant held at its cap at least this often while its jobs waited is said to be capped by it."""


def cap_kind(terms: TenantTerms) -> str:
    """Which of the tenant's limits is its cap: the queue's capability, the namespace quota, or both alike."""
    capability, quota = terms.capability_gpus, terms.quota_gpus
    if capability is not None and capability == quota:
        return "queue capability and namespace quota"
    if capability is not None and (quota is None or capability < quota):
        return "queue capability"
    return "namespace quota"


@dataclass(frozen=True)
class Wait:
    """A job of `tenant` asking `gpus` waited from `since` until `until` (the replay's end if it never started)."""

    tenant: str
    gpus: int
    since: float
    until: float


def waits_of(jobs: Sequence[TraceJob], pods: Mapping[str, Sequence[M.PodRecord]], submitted: Mapping[str, float],
             end: float) -> list[Wait]:
    out = []
    for job in jobs:
        if job.name in submitted:
            placed = M.time_when_placed(job, pods.get(job.name, ()))
            out.append(Wait(job.tenant, job.gpus, submitted[job.name], end if placed is None else placed))
    return out


def bindings(line: M.Timeline, scenario: Scenario, waits: Sequence[Wait]) -> dict[str, dict[str, Any]]:
    """Per capped tenant: its cap, what the cap is, the seconds some of its jobs waited, and the share of those
    seconds it was at its cap: it held so many GPUs that its smallest waiting job did not fit under the cap."""
    step = float(line.t[1] - line.t[0]) if len(line.t) > 1 else 0.0
    smallest = {name: np.full(len(line.t), np.inf) for name in scenario.tenants}
    for wait in waits:
        if wait.tenant in smallest:
            first, last = np.searchsorted(line.t, [wait.since, wait.until])
            window = smallest[wait.tenant][first:last]
            np.minimum(window, wait.gpus, out=window)
    out: dict[str, dict[str, Any]] = {}
    for name, terms in sorted(scenario.tenants.items()):
        waiting = np.isfinite(smallest[name])
        if terms.cap_gpus is None or not waiting.any():
            continue
        held = line.held_by_tenant.get(name, np.zeros_like(line.t))
        at_cap = waiting & (held + np.where(waiting, smallest[name], 0) > terms.cap_gpus)
        count = int(waiting.sum())
        out[name] = {"cap_gpus": terms.cap_gpus, "cap_kind": cap_kind(terms), "waiting_s": round(count * step, 1),
                     "at_cap_share": round(float(at_cap.sum()) / count, 3)}
    return out


def unchanged(result: Mapping[str, Mapping[str, Any]]) -> bool:
    """Both sides replayed alike: the same allocation, shares, waits and jobs never runnable."""
    keys = ("allocation", "goodput", "tenants", "wait_by_size")
    current, proposed = result["current"], result["proposed"]
    return (all(current.get(k) == proposed.get(k) for k in keys)
            and [e["job"] for e in current["never_runnable"]] == [e["job"] for e in proposed["never_runnable"]])


def why_unchanged(result: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Lines saying what binds each tenant when the change moved nothing (none when it did)."""
    if not unchanged(result):
        return []
    current, proposed = result["current"], result["proposed"]
    before, after = current.get("limits", {}), proposed.get("limits", {})
    names = sorted(set(before) | set(after))
    if not names:
        return ["no effect on this workload: no tenant's job waited under either stack"]
    lines = ["no effect on this workload:"]
    for name in names:
        was, now = before.get(name), after.get(name)
        if was and now and min(was["at_cap_share"], now["at_cap_share"]) >= CAPPED_SHARE:
            share = min(was["at_cap_share"], now["at_cap_share"])
            when = "at every moment" if share >= 0.999 else f"{100 * share:.0f} % of the time"
            caps = (f"{was['cap_gpus']} GPUs" if was["cap_gpus"] == now["cap_gpus"]
                    else f"{was['cap_gpus']} GPUs, then {now['cap_gpus']}")
            lines.append(f"  {name} is capped by its {now['cap_kind']} of {caps} {when} its jobs waited "
                         f"({now['waiting_s']:.0f} s), on both sides")
        else:
            entitlement = (current["tenants"].get(name) or {}).get("entitlement")
            words = "" if entitlement is None else f" (its entitlement: {100 * entitlement:.1f} % of the cluster)"
            lines.append(f"  {name} waits below its cap: for its share of the cluster, which the change leaves as it "
                         f"was{words}")
    return lines
