#!/usr/bin/env python3
"""Trace-driven GPU scheduling benchmark; prints figures, asserts nothing.

On a local cluster of simulated GPU nodes (default 64 x 8 GPUs, 8 racks under 2 spines) it replays one
seeded trace (`trainyard.scheduling.trace`: single-pod jobs of 1/2/4/8 GPUs and gangs of 2-8 pods x 8
GPUs from three tenants whose queues weigh 4:2:1, arriving over time at 1.5x the cluster's capacity,
log-normal durations) once per scheduler profile: trainyard's generated Volcano configurations (`gang`, the
default; `gang-overcommit`, the gang profile with the enqueue gate it had before; `fair-share`) and the
default kube-scheduler without gangs or queues. kwok completes each pod after its
job's duration. Jobs go the real path (TrainJob -> trainyard controller -> JobSet + PodGroup ->
vc-scheduler), or with `--direct` as PodGroups + bare pods, which isolates the scheduler.

Per run: GPU allocation (time-averaged held/total while demand >= capacity), partial gangs (some pods of a
gang holding GPUs while others wait, for >= 2 schedule cycles), each queue's share vs its weighted fair
share while saturated, p50/p95 queueing delay per job size, pods bound per second, gangs split across
racks and gangs beyond their allowed hard tier. JSON, tables (markdown) and a PNG in --out.

Usage: .venv/bin/python bench/scheduling_trace.py [--seed 12] [--jobs 150] [--duration-scale 1.0]
       [--profiles gang,gang-overcommit,fair-share,kube-scheduler] [--direct] [--out bench/results] [--keep]
       (also gang-capacity: elastic `capacity` queues with weighted deserved shares; gang-capacity-reserve: the
       same plus trainyard's gang reservation, `trainyard.capacity.reserver`; gang-capacity-reclaim: the same plus
       trainyard's gang-aware reclaim, `trainyard.capacity.reclaimer`; gang-capacity-reclaim-fair: reclaim toward
       each queue's fair share of current demand under Kueue's final-share rule; gang-capacity-reclaim-kueue-hold:
       the same under Kueue's two fair-sharing rules in order, final share then initial share; -hold: the freed
       nodes tainted for the gang)
       [--model SEEDS [--calibrate JSON ...]]: no cluster, the profiles on `trainyard.scheduling.simulator` (seconds per run),
       beside the real runs of JSON
It starts its own cluster (trainyard-trace, ports from 29600) and stops it afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from trainyard.capacity import live
from trainyard.scheduling import reclaim
from trainyard.capacity.reclaimer import Reclaimer
from trainyard.capacity.reserver import Reserver
from trainyard.cluster import local
from trainyard import k8s as K
from trainyard.cluster.spec import ClusterSpec, gpu_nodes
from trainyard.queues.scheduler_config import SchedulerSettings
from trainyard.schedtrace import summary
from trainyard.scheduling.records import PodRecord
from trainyard.scheduling.simulator import RECLAIMER_EVICT_LATENCY_S, RECLAIMER_RESUME_LAG_S, ModelNode, ModelPolicy, simulate
from trainyard.schedtrace.objects import KUBE_SCHEDULER, weighted_deserved
from trainyard.schedtrace.replay import Replay
from trainyard.scheduling.trace import DEFAULT_TENANTS, generate, offered_gpu_seconds
from trainyard.toolchain.build import ensure_built

# trainyard's generated Volcano configurations (gang-overcommit: the gang profile before the trace showed its
# enqueue gate idling GPUs, kept to show the difference), and the default kube-scheduler.
PROFILES = {"gang": SchedulerSettings(profile="gang"),
            "gang-overcommit": SchedulerSettings(profile="gang", overcommit_factor=1.0),
            "gang-capacity": SchedulerSettings(profile="gang", queue_plugin="capacity"),
            "gang-capacity-reserve": SchedulerSettings(profile="gang", queue_plugin="capacity"),
            "gang-capacity-reclaim": SchedulerSettings(profile="gang", queue_plugin="capacity"),
            "gang-capacity-reclaim-fair": SchedulerSettings(profile="gang", queue_plugin="capacity"),
            "gang-capacity-reclaim-hold": SchedulerSettings(profile="gang", queue_plugin="capacity"),
            "gang-capacity-reclaim-fair-hold": SchedulerSettings(profile="gang", queue_plugin="capacity"),
            "gang-capacity-reclaim-kueue-hold": SchedulerSettings(profile="gang", queue_plugin="capacity"),
            "fair-share": SchedulerSettings(profile="fair-share"), KUBE_SCHEDULER: None}
DEFAULT_PROFILES = ("gang", "gang-overcommit", "fair-share", KUBE_SCHEDULER)
"""The elastic-queue and reclaim profiles (docs/tests.md, scheduling_trace) run only when asked for."""
RESERVE_AFTER_S = {"gang-capacity-reserve": 20.0}
"""Profiles that run trainyard's gang reservation (`trainyard.capacity.reserver`) during the replay: seconds a
gang of a queue below its deserved share waits before nodes are held for it."""
@dataclass(frozen=True)
class ReclaimSettings:
    """How a profile runs trainyard's gang-aware reclaim (`trainyard.capacity.reclaimer`)."""
    after_s: float = 10.0
    """Seconds a gang of a queue below its share waits before whole TrainJobs of queues above theirs go."""
    rule: str = reclaim.DESERVED
    target: str = reclaim.DESERVED_TARGET
    holds: bool = False


