#!/usr/bin/env python3
"""How right are the start estimates (`trainyard.scheduling.estimate`)? Checked on a real replay of the scheduling
trace (bench/scheduling_trace.py's pod records, by default the shipped `gang` profile in
bench/results/scheduling_trace.json): one second after each job was submitted, the cluster's state at that moment
(the pods then running, each with the time it really had left, as `trainerStatus` would report it; the jobs then
pending, in submission order, each with its trace duration) is replayed forward on the model, and the estimate for
that job is compared with when it really started. Jobs submitted later are unknown to the estimate, as they are
live. Prints the error distribution for the jobs that waited; asserts nothing. Target (issue: what-if): median
absolute error at most 25 % of the actual wait.

Usage: .venv/bin/python bench/start_estimates.py [--records bench/results/scheduling_trace.json] [--profile gang]
       [--min-wait 10] [--stated-run S] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from trainyard.cluster.spec import ClusterSpec, gpu_nodes
from trainyard import k8s as K
from trainyard.schedtrace import metrics as M
from trainyard.scheduling.simulator import ModelNode, ModelPolicy
from trainyard.scheduling.trace import Tenant, generate
from trainyard.stats import percentile
from trainyard.scheduling.estimate import PendingGang, RunningGang, estimate_starts, remaining_time

LOOK_AFTER_S = 1.0
"""The estimate is made this long after the job's submission (it is pending in the scheduler by then)."""


def state_at(t: float, trace, grouped, submitted, stated: float | None = None):
    """(running gangs with their time left, pending gangs in submission order) at time t: the true times, or with
    `stated`, every job assumed to run that long (what the estimate has without trainerStatus or history)."""
    running, pending = [], []
    for job in sorted(trace, key=lambda j: submitted.get(j.name, float("inf"))):
        if submitted.get(job.name, float("inf")) > t:
            continue
        pods = grouped.get(job.name, [])
        held = [p for p in pods if M.held(p, t)]
        if held:
            running.append(RunningGang(job.name, job.tenant, tuple((p.node, p.gpus) for p in held),
                                       remaining_s=max(p.ended for p in held) - t if stated is None
                                       else remaining_time(None, t - min(p.bound for p in held), stated)))
        elif M.time_when_placed(job, pods) is None or M.time_when_placed(job, pods) > t:
            if not any(p.ended is not None and p.ended <= t for p in pods):
                pending.append(PendingGang(job.name, job.tenant, job.pods, job.gpus_per_pod, job.tier,
                                           run_s=job.duration if stated is None else stated))
    return running, pending


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, default=Path("bench/results/scheduling_trace.json"))
    parser.add_argument("--profile", default="gang")
    parser.add_argument("--min-wait", type=float, default=10.0, help="jobs that waited at least this long are scored")
    parser.add_argument("--stated-run", type=float, metavar="S", help="every job assumed to run S seconds (the "
                        "stated default, no trainerStatus) instead of its real time")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    document = json.loads(args.records.read_text())
    cluster = document["cluster"]
    spec = ClusterSpec(name="estimates", nodes=cluster["nodes"], racks=cluster["racks"], spines=cluster["spines"],
                       monitoring=False)
    capacity = spec.nodes * spec.gpus_per_node
    tenants = tuple(Tenant(t["name"], t["weight"], t["load"]) for t in document["tenants"])
    trace = generate(document["seed"], document["jobs"], capacity, tenants, duration_scale=document["duration_scale"],
                     overload=document["overload"], rack_nodes=spec.nodes // spec.racks,
                     spine_nodes=spec.nodes // spec.spines)
    nodes = [ModelNode(n["metadata"]["name"], n["metadata"]["labels"][K.RACK_LABEL],
                       n["metadata"]["labels"][K.SPINE_LABEL], spec.gpus_per_node) for n in gpu_nodes(spec)]
    weights = {t.name: float(t.weight) for t in tenants}
    run = document["results"][args.profile]["records"]
    submitted = run["submitted"]
    grouped = M.by_job([M.PodRecord(**pod) for pod in run["pods"]])
    rows, started = [], time.monotonic()
    for job in trace:
        placed = M.time_when_placed(job, grouped.get(job.name, []))
        if job.name not in submitted or placed is None:
            continue
        t = submitted[job.name] + LOOK_AFTER_S
        if placed <= t:
            continue
        running, pending = state_at(t, trace, grouped, submitted, args.stated_run)
        estimate = estimate_starts(nodes, running, pending, weights, ModelPolicy()).get(job.name)
        if estimate is None or estimate.start_in_s is None:
            rows.append({"job": job.name, "size": job.size, "actual_s": round(placed - t, 1), "estimate_s": None})
            continue
        rows.append({"job": job.name, "size": job.size, "actual_s": round(placed - t, 1),
                     "estimate_s": round(estimate.start_in_s, 1), "position": estimate.position})
    seconds = time.monotonic() - started
    scored = [r for r in rows if r["actual_s"] >= args.min_wait and r["estimate_s"] is not None]
    errors = [abs(r["estimate_s"] - r["actual_s"]) / r["actual_s"] for r in scored]
    signed = [(r["estimate_s"] - r["actual_s"]) / r["actual_s"] for r in scored]
    quantiles = {f"p{q}": round(percentile(errors, q), 3) for q in (10, 25, 50, 75, 90)} if errors else {}
    print(f"{len(rows)} jobs pending {LOOK_AFTER_S:.0f} s after submission; {len(scored)} waited >= {args.min_wait:.0f} s"
          f" ({seconds:.1f} s, {1000 * seconds / max(1, len(rows)):.0f} ms per estimate)")
    print("absolute error / actual wait: " + ", ".join(f"{k} {100 * v:.0f} %" for k, v in quantiles.items()))
    if signed:
        early = sum(1 for s in signed if s < 0)
        print(f"estimate earlier than the real start for {early} of {len(signed)} (median signed error "
              f"{100 * percentile(signed, 50):+.0f} %); within 25 %: {sum(1 for e in errors if e <= 0.25)}")
    missing = [r for r in rows if r["estimate_s"] is None]
    if missing:
        print(f"no estimate within the horizon for {len(missing)}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "start_estimates.json").write_text(json.dumps(
            {"date": time.strftime("%Y-%m-%d"), "records": str(args.records), "profile": args.profile,
             "stated_run_s": args.stated_run,
             "min_wait_s": args.min_wait, "error_quantiles": quantiles, "jobs": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
