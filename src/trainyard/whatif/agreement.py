"""The what-if agreement, model against cluster (pure): the stack changes it proposes, the workload, and how a
predicted change is scored against the change the cluster engine measured.

The base is the local stack with room to move (each tenant may use the whole cluster, a TrainJob count no replay
reaches, its controller configured by the stack as in a real cluster), so every kind of change can show an
effect; one job in four of team-b names `training-high`, which only the priority-class change grants it. A case is
one change on one trace seed: the model's change (proposed - current) beside the cluster's, per figure, with how
much the model's own ensemble varies it. A sign is scored only where the cluster's change exceeds
its run-to-run spread (the largest difference between two cluster replays of the same base over the seeds; for a
wait, at least one scheduling cycle); the errors are absolute, in points or seconds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from trainyard import k8s as K
from trainyard.scheduling.trace import TraceJob

HIGH = "training-high"
NO_CHANGE = 0.05
"""Points or seconds: a change smaller than this is none (the what-if table prints it as no change)."""
GPU = K.GPU_RESOURCE


@dataclass(frozen=True)
class Change:
    name: str
    kind: str
    """One of the issue's kinds: queue weight, capability, quota, a new tenant, a priority class grant, scheduler
    profile, reclaim rule, topology tier."""
    describe: str
    apply: Callable[[dict], None]


def _tenants(doc: dict) -> dict[str, dict]:
    return {t["name"]: t for t in doc["config"]["trainyard:tenants"]}


def base(local: Mapping[str, Any]) -> dict:
    """The local stack with room to move: each tenant's capability and quota the whole cluster (32 GPUs)."""
    doc = copy.deepcopy(dict(local))
    # the controller as a cluster runs it (a Deployment the stack configures), so a change may set its reclaim
    doc["config"]["trainyard:controllersRunLocally"] = "false"
    doc["config"]["trainyard:controller"]["webhook"] = {"certificate": "cert-manager"}
    for tenant in _tenants(doc).values():
        tenant["queue"]["capability"][GPU] = 32
        tenant["quota"]["gpu"] = 32
        tenant["quota"]["trainJobs"] = 1000
    return doc


def _weight(doc: dict) -> None:
    _tenants(doc)["team-b"]["queue"]["weight"] = 4


def _capability(doc: dict) -> None:
    _tenants(doc)["team-a"]["queue"]["capability"][GPU] = 16


def _quota(doc: dict) -> None:
    team = _tenants(doc)["team-b"]
    team["quota"]["gpu"] = 24
    team["queue"]["capability"][GPU] = 24  # a queue may not promise more than its namespace's quota


def _new_tenant(doc: dict) -> None:
    team = copy.deepcopy(_tenants(doc)["team-b"])
    team.update(name="team-c", namespace="team-c", groups={"admins": ["team-c-admins"], "users": ["team-c-users"]})
    team["queue"]["name"] = "team-c"
    doc["config"]["trainyard:tenants"].append(team)


def _grant(doc: dict) -> None:
    _tenants(doc)["team-b"]["priorityClasses"] = [HIGH]


def _profile(doc: dict) -> None:
    doc["config"]["trainyard:scheduler"]["profile"] = "fair-share"


def _reclaim(doc: dict) -> None:
    doc["config"]["trainyard:scheduler"]["queuePlugin"] = "capacity"
    for name, deserved in (("team-a", 21), ("team-b", 11)):
        _tenants(doc)[name]["queue"]["deserved"] = {GPU: deserved}
    doc["config"].setdefault("trainyard:controller", {})["reclaim"] = "fair-sharing"


def _topology(doc: dict) -> None:
    doc["config"]["trainyard:topology"]["racks"] = [{"name": f"rack-{i}", "spine": "spine-0"} for i in range(4)]