RECLAIM = {"gang-capacity-reclaim": ReclaimSettings(),
           "gang-capacity-reclaim-fair": ReclaimSettings(rule=reclaim.FINAL_SHARE, target=reclaim.FAIR_TARGET),
           "gang-capacity-reclaim-hold": ReclaimSettings(holds=True),
           "gang-capacity-reclaim-fair-hold": ReclaimSettings(rule=reclaim.FINAL_SHARE, target=reclaim.FAIR_TARGET,
                                                              holds=True),
           "gang-capacity-reclaim-kueue-hold": ReclaimSettings(rule=reclaim.FAIR_SHARING, holds=True)}
"""-fair: toward each queue's water-filled fair share of current demand, evicting only while the victim's queue keeps
at least the starving queue's share with its gang (Kueue's final-share rule); -kueue: that rule first, then Kueue's
initial-share rule (`reclaim.FAIR_SHARING`), against each queue's static deserved share as Kueue's weights are (what
`controller.reclaim: fair-sharing` runs); -hold: the freed nodes are tainted for the gang until it runs."""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=150)
    parser.add_argument("--duration-scale", type=float, default=1.0, help="multiplies every job's duration")
    parser.add_argument("--overload", type=float, default=1.5, help="offered GPU-seconds / capacity over arrivals")
    parser.add_argument("--profiles", default=",".join(DEFAULT_PROFILES),
                        help=f"comma-separated, of {', '.join(PROFILES)} (default {','.join(DEFAULT_PROFILES)})")
    parser.add_argument("--direct", action="store_true", help="PodGroups + bare pods instead of TrainJobs")
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--racks", type=int, default=8)
    parser.add_argument("--spines", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    parser.add_argument("--model", type=int, metavar="SEEDS", help="no cluster: replay the profiles on trainyard's "
                        "model of vc-scheduler (`trainyard.scheduling.simulator`) with this many seeds each")
    parser.add_argument("--calibrate", type=Path, metavar="JSON", action="append", default=[],
                        help="with --model: compare with the real replays of earlier scheduling_trace.json files (same "
                        "seed and options), profile by profile; repeat it for several files")
    parser.add_argument("--reanalyse", type=Path, help="no cluster: recompute the figures from the pod records of "
                        "an earlier scheduling_trace.json (same seed and options)")
    args = parser.parse_args(argv)
    unknown = set(args.profiles.split(",")) - set(PROFILES)
    if unknown:
        parser.error(f"unknown profiles {', '.join(sorted(unknown))}; use {', '.join(PROFILES)}")
    return args


def cluster_spec(args) -> ClusterSpec:
    # TrainJobStatus off: it adds a ConfigMap per TrainJob, controller work the scheduling figures do not need.
    return ClusterSpec(name="trainyard-trace", nodes=args.nodes, racks=args.racks, spines=args.spines,
                       port_base=29600, timed_pods=True, feature_gates="TrainJobStatus=false", monitoring=False)


def replay_all(args, spec: ClusterSpec, trace) -> dict[str, dict]:
    capacity = spec.nodes * spec.gpus_per_node
    replay = Replay(spec.name, DEFAULT_TENANTS, capacity)
    replay.setup()
    rack_of, spine_of = replay.topology()
    timeout = max(j.arrival for j in trace) + 3 * offered_gpu_seconds(trace) / capacity + 300
    results = {}
    for profile in args.profiles.split(","):
        settings = PROFILES[profile]
        if settings is not None:
            replay.use_scheduler_settings(settings)
        print(f"replaying {len(trace)} jobs with {profile} ({'direct' if args.direct else 'TrainJobs'})", flush=True)
        api = live.connect(str(local.ClusterPaths.for_name(spec.name).kubeconfig))
        reserver = Reserver(api, after_s=RESERVE_AFTER_S[profile]).start() if profile in RESERVE_AFTER_S else None
        reclaimer = None
        if profile in RECLAIM:
            how = RECLAIM[profile]
            reclaimer = Reclaimer(api, after_s=how.after_s, rule=how.rule, target=how.target, holds=how.holds).start()
        record = replay.run(trace, profile, gang=settings is not None, direct=args.direct, timeout=timeout)
        reservations = reserver.finish() if reserver else []
        evictions = reclaimer.finish() if reclaimer else []
        withdrawn = reclaimer.withdrawn if reclaimer else []
        figures = figures_of(trace, spec, record.submitted, list(record.pods.values()), record.end, rack_of, spine_of)
        figures.update(evictions=[{"at": round(at, 1), "at_s": round(at - record.started_epoch, 1), "gang": "/".join(e.gang),
                                   "victims": ["/".join(v) for v in e.victims], "nodes": list(e.nodes)}
                                  for at, e in evictions],
                       withdrawn_evictions=[{"at_s": round(at - record.started_epoch, 1), "gang": "/".join(e.gang),
                                             "victims": ["/".join(v) for v in e.victims]} for at, e in withdrawn],
                       reservations=[{"at": round(at, 1), "at_s": round(at - record.started_epoch, 1),
                                      "gang": "/".join(r.gang) if r else None, "nodes": list(r.nodes) if r else []}
                                     for at, r in reservations],
                       wall_s=record.wall_s, unfinished=record.unfinished, refused=record.refused,
                       scheduler_conf=None if settings is None else summary_settings(settings),
                       records={"submitted": record.submitted, "pods": [asdict(p) for p in record.pods.values()]})
        results[profile] = figures
        print(summary.markdown(summary.table_rows({profile: figures})), flush=True)
        replay.clean()
    return results


def summary_settings(settings: SchedulerSettings) -> dict:
    return {"profile": settings.profile, "queue_plugin": settings.queue_plugin,
            "overcommit_factor": settings.overcommit_factor}


def plot(results: dict[str, dict], trace, capacity: int, weights: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    runs = list(results)
    fig = plt.figure(figsize=(5 * max(len(runs), 2), 9), constrained_layout=True)
    grid = fig.add_gridspec(2, max(len(runs), 2))
    for column, run in enumerate(runs):
        ax = fig.add_subplot(grid[0, column])
        series = results[run]["series"]
        ax.stackplot(series["t"], *series["held"].values(), labels=list(series["held"]), alpha=0.8)
        ax.plot(series["t"], np.minimum(series["demand"], 2 * capacity), "k:", lw=1, label="demand")
        ax.axhline(capacity, color="grey", lw=1)
        ax.set(title=f"{run}: GPUs held per queue", xlabel="s", ylabel="GPUs", ylim=(0, 1.5 * capacity))
        ax.legend(loc="upper right", fontsize=8)
    half = max(len(runs), 2) // 2
    ax = fig.add_subplot(grid[1, :half])
    queues = list(weights)
    width = 0.8 / (len(runs) + 1)
    for i, run in enumerate(runs):  # each run's own fair share: it depends on what each queue demanded when
        deviation = [results[run]["queues"][q]["deviation_points"] or 0 for q in queues]
        ax.bar(np.arange(len(queues)) + i * width, deviation, width, label=run)
    ax.axhspan(-5, 5, color="grey", alpha=0.15, label="±5 points")
    ax.axhline(0, color="k", lw=0.8)
    ax.set(title="queue share minus its weighted fair share while saturated", ylabel="percentage points",
           xticks=np.arange(len(queues)) + width * (len(runs) - 1) / 2,
           xticklabels=[f"{q} (w{weights[q]})" for q in queues])
    ax.legend(fontsize=8)
    ax = fig.add_subplot(grid[1, half:])
    sizes = summary.delay_rows(results)[0][1:]
    for i, run in enumerate(runs):
        by_size = results[run]["delay_by_size"]
        x = np.arange(len(sizes)) + i * width
        ax.bar(x, [(by_size.get(s) or {}).get("p50_s") or 0 for s in sizes], width, label=f"{run} p50")
        ax.scatter(x, [(by_size.get(s) or {}).get("p95_s") or 0 for s in sizes], marker="_", s=200, color="k")
    ax.set(title="queueing delay by job size (bar p50, tick p95)", ylabel="s", yscale="symlog",
           xticks=np.arange(len(sizes)) + width * (len(runs) - 1) / 2, xticklabels=sizes)
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=90)


def figures_of(trace, spec: ClusterSpec, submitted: dict, pods: list[PodRecord], end: float, rack_of: dict,
               spine_of: dict) -> dict:
    weights = {t.name: t.weight for t in DEFAULT_TENANTS}
    return summary.summarize(trace, pods, submitted, end, spec.nodes * spec.gpus_per_node, weights, rack_of, spine_of)


def reanalyse(args, spec: ClusterSpec, trace) -> dict[str, dict]:
    """Every figure again from the pod records an earlier run kept (no cluster): same trace, same metrics code."""
    nodes = gpu_nodes(spec)
    rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][K.RACK_LABEL] for n in nodes}
    spine_of = {n["metadata"]["name"]: n["metadata"]["labels"][K.SPINE_LABEL] for n in nodes}
    results = json.loads(args.reanalyse.read_text())["results"]
    for run, old in results.items():
        pods = [PodRecord(**pod) for pod in old["records"]["pods"]]
        fresh = figures_of(trace, spec, old["records"]["submitted"], pods, old["run_s"], rack_of, spine_of)
        results[run] = {**old, **fresh}
    return results


