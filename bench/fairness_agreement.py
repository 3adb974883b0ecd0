#!/usr/bin/env python3
"""Does the fairness audit read from Prometheus agree with the scheduling-trace benchmark's own pod records?

On a local cluster with the usage record on (kube-state-metrics + Prometheus), one seeded trace goes the real
path (TrainJobs -> trainyard's controller -> JobSet + PodGroup -> vc-scheduler, the shipped `gang` profile). Then
the same figures are computed twice: from the pod watch's records (`schedtrace.summary`, what
`bench/scheduling_trace.py` publishes) and from Prometheus over the replay's window (`usage.fairness_audit`, what
`trainyard report --since` prints): allocation and saturated time, and per tenant the received share, the fair
share and the weight share. Prints both and their differences, asserts nothing; the issue's bar is 2 %.

Usage: .venv/bin/python bench/fairness_agreement.py [--seed 12] [--jobs 60] [--duration-scale 0.5] [--nodes 16]
       [--out bench/out] [--keep]
It starts its own cluster (trainyard-fair, ports from 29900) and stops it afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from trainyard.benchkit import run_record, write_results
from trainyard.cluster import local
from trainyard.cluster.spec import ClusterSpec
from trainyard.schedtrace import summary
from trainyard.schedtrace.replay import Replay
from trainyard.scheduling.trace import DEFAULT_TENANTS, generate, offered_gpu_seconds
from trainyard.toolchain.build import ensure_built
from trainyard.usage import fairness_audit
from trainyard.usage.prometheus import Prometheus, read_record

SETTLE_S = 35
"""After the last job: two scrapes, so every pod's finish and every TrainJob's outcome is in Prometheus."""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--duration-scale", type=float, default=0.5)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    return parser.parse_args(argv)


def relative(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return abs(a - b) / abs(b) if b else (0.0 if a == b else None)


def compare(records: dict, prometheus: dict) -> dict:
    """Figure -> {records, prometheus, relative difference}."""
    out = {"allocation": (records["allocation_while_saturated"], prometheus["allocation"]),
           "saturated_s": (records["saturated_s"], prometheus["saturated_s"])}
    for tenant, figures in records["queues"].items():
        mine = prometheus["tenants"].get(tenant, {})
        for key in ("share", "fair_share", "weight_share"):
            out[f"{tenant}.{key}"] = (figures[key], mine.get(key))
    return {name: {"records": a, "prometheus": b, "relative_difference": relative(b, a)} for name, (a, b) in out.items()}


def main(argv=None) -> int:
    record = run_record(["bench/fairness_agreement.py", *(sys.argv[1:] if argv is None else argv)])
    args = parse_args(argv)
    ensure_built(*local.REQUIRED_TOOLS)
    spec = ClusterSpec(name="trainyard-fair", nodes=args.nodes, racks=4, spines=2, port_base=29900, timed_pods=True,
                       feature_gates="TrainJobStatus=false", start_estimates_every=0, budgets_every=0,
                       stalled_after=0)
    capacity = spec.nodes * spec.gpus_per_node
    trace = generate(args.seed, args.jobs, capacity, duration_scale=args.duration_scale, rack_nodes=spec.nodes // 4,
                     spine_nodes=spec.nodes // 2)
    if local.is_running(spec.name):
        local.down(spec.name, echo=lambda *_: None)
    local.up(spec, echo=print)
    try:
        replay = Replay(spec.name, DEFAULT_TENANTS, capacity)
        replay.setup()
        rack_of, spine_of = replay.topology()
        timeout = max(j.arrival for j in trace) + 3 * offered_gpu_seconds(trace) / capacity + 300
        print(f"replaying {len(trace)} jobs (gang profile, TrainJobs) on {capacity} GPUs", flush=True)
        record = replay.run(trace, "gang", gang=True, direct=False, timeout=timeout)
        time.sleep(SETTLE_S)
        weights = {t.name: t.weight for t in DEFAULT_TENANTS}
        from_records = summary.summarize(trace, list(record.pods.values()), record.submitted, record.end, capacity,
                                         weights, rack_of, spine_of)
        since = record.started_epoch
        usage = read_record(Prometheus(f"http://127.0.0.1:{spec.ports.port('prometheus')}"), since, since + record.end)
        from_prometheus = fairness_audit.audit(usage, step=0.25)
    finally:
        if not args.keep:
            local.down(spec.name, echo=lambda *_: None)
    figures = compare(from_records, from_prometheus)
    worst = max((f["relative_difference"] for f in figures.values() if f["relative_difference"] is not None),
                default=None)
    print(f"\n{'figure':28} {'pod records':>12} {'Prometheus':>12} {'difference':>10}")
    for name, f in figures.items():
        diff = f["relative_difference"]
        print(f"{name:28} {_num(f['records']):>12} {_num(f['prometheus']):>12} "
              f"{'-' if diff is None else f'{100 * diff:.2f} %':>10}")
    print(f"\nworst relative difference: {'-' if worst is None else f'{100 * worst:.2f} %'} (bar: 2 %); "
          f"jobs finished {from_records['jobs_finished']}/{len(trace)}, unfinished {record.unfinished}")
    results = {"seed": args.seed, "jobs": args.jobs, "duration_scale": args.duration_scale, "nodes": args.nodes,
               "figures": figures, "worst_relative_difference": worst, "jain_index": from_prometheus.get("jain_index"),
               "starvation": {t: v["starvation"] for t, v in from_prometheus["tenants"].items()}}
    path = write_results(args.out, "fairness_agreement", record, results)
    print(f"wrote {path}")
    return 0


def _num(value) -> str:
    return "-" if value is None else f"{value:.4f}"


if __name__ == "__main__":
    raise SystemExit(main())