CHANGES: tuple[Change, ...] = (
    Change("weight", "queue weight", "team-b's queue weight 1 -> 4", _weight),
    Change("capability", "capability", "team-a's queue capability 32 -> 16 GPUs", _capability),
    Change("quota", "quota", "team-b's GPU quota (and capability) 32 -> 24", _quota),
    Change("new-tenant", "a new tenant", "team-c onboarded like team-b (weight 1, 32 GPUs)", _new_tenant),
    Change("grant", "a priority class grant", f"team-b granted {HIGH}", _grant),
    Change("profile", "scheduler profile", "scheduler profile gang -> fair-share", _profile),
    Change("reclaim", "reclaim rule", "capacity queues (deserved 21/11) with the controller's fair-sharing reclaim",
           _reclaim),
    Change("topology", "topology tier", "four racks of one node instead of two of two", _topology),
)


def proposed(doc: Mapping[str, Any], change: Change) -> dict:
    out = copy.deepcopy(dict(doc))
    change.apply(out)
    return out


def _every_nth(trace: Sequence[TraceJob], of: str, every: int, **changes: Any) -> list[TraceJob]:
    """The trace with `changes` made to every `every`th job of tenant `of`."""
    out, seen = [], 0
    for job in trace:
        if job.tenant == of:
            seen += 1
            if seen % every == 0:
                job = replace(job, **changes)
        out.append(job)
    return out


def with_high_priority(trace: Sequence[TraceJob], tenant: str = "team-b", every: int = 4) -> list[TraceJob]:
    """Every `every`th job of `tenant` names the high class (refused until the tenant is granted it)."""
    return _every_nth(trace, tenant, every, priority_class=HIGH)


def workload(change: Change, trace: Sequence[TraceJob]) -> list[TraceJob]:
    """The trace a change is judged on: for a new tenant, one team-b job in three is the new team's (a team waiting
    to be onboarded); for every other change, the trace itself."""
    if change.apply is not _new_tenant:
        return list(trace)
    return _every_nth(trace, "team-b", 3, tenant="team-c", priority_class=None)


def figures(side: Mapping[str, Any]) -> dict[str, float | None]:
    """The figures compared, flat: allocation and goodput (points), each tenant's share (points), waits by size
    (seconds)."""
    out: dict[str, float | None] = {
        "allocation": _points(side.get("allocation")), "goodput": _points(side.get("goodput"))}
    for name, tenant in (side.get("tenants") or {}).items():
        out[f"share.{name}"] = _points(tenant.get("share"))
    for size, waits in (side.get("wait_by_size") or {}).items():
        out[f"wait_p50.{size}"] = waits.get("p50_s")
        out[f"wait_p95.{size}"] = waits.get("p95_s")
    return out