def model_policy(profile: str, capacity: int) -> ModelPolicy | None:
    """The model of a profile (None: not modelled: the overcommit gate, eviction task by task, kube-scheduler)."""
    elastic = {"queue_plugin": "capacity", "deserved": weighted_deserved(DEFAULT_TENANTS, capacity)}
    return {"gang": ModelPolicy(), "gang-capacity": ModelPolicy(**elastic),
            "gang-capacity-reserve": ModelPolicy(**elastic, reserve_after_s=RESERVE_AFTER_S["gang-capacity-reserve"]),
            **{name: ModelPolicy(**elastic, reclaim_after_s=how.after_s, reclaim_rule=how.rule, reclaim_target=how.target,
                                 reclaim_holds=how.holds, evict_latency_s=RECLAIMER_EVICT_LATENCY_S,
                                 resume_lag_s=RECLAIMER_RESUME_LAG_S) for name, how in RECLAIM.items()},
            }.get(profile)


def replay_of_seed(document: dict, seed: int) -> dict:
    """The profiles' figures of the real replay of trace `seed`: from a `trainyard bench run scheduling_trace`
    document (one run per seed) or from one run's own output."""
    runs = document["runs"] if document.get("format", "").startswith("trainyard-bench/") else [document]
    found = [run["results"] for run in runs if run["seed"] == seed]
    if not found:
        raise SystemExit(f"no real replay of seed {seed} to calibrate against (seeds: {[r['seed'] for r in runs]})")
    return found[-1]


