"""The capacity and queue report of a platform, computed from listed objects (pure), and its terminal text.

Definitions:
- allocated: GPUs requested by pods bound to the node and not finished; free = allocatable - allocated
  (0 on a node that is cordoned or not Ready).
- fragmented: free GPUs on nodes that cannot host one full 8-GPU pod (0 < free < 8): capacity no
  8-GPU-per-pod gang can use.
- queue allocated: GPUs of the queue's bound pods; inqueue: minResources of gangs admitted but not
  running yet (Volcano holds them); deserved/capability/guarantee from the Queue's spec (deserved is
  set there for the `capacity` plugin; `proportion` computes it from weights: weight_share is the
  queue's weight share of the schedulable GPUs, capped by its capability); volcano_allocated is
  Volcano's own `status.allocated`, for comparison.
- pending gangs: PodGroups not running, with why (their Unschedulable condition, or Volcano's enqueue
  event for gangs still outside their queue).
- tenant quota: every ResourceQuota's hard and used (status), per resource.
- stalled: TrainJobs the controller's stall loop finds holding GPUs while their progress has stopped (recorded on
  their namespace, `trainyard.dev/stalled-trainjobs`; also a `TrainJobStalled` Event on each), the longest stalled
  first: when progress stopped, and when the loop first found it.
- never starting: TrainJobs the controller failed because their pods can never be created (the API server refuses
  them: Pod Security, LimitRange, ...), with the API server's words; they hold nothing.
- budgets: each namespace with a GPU-hour budget, as the controller's budget loop last found it (its
  `trainyard.dev/budget-status`): spent this period, percent, state (ok, warning from 80 %, exhausted from
  100 %), since when, the action applied and the date it runs out at the period's pace.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Mapping

from trainyard.k8s import (NAMESPACE_BUDGET_ANNOTATION, NAMESPACE_BUDGET_STATUS_ANNOTATION, NAMESPACE_STALLED_ANNOTATION,
                           NEVER_STARTS_LABEL, format_quantity)
from trainyard.tenant_policy import Budget, BudgetStatus, stalled_from_annotation
from trainyard.timestamps import format_epoch

from .live import Snapshot
from trainyard.scheduling.cluster_state import (FULL_POD_GPUS, GPU, QueueUse, number, lost_nodes, nodes_from, queue_uses,
                                                resources, waiting_reasons, weight_shares)


@dataclass
class Report:
    nodes: list[dict] = field(default_factory=list)
    racks: list[dict] = field(default_factory=list)
    totals: dict = field(default_factory=dict)
    queues: list[dict] = field(default_factory=list)
    pending: list[dict] = field(default_factory=list)
    quotas: list[dict] = field(default_factory=list)
    budgets: list[dict] = field(default_factory=list)
    stalled: list[dict] = field(default_factory=list)
    never_starting: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _gpu_row(name: str, allocatable: Fraction, allocated: Fraction, free: Fraction, fragmented: Fraction) -> dict:
    return {"allocatable": number(allocatable), "allocated": number(allocated), "free": number(free),
            "fragmented": number(fragmented)}


def build_report(snap: Snapshot, full_pod_gpus: int = FULL_POD_GPUS,
                 start_estimates: Mapping[str, str] | None = None) -> Report:
    """`start_estimates`: PodGroup (namespace/name) -> its start estimate's words, shown beside each pending gang."""
    nodes = nodes_from(snap.nodes, snap.pods, snap.hypernodes)
    report = Report()
    racks: dict[str, dict] = {}
    for node in nodes:
        allocatable = node.allocatable.get(GPU, Fraction(0))
        allocated = node.used.get(GPU, Fraction(0))
        free = node.free(GPU)
        fragmented = free if 0 < free < full_pod_gpus else Fraction(0)
        report.nodes.append({"node": node.name, "rack": node.rack, "spine": node.spine, "schedulable": node.schedulable,
                             "lost": node.lost, **_gpu_row(node.name, allocatable, allocated, free, fragmented)})
        rack = racks.setdefault(node.rack, {"rack": node.rack, "spine": node.spine, "nodes": 0, "allocatable": 0,
                                            "allocated": 0, "free": 0, "fragmented": 0, "largest_free_node": 0})
        rack["nodes"] += 1
        for key, value in (("allocatable", allocatable), ("allocated", allocated), ("free", free),
                           ("fragmented", fragmented)):
            rack[key] = number(Fraction(rack[key]) + value)
        rack["largest_free_node"] = max(rack["largest_free_node"], number(free))
    report.racks = [racks[k] for k in sorted(racks)]
    report.totals = {key: number(sum((Fraction(r[key]) for r in report.racks), Fraction(0)))
                     for key in ("allocatable", "allocated", "free", "fragmented")}
    report.totals["nodes"] = len(nodes)
    why = waiting_reasons(snap.pod_groups, snap.events)
    uses = queue_uses(snap.queues, snap.pod_groups, snap.pods, why, lost_nodes(snap.nodes))
    shares = weight_shares(uses, sum((n.allocatable.get(GPU, Fraction(0)) for n in nodes if n.schedulable), Fraction(0)))
    for use in sorted(uses.values(), key=lambda q: q.name):
        report.queues.append({
            "queue": use.name, "state": use.state, "weight": use.weight,
            "weight_share": round(float(shares[use.name]), 1) if use.name in shares else None,
            "deserved": _gpu(use.deserved), "capability": _gpu(use.capability), "guarantee": _gpu(use.guarantee),
            "allocated": number(use.allocated.get(GPU, 0)), "inqueue": number(use.inqueue.get(GPU, 0)),
            "volcano_allocated": _gpu(use.volcano_allocated),
            "running_gangs": use.running_gangs, "pending_gangs": len(use.pending_gangs)})
    report.pending = [{"queue": queue, "podgroup": pg, "phase": phase, "why": reason,
                       **({"estimate": start_estimates.get(pg)} if start_estimates is not None else {})}
                      for queue, pg, phase, reason in _pending_in_order(uses)]
    for quota in sorted(snap.quotas, key=lambda q: (q["metadata"].get("namespace", ""), q["metadata"]["name"])):
        hard = resources((quota.get("spec") or {}).get("hard"))
        used = resources((quota.get("status") or {}).get("used"))
        for key in sorted(hard):
            limit, now = hard[key], used.get(key, Fraction(0))
            show = (lambda v: format_quantity(v, binary=True)) if key.endswith("memory") else number
            report.quotas.append({"namespace": quota["metadata"].get("namespace", ""), "quota": quota["metadata"]["name"],
                                  "resource": key, "used": show(now), "hard": show(limit),
                                  "percent": round(float(now / limit * 100), 1) if limit else 0.0})
    report.budgets = budget_rows(snap.namespaces)
    report.stalled = stalled_rows(snap.namespaces)
    report.never_starting = never_starting_rows(snap.never_starting)
    return report