def _points(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def changes_of(current: Mapping[str, Any], proposed_side: Mapping[str, Any]) -> dict[str, float]:
    """proposed - current per figure both sides have."""
    before, after = figures(current), figures(proposed_side)
    out = {}
    for key in before.keys() & after.keys():
        old, new = before[key], after[key]
        if old is not None and new is not None:
            out[key] = new - old
    return out


def spread(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, float]:
    """Run-to-run spread per figure: how far two cluster replays of the same side differ."""
    return {key: abs(value) for key, value in changes_of(first, second).items()}


def spread_of_replays(replays: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Run-to-run spread per figure over several cluster replays of one side: the widest pair (its range)."""
    return pooled_spread([spread(first, second) for i, first in enumerate(replays) for second in replays[i + 1:]])


def pooled_spread(per_seed: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The spread each figure is scored against: the largest run-to-run difference any seed showed (one pair of
    replays per seed says little alone; the engine's noise does not depend on the trace's seed)."""
    out: dict[str, float] = {}
    for noise in per_seed:
        for key, value in noise.items():
            out[key] = max(out.get(key, 0.0), value)
    return out


def case(change: Change, seed: int, model: Mapping[str, Mapping[str, Any]], cluster: Mapping[str, Mapping[str, Any]],
         noise: Mapping[str, float], wait_floor_s: float = 0.0) -> dict[str, Any]:
    """One change on one seed: per figure the model's change, the cluster's, the error, and whether the sign is
    scored (the cluster's change beyond the spread) and agrees. A wait's spread is at least `wait_floor_s`, the
    engine's resolution (one scheduling cycle in trace seconds): a smaller change is not one it can measure."""
    predicted = changes_of(model["current"], model["proposed"])
    measured = changes_of(cluster["current"], cluster["proposed"])
    rows = {}
    for key in sorted(predicted.keys() & measured.keys()):
        floor = wait_floor_s if key.startswith("wait_") else 0.0
        spread_here = max(noise.get(key, 0.0), floor)
        beyond = abs(measured[key]) > spread_here
        error = abs(predicted[key] - measured[key])
        model_sd = _model_sd(model["proposed"], key)
        rows[key] = {"model": round(predicted[key], 2), "cluster": round(measured[key], 2),
                     "error": round(error, 2), "spread": round(spread_here, 2),
                     "sign_scored": beyond,
                     "sign_agrees": _sign(predicted[key]) == _sign(measured[key]) if beyond else None,
                     "model_sd": None if model_sd is None else round(model_sd, 2),
                     "within_model_spread": None if model_sd is None else error <= 2 * model_sd + spread_here}
    left_out = sorted({note for side in model.values() for note in side.get("not_modelled") or []})
    return {"change": change.name, "kind": change.kind, "describe": change.describe, "seed": seed, "figures": rows,
            "not_modelled": left_out}


def _model_sd(proposed_side: Mapping[str, Any], key: str) -> float | None:
    """How much the model's predicted change varies over its paired ensemble members (`compare.compare`'s
    `change_spread`), in the figure's unit (points or seconds); None where the model gives none."""
    value = (proposed_side.get("change_spread") or {}).get(key)
    if value is None:
        return None
    return float(value) if key.startswith("wait_") else 100.0 * float(value)


def _sign(change: float) -> int:
    """-1, 0 or +1: a change under `NO_CHANGE` is no change (a prediction of none is a sign too)."""
    return 0 if abs(change) < NO_CHANGE else (1 if change > 0 else -1)


def summary(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The headline over every case: distinct changes, seeds, sign agreement over scored figures, largest errors."""
    scored = [row["sign_agrees"] for c in cases for row in c["figures"].values() if row["sign_scored"]]
    modelled = [row["sign_agrees"] for c in cases if not c.get("not_modelled") for row in c["figures"].values()
                if row["sign_scored"]]

    def largest(prefix: str, modelled_only: bool = False) -> float | None:
        errors = [row["error"] for c in cases if not (modelled_only and c.get("not_modelled"))
                  for key, row in c["figures"].items() if key.startswith(prefix)]
        return max(errors) if errors else None

    disagreeing = [f"{c['change']} seed {c['seed']}: {key}" for c in cases for key, row in c["figures"].items()
                   if row["sign_scored"] and not row["sign_agrees"]]
    return {"changes": len({c["change"] for c in cases}), "seeds": len({c["seed"] for c in cases}),
            "cases": len(cases), "signs_scored": len(scored), "signs_disagreeing": disagreeing,
            "sign_agreement": round(sum(scored) / len(scored), 3) if scored else None,
            "sign_agreement_modelled": round(sum(modelled) / len(modelled), 3) if modelled else None,
            "max_allocation_error_points": largest("allocation"), "max_goodput_error_points": largest("goodput"),
            "max_share_error_points": largest("share."), "max_wait_p50_error_s": largest("wait_p50."),
            "max_allocation_error_points_modelled": largest("allocation", modelled_only=True),
            "max_share_error_points_modelled": largest("share.", modelled_only=True),
            "within_model_spread": _within(cases, ("allocation", "goodput", "share."))}


def _within(cases: Sequence[Mapping[str, Any]], prefixes: tuple[str, ...]) -> float | None:
    """Share of the figures (allocation, goodput, shares) whose cluster change lies within the model's mean change
    +- 2 standard deviations of its ensemble (plus the cluster's spread): how often the model's stated uncertainty
    covers what the real scheduler did."""
    judged = [row["within_model_spread"] for c in cases for key, row in c["figures"].items()
              if key.startswith(prefixes) and row.get("within_model_spread") is not None]
    return round(sum(judged) / len(judged), 3) if judged else None
