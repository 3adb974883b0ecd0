#!/usr/bin/env python3
"""Does trainyard's model of vc-scheduler (what `platform whatif` and the start estimates replay on) agree with the
real scheduler? For every real replay of the scheduling trace (`trainyard bench run scheduling_trace`: one trace per
seed, the shipped `gang` profile), the same trace is replayed on the model (several tie-break seeds, averaged) and
the figures are compared: allocation and goodput while saturated, and each tenant's share, in points. The seed the
model's constants were read from is marked in-sample; the summary's worst errors are over the other seeds.

Usage: .venv/bin/python bench/model_calibration.py [--records bench/results/scheduling_trace.json] [--profile gang]
       [--tie-seeds 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import scheduling_trace as st
from start_estimates import CALIBRATION_SEEDS, replayed

from trainyard.benchkit import run_record, write_results


def real_runs(document: dict) -> list[dict]:
    """Each real replay's whole output (settings and results): a `trainyard bench run` document or one older run."""
    return list(document["runs"]) if document.get("format", "").startswith("trainyard-bench/") else [document]


def modelled(run: dict, profile: str, tie_seeds: int) -> list[dict]:
    """The model's figures for the run's trace, one per tie-break seed."""
    replay = replayed(run)
    trace, nodes, weights, capacity = replay.trace, replay.nodes, replay.weights, replay.capacity
    rack_of, spine_of = {n.name: n.rack for n in nodes}, {n.name: n.spine for n in nodes}
    policy = st.model_policy(profile, capacity)
    if policy is None:
        raise SystemExit(f"profile {profile} is not modelled")
    out = []
    for seed in range(tie_seeds):
        submitted, pods, end = st.simulate(trace, nodes, weights, policy, seed=seed)
        out.append(st.summary.summarize(trace, pods, submitted, end, capacity, weights, rack_of, spine_of))
    return out


def compare(real: dict, model: list[dict]) -> dict:
    """Real against the model's mean, in points (100 x the difference of two shares of the cluster)."""
    def mean(get) -> float:
        return statistics.fmean(get(m) for m in model)

    row = {}
    for name in ("allocation_while_saturated", "goodput_while_saturated"):
        if real.get(name) is not None:
            value = mean(lambda m: m[name] or 0.0)
            row[name] = {"real": real[name], "model": round(value, 4), "error_points": round(100 * (value - real[name]), 2)}
    row["shares"] = {}
    for tenant, figures in real["queues"].items():
        value = mean(lambda m: m["queues"][tenant]["share"] or 0.0)
        row["shares"][tenant] = {"real": round(figures["share"], 4), "model": round(value, 4),
                                 "error_points": round(100 * (value - figures["share"]), 2)}
    return row


def worst(rows: list[dict], pick) -> float | None:
    values = [abs(v) for row in rows for v in pick(row)]
    return max(values) if values else None


def main(argv: list[str] | None = None) -> int:
    record = run_record(["bench/model_calibration.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, default=Path("bench/results/scheduling_trace.json"))
    parser.add_argument("--profile", default="gang")
    parser.add_argument("--tie-seeds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = []
    for run in real_runs(json.loads(args.records.read_text())):
        row = {"seed": run["seed"], "in_sample": run["seed"] in CALIBRATION_SEEDS,
               **compare(run["results"][args.profile], modelled(run, args.profile, args.tie_seeds))}
        rows.append(row)
        shares = ", ".join(f"{t} {v['real']:.3f}/{v['model']:.3f}" for t, v in row["shares"].items())
        alloc = row.get("allocation_while_saturated", {})
        print(f"seed {row['seed']}{' (in sample)' if row['in_sample'] else ''}: allocation real/model "
              f"{alloc.get('real')}/{alloc.get('model')} ({alloc.get('error_points')} points); shares {shares}")
    out_of_sample = [r for r in rows if not r["in_sample"]]
    results = {
        "profile": args.profile, "tie_seeds": args.tie_seeds, "seeds": [r["seed"] for r in rows],
        "out_of_sample_seeds": [r["seed"] for r in out_of_sample], "rows": rows,
        "max_allocation_error_points": worst(out_of_sample, lambda r: [r["allocation_while_saturated"]["error_points"]]
                                             if "allocation_while_saturated" in r else []),
        "max_goodput_error_points": worst(out_of_sample, lambda r: [r["goodput_while_saturated"]["error_points"]]
                                          if "goodput_while_saturated" in r else []),
        "max_share_error_points": worst(out_of_sample, lambda r: [v["error_points"] for v in r["shares"].values()]),
        "seconds": round(time.monotonic() - started, 2)}
    print(f"out of sample ({results['out_of_sample_seeds']}): worst allocation error "
          f"{results['max_allocation_error_points']} points, worst share error {results['max_share_error_points']} points")
    if args.out:
        write_results(args.out, "model_calibration", record, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