def never_starting_rows(trainjobs: list[dict]) -> list[dict]:
    """TrainJobs that will never start, with why: those the controller failed for it (its label finds them; its
    Failed condition, which tenants cannot write, confirms it). They hold nothing: their gang was released."""
    rows = []
    for trainjob in trainjobs:
        meta = trainjob.get("metadata") or {}
        reason = (meta.get("labels") or {}).get(NEVER_STARTS_LABEL)
        failed = next((c for c in (trainjob.get("status") or {}).get("conditions") or []
                       if c.get("type") == "Failed" and c.get("status") == "True"), None)
        if failed is None or failed.get("reason") != reason:
            continue
        rows.append({"namespace": meta.get("namespace", ""), "trainjob": meta.get("name", ""), "reason": reason,
                     "why": failed.get("message", ""), "since": failed.get("lastTransitionTime", "")})
    return sorted(rows, key=lambda r: (r["namespace"], r["trainjob"]))


def _pending_in_order(uses: Mapping[str, QueueUse]) -> list[tuple[str, str, str, str]]:
    """(queue, namespace/PodGroup, phase, why) of every pending gang, in the report's order (queue, then group)."""
    return [(use.name, pg, phase, reason) for use in sorted(uses.values(), key=lambda q: q.name)
            for pg, phase, reason in use.pending_gangs]


def unadmitted_shown(snap: Snapshot, limit: int | None) -> set[str]:
    """Namespaces of the gangs among the first `limit` pending rows that Volcano keeps out of their queue (phase
    Pending): only their events say why (`gang_pending.enqueue_cause`), so a text report reads the events of those
    namespaces alone. Events are not in the API server's watch cache (kube-apiserver's `DefaultWatchCacheSizes`),
    so a cluster-wide list of them reads every Event in etcd: seconds at 10,000 TrainJobs."""
    rows = _pending_in_order(queue_uses(snap.queues, snap.pod_groups, snap.pods, lost=lost_nodes(snap.nodes)))
    return {pg.split("/", 1)[0] for _, pg, phase, _ in rows[:limit] if phase == "Pending"}


def stalled_rows(namespaces: list[dict]) -> list[dict]:
    """One row per stalled TrainJob as the controller's stall loop last recorded it on its namespace, the longest
    stalled first."""
    rows = [{"namespace": namespace["metadata"]["name"], "trainjob": entry.trainjob,
             "why": entry.why + ("; suspended (spec.suspend: false resumes it)" if entry.suspended else ""),
             "stopped": format_epoch(entry.since), "seen": entry.flagged}
            for namespace in namespaces
            for entry in stalled_from_annotation(
                (namespace["metadata"].get("annotations") or {}).get(NAMESPACE_STALLED_ANNOTATION))]
    return sorted(rows, key=lambda row: (row["stopped"], row["namespace"], row["trainjob"]))


