#!/usr/bin/env python3
"""Goodput of gang-aware reclaim with checkpoints: the scheduling trace (`bench/scheduling_trace.py`'s cluster, tenants
and job mix), each job given a checkpoint interval (30/60/120 s of work; a quarter save none), replayed on trainyard's
model of the scheduler (`trainyard.scheduling.simulator`) on several trace seeds:

- `gang`: the shipped default, no reclaim (nothing is lost, queues drift from their shares);
- `reclaim`: the shipped reclaim profile (`controller.reclaim: fair-sharing`, holds), victims suspended at once and
  resumed from their last periodic checkpoint;
- `reclaim-ask`: the same, asking victims that checkpoint to save first (`scheduling.checkpoints`): they go once
  the checkpoint is reported, ASK_S after the ask, plus a reclaim round.

Goodput is the GPU-seconds of work kept while demand is at least the cluster (work lost to an eviction does not
count) over the GPU-seconds available then. The target is the issue's: on the shipped reclaim profile, the worst
seed's goodput >= 95 %, every queue within 3 points of its fair share, no partial gang, nothing beyond a hard tier,
lost work <= 1 % of the GPU-seconds held.

Usage: .venv/bin/python bench/goodput.py [--seeds 51,52,53] [--jobs 150] [--ask-s 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import scheduling_trace as st

from trainyard import k8s as K
from trainyard.benchkit import run_record, write_results
from trainyard.cluster.spec import ClusterSpec, gpu_nodes
from trainyard.scheduling.simulator import ModelNode, simulate
from trainyard.scheduling.trace import DEFAULT_TENANTS, generate, with_checkpoints

SHIPPED_RECLAIM = "gang-capacity-reclaim-kueue-hold"
"""What `controller.reclaim: fair-sharing` (with its default holds) runs, in `bench/scheduling_trace.py`'s names."""
ASK_S = 5.0
"""Seconds from an ask until the victim's checkpoint is reported: the helper polls every 5 s by default (2.5 s on
average), a small model saves in about a second, and the report is one request."""
TARGET = {"goodput": 0.95, "max_share_deviation_points": 3.0, "lost_share": 0.01, "partial_gangs": 0, "beyond_tier": 0}


def figures(trace, spec: ClusterSpec, policy, seed: int) -> dict:
    nodes = [ModelNode(n["metadata"]["name"], n["metadata"]["labels"][K.RACK_LABEL],
                       n["metadata"]["labels"][K.SPINE_LABEL], spec.gpus_per_node) for n in gpu_nodes(spec)]
    rack_of, spine_of = {n.name: n.rack for n in nodes}, {n.name: n.spine for n in nodes}
    weights = {t.name: t.weight for t in DEFAULT_TENANTS}
    capacity = spec.nodes * spec.gpus_per_node
    submitted, pods, end = simulate(trace, nodes, weights, policy, seed=seed)
    out = st.summary.summarize(trace, pods, submitted, end, capacity, weights, rack_of, spine_of)
    return {"allocation": out["allocation_while_saturated"], "goodput": out["goodput_while_saturated"],
            "lost_share": out["lost_share"], "evicted_share": out["evicted_share"],
            "lost_per_eviction": out["lost_per_eviction"], "partial_gangs": out["partial_gang_count"],
            "beyond_tier": len(out["topology"]["beyond_allowed_tier"]),
            "max_share_deviation_points": round(max(abs(q["deviation_points"]) for q in out["queues"].values()), 2),
            "jobs_finished": out["jobs_finished"], "jobs": out["jobs"]}


def policies(capacity: int, ask_s: float) -> dict:
    reclaim = st.model_policy(SHIPPED_RECLAIM, capacity)
    assert reclaim is not None
    from dataclasses import replace

    return {"gang": st.model_policy("gang", capacity), "reclaim": reclaim,
            "reclaim-ask": replace(reclaim, checkpoint_ask_s=ask_s)}


def summarize(runs: dict[str, list[dict]]) -> dict:
    """Per profile: the worst seed's goodput and each figure's mean and range over the seeds."""
    out = {}
    for profile, rows in runs.items():
        entry: dict = {}
        for key in ("allocation", "goodput", "lost_share", "max_share_deviation_points", "partial_gangs", "beyond_tier"):
            values = [row[key] for row in rows if row[key] is not None]
            entry[key] = {"mean": round(statistics.fmean(values), 4), "min": min(values), "max": max(values)}
        out[profile] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    record = run_record(["bench/goodput.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="51,52,53")
    parser.add_argument("--jobs", type=int, default=150)
    parser.add_argument("--ask-s", type=float, default=ASK_S)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    started = time.monotonic()
    spec = st.cluster_spec(st.parse_args([]))
    capacity = spec.nodes * spec.gpus_per_node
    seeds = [int(s) for s in args.seeds.split(",")]
    runs: dict[str, list[dict]] = {}
    for seed in seeds:
        trace = with_checkpoints(generate(seed, args.jobs, capacity, rack_nodes=spec.nodes // spec.racks,
                                          spine_nodes=spec.nodes // spec.spines), seed)
        for profile, policy in policies(capacity, args.ask_s).items():
            row = {"seed": seed, **figures(trace, spec, policy, seed)}
            runs.setdefault(profile, []).append(row)
            print(f"seed {seed} {profile:12s} allocation {row['allocation']:.3f} goodput {row['goodput']:.3f} "
                  f"lost {row['lost_share']:.4f} evictions {row['lost_per_eviction']['evictions']} "
                  f"max deviation {row['max_share_deviation_points']} points, partial gangs {row['partial_gangs']}",
                  flush=True)
    by_profile = summarize(runs)
    shipped = by_profile["reclaim-ask"]
    summary = {"seeds": seeds, "profile": "reclaim-ask", "goodput": shipped["goodput"]["min"],
               "max_share_deviation_points": shipped["max_share_deviation_points"]["max"],
               "lost_share": shipped["lost_share"]["max"], "partial_gangs": shipped["partial_gangs"]["max"],
               "beyond_tier": shipped["beyond_tier"]["max"]}
    summary["target_met"] = (summary["goodput"] >= TARGET["goodput"]
                             and summary["max_share_deviation_points"] <= TARGET["max_share_deviation_points"]
                             and summary["lost_share"] <= TARGET["lost_share"]
                             and summary["partial_gangs"] == 0 and summary["beyond_tier"] == 0)
    print(f"worst of seeds {seeds} with asks: goodput {summary['goodput']:.3f}, deviation "
          f"{summary['max_share_deviation_points']} points, lost {summary['lost_share']:.4f}; target met: "
          f"{summary['target_met']}")
    results = {"engine": "model", "jobs": args.jobs, "ask_s": args.ask_s, "target": TARGET, "summary": summary,
               "profiles": by_profile, "runs": runs, "seconds": round(time.monotonic() - started, 1)}
    if args.out:
        write_results(args.out, "goodput", record, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
