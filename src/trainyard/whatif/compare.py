"""Replay one workload under two stacks and say what changes (pure: scenarios and a trace in, figures out).

Each side drops the jobs it could never run (with the reason a user would meet: no queue, a priority class not
granted, a job above its tenant's quota or capability, a shape no node, rack or spine holds), replays the rest on
the model and reports allocation while the cluster was saturated, each tenant's share against its entitlement
while tenants competed, and queueing waits by tenant and by job size.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from trainyard.scheduling.fairness import water_fill
from trainyard.schedtrace import metrics as M
from trainyard.scheduling.records import PodRecord
from trainyard.scheduling.simulator import simulate
from trainyard.scheduling.trace import RACK_TIER, SPINE_TIER, TraceJob, size_order
from trainyard.stats import percentile
from trainyard.whatif.ensemble import change_spread, ensemble_size, jittered, mean_side, start_jitter_s
from trainyard.whatif.limits import bindings, waits_of
from trainyard.whatif.scenario import Scenario

TIMELINE_STEP_S = 0.5
"""The model's scheduling cycle: finer samples would only repeat the same state."""


def refusal(job: TraceJob, scenario: Scenario) -> str | None:
    """Why the job could never run under the scenario, or None if it could."""
    terms = scenario.tenants.get(job.tenant)
    if terms is None:
        return f"tenant {job.tenant} has no queue in this stack"
    if job.priority_class and job.priority_class not in terms.granted:
        return f"priority class {job.priority_class} is not granted to {job.tenant}"
    if terms.quota_gpus is not None and job.gpus > terms.quota_gpus:
        return f"needs {job.gpus} GPUs, above {job.tenant}'s quota of {terms.quota_gpus}"
    if terms.capability_gpus is not None and job.gpus > terms.capability_gpus:
        return f"needs {job.gpus} GPUs, above queue {terms.queue}'s capability of {terms.capability_gpus}"
    return shape_refusal(job, scenario)


def shape_refusal(job: TraceJob, scenario: Scenario) -> str | None:
    """Why no node, rack or spine of the scenario could ever hold the job, or None."""
    largest = max((n.gpus for n in scenario.nodes), default=0)
    if job.gpus_per_pod > largest:
        return f"a pod needs {job.gpus_per_pod} GPUs, no node has more than {largest}"
    if job.tier is not None and not scenario.topology:
        return f"asks for topology tier {job.tier}, and this stack declares no racks"
    domains: dict[str, int] = defaultdict(int)
    for node in scenario.nodes:
        slots = node.gpus // job.gpus_per_pod if job.gpus_per_pod else job.pods
        key = node.rack if job.tier == RACK_TIER else node.spine if job.tier == SPINE_TIER else "cluster"
        domains[key] += slots
    room = max(domains.values(), default=0)
    if job.pods > room:
        where = {RACK_TIER: "one rack", SPINE_TIER: "one spine"}.get(job.tier or 0, "the cluster")
        return f"{job.pods} pods of {job.gpus_per_pod} GPUs do not fit {where} (room for {room})"
    return None


def prioritized(trace: Sequence[TraceJob], scenario: Scenario) -> list[TraceJob]:
    """The trace with each job's priority as this stack resolves its class (its tenant's default when unnamed)."""
    out = []
    for job in trace:
        terms = scenario.tenants.get(job.tenant)
        name = job.priority_class or (terms.default_priority_class if terms else None)
        value = terms.granted.get(name, 0) if terms and name else 0
        out.append(replace(job, priority=value) if value != job.priority else job)
    return out


def split(trace: Sequence[TraceJob], scenario: Scenario) -> tuple[list[dict[str, Any]], list[TraceJob]]:
    """(the jobs the stack could never run, each with its reason; the rest, prioritized as the stack resolves them)."""
    never = [{"job": job.name, "tenant": job.tenant, "gpus": job.gpus, "reason": reason}
             for job in trace if (reason := refusal(job, scenario)) is not None]
    refused = {entry["job"] for entry in never}
    return never, prioritized([job for job in trace if job.name not in refused], scenario)