def budget_rows(namespaces: list[dict]) -> list[dict]:
    """One row per namespace with a budget; before the controller's first round the status columns are empty."""
    rows = []
    for namespace in sorted(namespaces, key=lambda n: n["metadata"]["name"]):
        annotations = namespace["metadata"].get("annotations") or {}
        budget = Budget.from_annotation(annotations.get(NAMESPACE_BUDGET_ANNOTATION))
        if budget is None:
            continue
        status = BudgetStatus.from_annotation(annotations.get(NAMESPACE_BUDGET_STATUS_ANNOTATION))
        rows.append({"namespace": namespace["metadata"]["name"], "budget": f"{budget.gpu_hours:g} GPU-h {budget.period}",
                     "period": status.period if status else None,
                     "spent": round(status.gpu_hours, 1) if status else None,
                     "percent": round(status.percent, 1) if status else None,
                     "state": status.state if status else "not yet measured", "since": status.since if status else None,
                     "action": budget.action + (" (applied)" if status and status.action else ""),
                     "runs_out": status.runs_out if status else None})
    return rows


def _gpu(values: dict) -> int | float | None:
    return number(values[GPU]) if GPU in values else None


TEXT_ROWS = 25
"""Rows the text report prints of a table that grows with the cluster or the workload (nodes, pending gangs, quota
rows); `trainyard report --all` prints every row, `--out` writes them all to report.json. At 1,000 nodes and 10,000
pending gangs the full text was 580 KB and took 5 s to lay out (bench/scale.py)."""


def _table(title: str, rows: list[dict], columns: list[str], limit: int | None = None, noun: str = "rows") -> str:
    from rich.console import Console
    from rich.table import Table

    shown = rows if limit is None else rows[:limit]
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, justify="left" if column in ("node", "rack", "spine", "queue", "state", "podgroup",
                                                               "phase", "why", "namespace", "quota", "resource", "estimate",
                                                               "budget", "period", "since", "action", "runs_out", "trainjob",
                                                               "seen")
                         else "right")
    for row in shown:
        table.add_row(*["-" if row.get(c) is None else str(row.get(c)) for c in columns])
    console = Console(width=160, record=True, force_terminal=False, color_system=None)
    with console.capture() as capture:
        console.print(table)
    text = capture.get()
    if len(shown) < len(rows):
        text += (f"... and {len(rows) - len(shown)} more {noun} (of {len(rows)}): `trainyard report --all` prints "
                 "them, `--out DIR` writes report.json\n")
    return text


def _lost_line(nodes: list[dict]) -> list[str]:
    lost = [n["node"] for n in nodes if n.get("lost")]
    return [f"Lost nodes (not ready: their pods hold nothing, their GPUs are not offered): {', '.join(lost)}"] if lost else []


def render_text(report: Report, limit: int | None = TEXT_ROWS) -> str:
    """The report as terminal text; tables that grow with the cluster or the workload show their first `limit`
    rows (None: all)."""
    gpu_cols = ["allocatable", "allocated", "free", "fragmented"]
    totals = report.totals
    parts = [
        f"GPUs ({GPU}): {totals.get('allocatable', 0)} allocatable, {totals.get('allocated', 0)} allocated, "
        f"{totals.get('free', 0)} free, {totals.get('fragmented', 0)} fragmented "
        f"(free on nodes that cannot host a full {FULL_POD_GPUS}-GPU pod) on {totals.get('nodes', 0)} nodes",
        *_lost_line(report.nodes),
        _table("GPUs by node", report.nodes, ["node", "rack", "spine", *gpu_cols], limit, "nodes"),
        _table("GPUs by rack", report.racks, ["rack", "spine", "nodes", *gpu_cols, "largest_free_node"]),
        _table(f"Queues ({GPU})", report.queues, ["queue", "state", "weight", "weight_share", "deserved", "capability",
                                                  "guarantee", "allocated", "inqueue", "volcano_allocated",
                                                  "running_gangs", "pending_gangs"]),
    ]
    if report.pending:
        columns = ["queue", "podgroup", "phase", "why"] + (["estimate"] if "estimate" in report.pending[0] else [])
        parts.append(_table("Pending gangs", report.pending, columns, limit, "pending gangs"))
    if report.quotas:
        parts.append(_table("Tenant quotas", report.quotas, ["namespace", "quota", "resource", "used", "hard",
                                                             "percent"], limit, "quota rows"))
    if report.never_starting:
        parts.append(_table("TrainJobs that can never start (failed, holding nothing)", report.never_starting,
                            ["namespace", "trainjob", "reason", "why", "since"], limit, "TrainJobs that never start"))
    if report.stalled:
        parts.append(_table("Stalled TrainJobs (holding GPUs, progress stopped)", report.stalled,
                            ["namespace", "trainjob", "why", "stopped", "seen"], limit, "stalled TrainJobs"))
    if report.budgets:
        parts.append(_table("Tenant budgets (GPU-hours)", report.budgets, ["namespace", "budget", "period", "spent",
                                                                          "percent", "state", "since", "action",
                                                                          "runs_out"], limit, "budgets"))
    return "\n".join(parts)
