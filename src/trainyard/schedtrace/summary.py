"""One run's figures from its records, and the table rows the benchmark prints (pure)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from trainyard.schedtrace import metrics as M
from trainyard.scheduling.trace import TraceJob, size_order

SCHEDULE_CYCLE_S = 0.5
"""vc-scheduler's --schedule-period on the local cluster (cluster/local.py)."""
PARTIAL_MIN_CYCLES = 2
SERIES_STEP_S = 2.0


def summarize(trace: Sequence[TraceJob], pods: Sequence[M.PodRecord], submitted: Mapping[str, float], end: float,
              capacity: int, weights: Mapping[str, float], rack_of: Mapping[str, str],
              spine_of: Mapping[str, str]) -> dict:
    """Every figure the benchmark reports for one run, plus down-sampled series for the plots."""
    grouped = M.by_job(pods)
    line = M.timeline(trace, grouped, submitted, end, step=SCHEDULE_CYCLE_S / 2)
    allocation, contended = M.allocation_while_saturated(line, capacity)
    goodput = M.goodput_while_saturated(line, pods, capacity)
    partial = M.partial_gangs(trace, grouped, PARTIAL_MIN_CYCLES * SCHEDULE_CYCLE_S, end)
    delays = M.queueing_delays(trace, grouped, submitted)
    finished = [job.name for job in trace if M.job_finished(job, grouped.get(job.name, ())) is not None]
    every = max(1, int(round(SERIES_STEP_S / float(line.t[1] - line.t[0])))) if len(line.t) > 1 else 1
    return {
        "jobs": len(trace), "jobs_finished": len(finished), "run_s": round(end, 1),
        "allocation_while_saturated": None if allocation is None else round(allocation, 4),
        "goodput_while_saturated": None if goodput is None else round(goodput, 4),
        "saturated_s": round(contended, 1),
        "evicted_share": evicted_share(pods),
        "lost_share": lost_share(pods),
        "lost_per_eviction": lost_per_eviction(pods),
        "idle_points_by_cause": M.idle_breakdown(trace, grouped, submitted, line, capacity, weights),
        "partial_gangs": partial,
        "partial_gang_count": len(partial),
        "queues": M.queue_shares(line, capacity, weights),
        "delay_by_size": dict(sorted(M.delays_by_size(trace, delays).items(), key=lambda kv: size_order(kv[0]))),
        "binding": M.bind_rate(pods),
        "topology": M.topology_splits(trace, grouped, rack_of, spine_of),
        "series": {"t": _rounded(line.t[::every]), "demand": _rounded(line.demand[::every]),
                   "held": {name: _rounded(values[::every]) for name, values in line.held_by_tenant.items()}},
    }


def evicted_share(pods: Sequence[M.PodRecord]) -> float:
    """Of every GPU-second held, the share held by pods that ended without succeeding (evicted to make room,
    then run again from their job's last checkpoint, or from the start): `lost_share` is the part of it lost."""
    spans = [(p.gpus * (p.ended - p.bound), p.succeeded) for p in pods if p.bound is not None and p.ended is not None]
    total = sum(span for span, _ in spans)
    return round(sum(span for span, ok in spans if not ok) / total, 4) if total else 0.0


def lost_share(pods: Sequence[M.PodRecord]) -> float:
    """Of every GPU-second held, the share whose work was thrown away: evicted pods' time after their job's last
    checkpoint (all of it without one)."""
    spans = [(p.gpus * (p.ended - p.bound), p.gpus * min(p.kept_s, p.ended - p.bound), p.succeeded)
             for p in pods if p.bound is not None and p.ended is not None]
    total = sum(span for span, _, _ in spans)
    return round(sum(span - kept for span, kept, ok in spans if not ok) / total, 4) if total else 0.0


