#!/usr/bin/env python3
"""How right are the start estimates (`trainyard.scheduling.estimate`)? Scored on the real replays of the scheduling
trace (`trainyard bench run scheduling_trace`: pod records of the shipped `gang` profile, one trace per seed), on the
seeds the model was not calibrated on: one second after each job was submitted, the cluster's state at that moment
(the pods then running, the jobs then pending in submission order) is replayed forward on the model, and the
estimate for that job is compared with when it really started. Jobs submitted later are unknown to the estimate, as
they are live. Twice: with the shipped default (no trainerStatus: every job assumed to run --default-run seconds, as
the controller assumes) and with each job's true run time (a trainer reporting perfectly). Prints the median and p90
of the absolute error in seconds and as a share of the real wait, and for the jobs that are told a time (a start the
guessed run times do not make, `StartEstimate.guessed`) how many they are and their error; asserts nothing.

Usage: .venv/bin/python bench/start_estimates.py [--records bench/results/scheduling_trace.json] [--profile gang]
       [--min-wait 10] [--default-run 3600] [--exclude-seeds 12] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from trainyard.benchkit import run_record, write_results
from trainyard.cluster.spec import ClusterSpec, gpu_nodes
from trainyard import k8s as K
from trainyard.schedtrace import metrics as M
from trainyard.scheduling.simulator import ModelNode, ModelPolicy
from trainyard.scheduling.trace import Tenant, generate
from trainyard.stats import percentile
from trainyard.scheduling.estimate import DEFAULT_RUN_S, PendingGang, RunningGang, estimate_starts, remaining_time

CALIBRATION_SEEDS = (12,)
"""The trace seed the model's delay constants were read from (bench/scheduling_trace.py's default): estimates are
scored on the other seeds only."""
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
                                       else remaining_time(None, t - min(p.bound for p in held), stated),
                                       guessed=stated is not None))
        elif M.time_when_placed(job, pods) is None or M.time_when_placed(job, pods) > t:
            if not any(p.ended is not None and p.ended <= t for p in pods):
                pending.append(PendingGang(job.name, job.tenant, job.pods, job.gpus_per_pod, job.tier,
                                           run_s=job.duration if stated is None else stated,
                                           guessed=stated is not None))
    return running, pending


def replays(document: dict, profile: str, exclude_seeds: set[int]) -> list[tuple[int, dict, dict]]:
    """(seed, run settings, the profile's records) of every real replay in a scheduling-trace results file: a
    `trainyard bench run scheduling_trace` document (one run per seed) or an older single-run file."""
    if document.get("format", "").startswith("trainyard-bench/"):
        runs = [run["results"] | {"_settings": run} for run in document["runs"]]
        return [(run["_settings"]["seed"], run["_settings"], run[profile]["records"]) for run in runs
                if run["_settings"]["seed"] not in exclude_seeds]
    if document["seed"] in exclude_seeds:
        return []
    return [(document["seed"], document, document["results"][profile]["records"])]


@dataclass(frozen=True)
class Replayed:
    """A real replay's trace and cluster, rebuilt from the settings its run recorded (same seed, same trace)."""

    trace: list
    nodes: list[ModelNode]
    weights: dict[str, float]
    capacity: int


def replayed(settings: dict) -> Replayed:
    cluster = settings["cluster"]
    spec = ClusterSpec(name="replayed", nodes=cluster["nodes"], racks=cluster["racks"], spines=cluster["spines"],
                       monitoring=False)
    capacity = spec.nodes * spec.gpus_per_node
    tenants = tuple(Tenant(t["name"], t["weight"], t["load"]) for t in settings["tenants"])
    trace = generate(settings["seed"], settings["jobs"], capacity, tenants, duration_scale=settings["duration_scale"],
                     overload=settings["overload"], rack_nodes=spec.nodes // spec.racks,
                     spine_nodes=spec.nodes // spec.spines)
    nodes = [ModelNode(n["metadata"]["name"], n["metadata"]["labels"][K.RACK_LABEL],
                       n["metadata"]["labels"][K.SPINE_LABEL], spec.gpus_per_node) for n in gpu_nodes(spec)]
    return Replayed(trace, nodes, {t.name: float(t.weight) for t in tenants}, capacity)


def score(settings: dict, records: dict, stated: float | None, min_wait: float) -> list[dict]:
    """One row per job that was still pending 1 s after its submission: its real wait and the estimate then."""
    replay = replayed(settings)
    trace, nodes, weights = replay.trace, replay.nodes, replay.weights
    submitted = records["submitted"]
    grouped = M.by_job([M.PodRecord(**pod) for pod in records["pods"]])
    rows = []
    for job in trace:
        placed = M.time_when_placed(job, grouped.get(job.name, []))
        if job.name not in submitted or placed is None:
            continue
        t = submitted[job.name] + LOOK_AFTER_S
        if placed <= t:
            continue
        running, pending = state_at(t, trace, grouped, submitted, stated)
        estimate = estimate_starts(nodes, running, pending, weights, ModelPolicy()).get(job.name)
        start_in = None if estimate is None else estimate.start_in_s
        rows.append({"seed": settings["seed"], "job": job.name, "size": job.size, "actual_s": round(placed - t, 1),
                     "estimate_s": None if start_in is None else round(start_in, 1),
                     "withheld": bool(estimate and estimate.guessed)})
    return rows


def error_figures(rows: list[dict], min_wait: float) -> dict:
    """Median and p90 of the absolute error, in seconds and as a share of the real wait, over the jobs that waited
    at least `min_wait` s; a job without an estimate is counted apart."""
    scored = [r for r in rows if r["actual_s"] >= min_wait and r["estimate_s"] is not None]
    given = [r for r in scored if not r["withheld"]]
    out = {"jobs_scored": len(scored), "no_estimate": sum(1 for r in rows if r["estimate_s"] is None),
           **_errors(scored), "early": sum(1 for r in scored if r["estimate_s"] < r["actual_s"]),
           # what a user is told: a time only where the guessed run times do not make it (`StartEstimate.guessed`)
           "given_share": round(len(given) / len(scored), 3) if scored else None,
           "given": {"jobs": len(given), **_errors(given)}}
    return out


def _errors(rows: list[dict]) -> dict:
    seconds = [abs(r["estimate_s"] - r["actual_s"]) for r in rows]
    shares = [abs(r["estimate_s"] - r["actual_s"]) / r["actual_s"] for r in rows]
    return {"median_error_s": round(percentile(seconds, 50), 1) if seconds else None,
            "p90_error_s": round(percentile(seconds, 90), 1) if seconds else None,
            "median_error_share": round(percentile(shares, 50), 3) if shares else None,
            "p90_error_share": round(percentile(shares, 90), 3) if shares else None}


def main(argv=None) -> int:
    record = run_record(["bench/start_estimates.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, default=Path("bench/results/scheduling_trace.json"))
    parser.add_argument("--profile", default="gang")
    parser.add_argument("--min-wait", type=float, default=10.0, help="jobs that waited at least this long are scored")
    parser.add_argument("--default-run", type=float, default=DEFAULT_RUN_S, help="the run time assumed for a job "
                        "without trainerStatus (the controller's shipped --default-run)")
    parser.add_argument("--exclude-seeds", default=",".join(map(str, CALIBRATION_SEEDS)),
                        help="trace seeds the model was calibrated on: not scored")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    excluded = {int(s) for s in args.exclude_seeds.split(",") if s}
    found = replays(json.loads(args.records.read_text()), args.profile, excluded)
    if not found:
        raise SystemExit(f"{args.records}: no replay of profile {args.profile} outside the calibration seeds "
                         f"{sorted(excluded)}; run `trainyard bench run scheduling_trace` first")
    started = time.monotonic()
    results: dict = {"seeds": [seed for seed, _, _ in found], "profile": args.profile, "min_wait_s": args.min_wait,
                     "default_run_s": args.default_run}
    for name, stated in (("shipped_default", args.default_run), ("true_run_time", None)):
        rows = [row for _, settings, records in found for row in score(settings, records, stated, args.min_wait)]
        results[name] = error_figures(rows, args.min_wait)
        f = results[name]
        print(f"{name}: {f['jobs_scored']} jobs waited >= {args.min_wait:.0f} s; absolute error median "
              f"{f['median_error_s']} s ({f['median_error_share']}), p90 {f['p90_error_s']} s ({f['p90_error_share']});"
              f" early for {f['early']}; no estimate for {f['no_estimate']}; a time told for {f['given']['jobs']} "
              f"(error median {f['given']['median_error_s']} s, {f['given']['median_error_share']})")
    results["seconds"] = round(time.monotonic() - started, 1)
    if args.out:
        write_results(args.out, "start_estimates", record, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