def model_main(args, spec: ClusterSpec, trace) -> int:
    """Each modelled profile, `args.model` seeds: the mean figures, and beside the real runs with --calibrate."""
    nodes = [ModelNode(n["metadata"]["name"], n["metadata"]["labels"][K.RACK_LABEL], n["metadata"]["labels"][K.SPINE_LABEL],
                       spec.gpus_per_node) for n in gpu_nodes(spec)]
    rack_of, spine_of = {n.name: n.rack for n in nodes}, {n.name: n.spine for n in nodes}
    capacity = spec.nodes * spec.gpus_per_node
    weights = {t.name: t.weight for t in DEFAULT_TENANTS}
    real = {}
    for path in args.calibrate:  # a profile run in several files: the last file's run
        real.update(replay_of_seed(json.loads(path.read_text()), args.seed))
    rows, document = [], {}
    for profile in args.profiles.split(","):
        policy = model_policy(profile, capacity)
        if policy is None:
            print(f"{profile}: not modelled")
            continue
        runs = []
        for seed in range(args.model):
            started = time.monotonic()
            submitted, pods, end = simulate(trace, nodes, weights, policy, seed=seed)
            figures = summary.summarize(trace, pods, submitted, end, capacity, weights, rack_of, spine_of)
            runs.append({"seed": seed, "seconds": round(time.monotonic() - started, 2),
                         "allocation": figures["allocation_while_saturated"], "evicted_share": figures["evicted_share"],
                         "partial_gangs": len(figures["partial_gangs"]),
                         "beyond_tier": len(figures["topology"]["beyond_allowed_tier"]),
                         "deviation_points": {q: v["deviation_points"] for q, v in figures["queues"].items()}})
        document[profile] = runs
        rows.append(summary.calibration_row(profile, runs, real.get(profile)))
    print(summary.markdown([summary.calibration_header(list(weights))] + rows))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scheduling_trace_model.json").write_text(json.dumps(
        {"date": time.strftime("%Y-%m-%d"), "seed": args.seed, "jobs": args.jobs, "seeds": args.model,
         "calibrated_against": [str(path) for path in args.calibrate], "results": document}, indent=1))
    print(f"\nresults in {args.out}/scheduling_trace_model.json")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    spec = cluster_spec(args)
    capacity = spec.nodes * spec.gpus_per_node
    trace = generate(args.seed, args.jobs, capacity, duration_scale=args.duration_scale, overload=args.overload,
                     rack_nodes=spec.nodes // spec.racks, spine_nodes=spec.nodes // spec.spines)
    print(f"trace: {len(trace)} jobs, {sum(j.pods for j in trace)} pods, arrivals over {trace[-1].arrival:.0f}s, "
          f"{offered_gpu_seconds(trace) / capacity:.0f}s of full-cluster work on {capacity} GPUs", flush=True)
    started = time.monotonic()
    if args.model:
        return model_main(args, spec, trace)
    if args.reanalyse:
        previous = json.loads(args.reanalyse.read_text())
        results, wall = reanalyse(args, spec, trace), previous["total_wall_s"]
    else:
        ensure_built(*local.REQUIRED_TOOLS)
        if local.is_running(spec.name):
            local.down(spec.name, echo=lambda *_: None)
        local.up(spec, echo=lambda line: print("  " + line, flush=True))
        try:
            results = replay_all(args, spec, trace)
        finally:
            if not args.keep:
                local.down(spec.name, echo=lambda *_: None)
        wall = round(time.monotonic() - started)
    args.out.mkdir(parents=True, exist_ok=True)
    weights = {t.name: t.weight for t in DEFAULT_TENANTS}
    document = {"date": time.strftime("%Y-%m-%d"), "seed": args.seed, "jobs": args.jobs,
                "duration_scale": args.duration_scale, "overload": args.overload, "direct": args.direct,
                "cluster": {"nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node, "racks": spec.racks,
                            "spines": spec.spines},
                "tenants": [t.__dict__ for t in DEFAULT_TENANTS], "total_wall_s": wall, "results": results}
    (args.out / "scheduling_trace.json").write_text(json.dumps(document, indent=1))
    plot(results, trace, capacity, weights, args.out / "scheduling_trace.png")
    print(summary.markdown(summary.table_rows(results)))
    print()
    print("queueing delay p50/p95 (s) by job size")
    print(summary.markdown(summary.delay_rows(results)))
    print("\nidle GPUs while saturated, in allocation points, by cause")
    print(summary.markdown(summary.idle_rows(results)))
    print(f"\nresults in {args.out}/scheduling_trace.json and .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