def lost_per_eviction(pods: Sequence[M.PodRecord]) -> dict[str, float | int]:
    """Each eviction (a job's pods ended together without succeeding): the GPU-seconds it threw away, their count,
    mean and largest."""
    lost: dict[tuple[str, float], float] = {}
    for p in pods:
        if p.bound is not None and p.ended is not None and not p.succeeded:
            key = (p.job, p.ended)
            lost[key] = lost.get(key, 0.0) + p.gpus * max(0.0, p.ended - p.bound - p.kept_s)
    values = list(lost.values())
    return {"evictions": len(values), "mean_gpu_s": round(sum(values) / len(values), 1) if values else 0.0,
            "max_gpu_s": round(max(values), 1) if values else 0.0}


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 2) for v in values]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def table_rows(results: Mapping[str, dict]) -> list[list[str]]:
    """Header + one row per run: allocation, partial gangs, share deviation per queue, binds/s, splits."""
    first = next(iter(results.values()))
    queues = list(first["queues"])
    header = (["run", "alloc % (saturated s)", "partial gangs"] + [f"{q} share/fair (dev)" for q in queues]
              + ["pods bound/s mean/peak", "rack-split gangs", "beyond tier", "finished", "wall s"])
    rows = [header]
    for run, figures in results.items():
        shares = [f"{_pct(s['share'])}/{_pct(s['fair_share'])} ({s['deviation_points']:+.1f})"
                  if s["share"] is not None else "-" for s in figures["queues"].values()]
        binding = figures["binding"]
        rows.append([run, f"{_pct(figures['allocation_while_saturated'])} ({figures['saturated_s']:.0f})",
                     str(len(figures["partial_gangs"])), *shares,
                     f"{binding['mean_per_s'] or '-'}/{binding['peak_per_s'] or '-'}",
                     str(figures["topology"]["gangs_split_across_racks"]),
                     str(len(figures["topology"]["beyond_allowed_tier"])),
                     f"{figures['jobs_finished']}/{figures['jobs']}", f"{figures.get('wall_s', figures['run_s']):.0f}"])
    return rows


def delay_rows(results: Mapping[str, dict]) -> list[list[str]]:
    """Header + one row per run: p50/p95 queueing delay (s) per job size."""
    sizes = sorted({size for figures in results.values() for size in figures["delay_by_size"]}, key=size_order)
    rows = [["run", *sizes]]
    for run, figures in results.items():
        by_size = figures["delay_by_size"]
        rows.append([run, *(f"{_seconds(by_size[s]['p50_s'])}/{_seconds(by_size[s]['p95_s'])}" if s in by_size else "-"
                            for s in sizes)])
    return rows


def idle_rows(results: Mapping[str, dict]) -> list[list[str]]:
    """Header + one row per run: idle GPUs while saturated, in allocation points, by cause."""
    causes = list(M.IDLE_CAUSES)
    rows = [["run", *(cause.replace("_", " ") for cause in causes)]]
    for run, figures in results.items():
        idle = figures.get("idle_points_by_cause") or {}
        rows.append([run, *(f"{idle[c]:.1f}" if c in idle else "-" for c in causes)])
    return rows


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows[1:]])


def calibration_header(queues: Sequence[str]) -> list[str]:
    return (["profile", "model alloc % (mean, min-max)", "real alloc %"]
            + [f"{q} dev model / real" for q in queues] + ["evicted % model / real", "model s per run"])


def calibration_row(profile: str, runs: Sequence[Mapping], real: Mapping | None) -> list[str]:
    """One profile: the model's mean (and range) over seeds beside one real replay's figures."""
    allocation = [100 * r["allocation"] for r in runs if r["allocation"] is not None]
    queues = list(runs[0]["deviation_points"])

    def mean(values: Sequence[float]) -> float:
        return sum(values) / len(values) if values else float("nan")

    row = [profile, f"{mean(allocation):.1f} ({min(allocation):.1f}-{max(allocation):.1f})" if allocation else "-",
           _pct(real["allocation_while_saturated"]) if real else "-"]
    for queue in queues:
        modelled = mean([r["deviation_points"][queue] for r in runs if r["deviation_points"][queue] is not None])
        measured = (real or {}).get("queues", {}).get(queue, {}).get("deviation_points")
        row.append(f"{modelled:+.1f} / " + ("-" if measured is None else f"{measured:+.1f}"))
    row.append(f"{100 * mean([r['evicted_share'] for r in runs]):.1f} / "
               + ("-" if not real or "evicted_share" not in real else f"{100 * real['evicted_share']:.1f}"))
    row.append(f"{mean([r['seconds'] for r in runs]):.1f}")
    return row