def replay_side(scenario: Scenario, trace: Sequence[TraceJob], seed: int, members: int | None = None
                ) -> dict[str, Any]:
    """One side on the model: allocation, tenants, waits by size, the jobs it could never run, what is not modelled;
    the mean of an ensemble of replays (`whatif.ensemble`; `members` overrides its size), described in `ensemble`."""
    return _summarised(*replay_members(scenario, trace, seed, members))


def replay_members(scenario: Scenario, trace: Sequence[TraceJob], seed: int, members: int | None = None
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(each ensemble member's side, what the ensemble was): member k replays the trace jittered by draw k with
    tie-break seed `seed + k`, so members of two stacks on the same trace and seed are paired."""
    never, runnable = split(trace, scenario)
    if not runnable or not scenario.nodes:
        return [side_figures(scenario, runnable, never, {}, [], 0.0)], {"members": 1, "start_jitter_s": 0.0}
    count = members or ensemble_size(len(runnable))
    jitter = start_jitter_s(scenario.policy)
    arrivals = {job.name: job.arrival for job in runnable}
    sides = []
    for member in range(count):
        shifted = jittered(runnable, jitter, seed, member)
        held_back: dict[str, dict[str, float]] = {queue: {"overused_s": 0.0, "refused_s": 0.0}
                                                  for queue in scenario.weights}  # every member the same queues
        _, pods, end = simulate(shifted, list(scenario.nodes), scenario.weights, scenario.policy, seed=seed + member,
                                held_back=held_back)
        side = side_figures(scenario, runnable, never, arrivals, pods, end)  # waits from the real arrival
        side["held_back"] = {queue: {key: round(value, 3) for key, value in counts.items()}
                             for queue, counts in sorted(held_back.items())}
        sides.append(side)
    return sides, {"members": count, "start_jitter_s": round(jitter, 2)}


def _summarised(sides: list[dict[str, Any]], ensemble: dict[str, Any]) -> dict[str, Any]:
    side = mean_side(sides)
    side["ensemble"] = ensemble
    return side


def job_starts(submitted: Mapping[str, float], pods: Sequence[PodRecord]) -> dict[str, dict[str, Any]]:
    """Each started job's wait (its first pod's bind after submission) and nodes: what explains a side's figures
    job by job when two engines disagree."""
    out: dict[str, dict[str, Any]] = {}
    for job, records in sorted(M.by_job(pods).items()):
        bound = [r.bound for r in records if r.bound is not None]
        if bound and job in submitted:
            out[job] = {"wait_s": round(min(bound) - submitted[job], 1), "nodes": sorted(r.node for r in records)}
    return out


def side_figures(scenario: Scenario, runnable: Sequence[TraceJob], never: list[dict[str, Any]],
                 submitted: Mapping[str, float], pods: Sequence[PodRecord], end: float) -> dict[str, Any]:
    """One side's figures from a replay's records, whichever engine produced them (the model or a cluster)."""
    weights = scenario.weights
    side: dict[str, Any] = {"allocation": None, "goodput": None, "saturated_s": 0.0, "limits": {}, "tenants": {},
                            "wait_by_size": {},
                            "never_runnable": never, "not_modelled": list(scenario.not_modelled)}
    if not runnable or not scenario.nodes or not pods:
        side["tenants"] = {name: _tenant_figures(None, None, [], sum(1 for e in never if e["tenant"] == name))
                           for name in sorted(weights)}
        return side
    grouped = M.by_job(pods)
    line = M.timeline(runnable, grouped, submitted, end, step=TIMELINE_STEP_S)
    capacity = scenario.capacity
    allocation, saturated_s = M.allocation_while_saturated(line, capacity)
    side["allocation"] = None if allocation is None else round(allocation, 4)
    goodput = M.goodput_while_saturated(line, pods, capacity)
    side["goodput"] = None if goodput is None else round(goodput, 4)
    side["saturated_s"] = round(saturated_s, 1)
    side["limits"] = bindings(line, scenario, waits_of(runnable, grouped, submitted, end))
    shares = _shares(line, scenario)
    delays = M.queueing_delays(runnable, grouped, submitted)
    by_tenant: dict[str, list[float]] = defaultdict(list)
    for job in runnable:
        if job.name in delays:
            by_tenant[job.tenant].append(delays[job.name])
    for name in sorted(weights):
        share, entitlement = shares.get(name, (None, None))
        side["tenants"][name] = _tenant_figures(share, entitlement, by_tenant.get(name, []),
                                                sum(1 for e in never if e["tenant"] == name))
    side["wait_by_size"] = {size: {"jobs": v["jobs"], "p50_s": _round(v["p50_s"]), "p95_s": _round(v["p95_s"])}
                            for size, v in sorted(M.delays_by_size(runnable, delays).items(),
                                                  key=lambda kv: size_order(kv[0]))}
    return side


def _tenant_figures(share: float | None, entitlement: float | None, waits: Sequence[float], never: int) -> dict:
    return {"share": _round(share, 4), "entitlement": _round(entitlement, 4),
            "wait_p50_s": _round(percentile(waits, 50)), "wait_p95_s": _round(percentile(waits, 95)),
            "jobs_started": len(waits), "never_runnable": never}


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(float(value), digits)


def contended(line: M.Timeline, capacity: int, names: Sequence[str]) -> np.ndarray:
    """Samples where tenants compete: demand >= capacity and at least two tenants asking (with one tenant, every
    saturated sample). The tail of a finite trace, one tenant alone working off its backlog, says nothing about
    how the stack divides the cluster, and would make a tenant that got more earlier look as if it got less."""
    mask = M.saturated(line, capacity)
    if len(names) < 2:
        return mask
    asking = sum((line.demand_by_tenant[n] > 0).astype(int) for n in names if n in line.demand_by_tenant)
    return mask & (np.asarray(asking) >= 2)


def _shares(line: M.Timeline, scenario: Scenario) -> dict[str, tuple[float, float]]:
    """(time-averaged share of the cluster held, entitlement) per tenant while tenants compete (`contended`).
    Entitlement is what the queue plugin aims at: `proportion` the weights water-filled against demand (each
    tenant's demand capped at its GPU cap), `capacity` the queue's deserved GPUs (at most its demand)."""
    capacity = scenario.capacity
    names = sorted(scenario.tenants)
    mask = contended(line, capacity, names)
    if not mask.any():
        return {}
    demand = {n: line.demand_by_tenant.get(n, np.zeros_like(line.t))[mask] for n in names}
    held = {n: line.held_by_tenant.get(n, np.zeros_like(line.t))[mask] for n in names}
    unbounded = float("inf")
    caps: dict[str, float] = {n: float(c) if (c := scenario.tenants[n].cap_gpus) is not None else unbounded
                              for n in names}
    entitled = {n: np.zeros(int(mask.sum())) for n in names}
    capacity_plugin = scenario.policy.queue_plugin == "capacity"
    for column in range(int(mask.sum())):
        asked = {n: min(float(demand[n][column]), caps[n]) for n in names}
        if capacity_plugin:
            fair = {n: min(asked[n], float(scenario.policy.deserved.get(n, 0))) for n in names}
        else:
            fair = water_fill(capacity, scenario.weights, asked)
        for n in names:
            entitled[n][column] = fair[n]
    return {n: (float(held[n].mean() / capacity), float(entitled[n].mean() / capacity)) for n in names}


def compare(current: Scenario, proposed: Scenario, trace: Sequence[TraceJob], seed: int) -> dict[str, dict]:
    """`{"current": side, "proposed": side}`: the same trace, seed and ensemble on both; the proposed side also
    holds `change_spread`, how much each change varies over the paired members (`ensemble.change_spread`)."""
    count = ensemble_size(len(trace))
    before, after = replay_members(current, trace, seed, count), replay_members(proposed, trace, seed, count)
    result = {"current": _summarised(*before), "proposed": _summarised(*after)}
    result["proposed"]["change_spread"] = change_spread(before[0], after[0])
    return result


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}s"


def _delta(before: float | None, after: float | None, scale: float = 100.0, unit: str = " pts",
           spread: float | None = None) -> str:
    """The change, with how much it varies over the model's ensemble when that is worth saying (0.1 point, 1 s)."""
    if before is None or after is None:
        return ""
    change, varies = scale * (after - before), scale * (spread or 0.0)
    shown = varies >= (1.0 if unit.strip() == "s" else 0.1)
    if abs(change) < 0.05 and not shown:
        return ""
    return f"{change:+.1f}{f' ± {varies:.1f}' if shown else ''}{unit}"


def _count_delta(before: int, after: int) -> str:
    return f"{after - before:+d}" if after != before else ""


def table_rows(result: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """Header + rows: allocation, each tenant's share/entitlement and waits, waits by job size, never runnable."""
    cur, new = result["current"], result["proposed"]
    varies = new.get("change_spread") or {}
    rows = [["", "current", "proposed", "change"],
            ["GPU allocation (saturated)", _pct(cur["allocation"]), _pct(new["allocation"]),
             _delta(cur["allocation"], new["allocation"], spread=varies.get("allocation"))]]
    if any(side.get("goodput") != side["allocation"] for side in (cur, new)):  # work was lost to evictions
        rows.append(["GPU goodput (work kept)", _pct(cur.get("goodput")), _pct(new.get("goodput")),
                     _delta(cur.get("goodput"), new.get("goodput"), spread=varies.get("goodput"))])
    for name in sorted(set(cur["tenants"]) | set(new["tenants"])):
        a, b = cur["tenants"].get(name, {}), new["tenants"].get(name, {})
        rows.append([f"{name} share / entitlement",
                     f"{_pct(a.get('share'))} / {_pct(a.get('entitlement'))}",
                     f"{_pct(b.get('share'))} / {_pct(b.get('entitlement'))}",
                     _delta(a.get("share"), b.get("share"), spread=varies.get(f"share.{name}"))])
        rows.append([f"{name} wait p50 / p95", f"{_secs(a.get('wait_p50_s'))} / {_secs(a.get('wait_p95_s'))}",
                     f"{_secs(b.get('wait_p50_s'))} / {_secs(b.get('wait_p95_s'))}",
                     _delta(a.get("wait_p50_s"), b.get("wait_p50_s"), 1.0, " s",
                            varies.get(f"tenant_wait_p50.{name}"))])
    for size in sorted(set(cur["wait_by_size"]) | set(new["wait_by_size"]), key=size_order):
        a, b = cur["wait_by_size"].get(size, {}), new["wait_by_size"].get(size, {})
        rows.append([f"wait {size} p50 / p95", f"{_secs(a.get('p50_s'))} / {_secs(a.get('p95_s'))}",
                     f"{_secs(b.get('p50_s'))} / {_secs(b.get('p95_s'))}",
                     _delta(a.get("p50_s"), b.get("p50_s"), 1.0, " s", varies.get(f"wait_p50.{size}"))])
    rows.append(["jobs never runnable", str(len(cur["never_runnable"])), str(len(new["never_runnable"])),
                 _count_delta(len(cur["never_runnable"]), len(new["never_runnable"]))])
    return rows


def never_runnable_lines(result: Mapping[str, Mapping[str, Any]], shown: int = 5) -> list[str]:
    """The jobs only the proposal could never run, then those only the current stack could not, one line per
    tenant and reason (`team-a, 35 jobs (j0000, j0005, ...): needs 16 GPUs, above team-a's quota of 8`)."""
    before = {e["job"] for e in result["current"]["never_runnable"]}
    after = {e["job"] for e in result["proposed"]["never_runnable"]}
    only_new = [e for e in result["proposed"]["never_runnable"] if e["job"] not in before]
    only_old = [e for e in result["current"]["never_runnable"] if e["job"] not in after]
    return ([f"never runnable under the proposal: {line}" for line in _grouped(only_new, shown)]
            + [f"runnable again under the proposal: {line}" for line in _grouped(only_old, shown)])


def _grouped(entries: Sequence[Mapping[str, Any]], shown: int) -> list[str]:
    groups: dict[tuple[str, str], list[str]] = {}
    for entry in entries:
        groups.setdefault((entry["tenant"], entry["reason"]), []).append(entry["job"])
    lines = []
    for (tenant, reason), jobs in groups.items():
        names = ", ".join(jobs[:shown]) + (", ..." if len(jobs) > shown else "")
        count = f"{len(jobs)} jobs" if len(jobs) > 1 else "1 job"
        lines.append(f"{tenant}, {count} ({names}): {reason}")
    return lines
