#!/usr/bin/env python3
"""Simulated GPU nodes dying under the scheduling trace's load; prints figures, asserts nothing.

On the trace bench's cluster (default 64 simulated nodes x 8 GPUs, 8 racks under 2 spines) it replays one seeded
trace (150 jobs of three tenants, the shipped `gang` profile, the real path: TrainJob -> trainyard's controller ->
JobSet + PodGroup -> vc-scheduler) with the tenants' node-loss toleration policy (60 s). Once the cluster is
saturated, the `--kill` nodes holding the most gang pods lose power (`trainyard cluster node-down`: kwok stops
keeping them alive) and come back `--down-s` later. Every `--every` s it samples what the platform says (the
report's GPUs on lost nodes, Volcano's queues' `status.allocated`) against what holds (GPUs of pods bound to Ready
nodes), and at the end what became of the jobs the kill hit (NodeLost Events, re-formed, finished), whether the
dead nodes' pods were let go, and whether the nodes rejoined and took work again.

Usage: .venv/bin/python bench/node_loss_trace.py [--seed 12] [--jobs 150] [--kill 2] [--down-s 360] [--every 5]
       [--nodes 64] [--racks 8] [--spines 2] [--out DIR] [--keep]
It starts its own cluster (trainyard-node-loss, ports from 30200) and stops it afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from trainyard.benchkit import run_record, write_results
from trainyard.capacity import live
from trainyard.capacity.report import build_report
from trainyard.cluster import local
from trainyard.cluster.spec import ClusterSpec
from trainyard.platform.node_loss_toleration import render_node_loss_binding, render_node_loss_policy
from trainyard.platform.stack_model import TenantLimits
from trainyard.queues.scheduler_config import SchedulerSettings
from trainyard.realnodes.node_power import power_off, power_on
from trainyard.schedtrace import node_loss as NL
from trainyard.schedtrace.objects import tenant_spec
from trainyard.schedtrace.replay import Replay
from trainyard.schedtrace.summary import summarize
from trainyard.scheduling.cluster_state import lost_nodes, ready_condition
from trainyard.scheduling.trace import DEFAULT_TENANTS, generate, offered_gpu_seconds
from trainyard.tenant_policy import DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS
from trainyard.toolchain.build import ensure_built
from trainyard.waiting import wait_for

TOLERATION_S = TenantLimits().node_loss_toleration_seconds
RELEASE_AFTER_S = DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS
"""The local cluster's controller deletes an evicted pod of a lost node for good this long after its grace period."""
POD_GRACE_S = 30
"""The trace pods' termination grace period (Kubernetes' default)."""
NODE_LOSS_EVERY_S = 10
"""The controller's node-loss loop period (`--node-loss-every`)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=150)
    parser.add_argument("--kill", type=int, default=2, help="nodes to power off")
    parser.add_argument("--down-s", type=float, default=360.0, help="seconds the nodes stay down")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--saturation", type=float, default=0.9, help="share of GPUs held before the kill")
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--racks", type=int, default=8)
    parser.add_argument("--spines", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    return parser.parse_args(argv)


def cluster_spec(args: argparse.Namespace) -> ClusterSpec:
    return ClusterSpec(name="trainyard-node-loss", nodes=args.nodes, racks=args.racks, spines=args.spines,
                       port_base=30200, timed_pods=True, feature_gates="TrainJobStatus=false", monitoring=False)


def look(api, at: float) -> NL.Sample:
    snap = live.cluster_view(api).snapshot
    report = build_report(snap)
    return NL.sample(at, lost_nodes(snap.nodes), report.nodes, report.queues, snap.pods,
                     queues=[t.name for t in DEFAULT_TENANTS])


def node_ready(api, name: str) -> bool:
    ready = ready_condition(api.get(live.NODES, name) or {})
    return ready is not None and ready.get("status") == "True"


def events_by_trainjob(api, reason: str) -> dict[str, str]:
    out = {}
    for tenant in DEFAULT_TENANTS:
        for event in live.list_items(api, live.EVENTS, tenant.name):
            if event.get("reason") == reason and event["involvedObject"].get("kind") == "TrainJob":
                out[event["involvedObject"]["name"]] = event.get("message", "")
    return out


def drill(args, spec: ClusterSpec, replay: Replay, trace, api) -> dict:
    """Run the trace, kill nodes once saturated, sample; the figures of one run."""
    capacity = spec.nodes * spec.gpus_per_node
    gangs = {job.name for job in trace if job.pods > 1}
    sizes = {job.name: job.pods for job in trace}
    timeout = max(j.arrival for j in trace) + 3 * offered_gpu_seconds(trace) / capacity + args.down_s + 300
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(record=replay.run(
        trace, "gang", gang=True, direct=False, timeout=timeout)), daemon=True)
    runner.start()
    before: list[tuple[float, NL.Sample]] = []
    # hit only what outlives the death (kwok completes a pod at its time even on a dead node): NotReady, the
    # toleration and a margin
    outlive_s = 60 + TOLERATION_S + 30

    def targets() -> tuple[list[dict], float, list[str]] | None:
        """Once saturated: the pods and the nodes to kill, when `--kill` nodes hold gang pods that outlive it."""
        sample = look(api, 0.0)
        before.append((time.time(), sample))
        if sample.held_on_ready < args.saturation * capacity:
            return None
        pods, now = live.list_items(api, live.PODS), time.time()
        nodes = NL.nodes_to_kill(pods, gangs, args.kill, now, outlive_s)
        return (pods, now, nodes) if len(nodes) == args.kill else None

    waited = time.time()
    found = wait_for(targets, 900, f"{args.saturation:.0%} of the GPUs held and {args.kill} node(s) to kill",
                     args.every, error=None)
    if not found:
        raise SystemExit(f"no {args.kill} node(s) held gang pods running {outlive_s} s more within 900 s; "
                         "use another --seed or a larger --duration-scale")
    pods, now, killed = found
    hit = NL.jobs_on(pods, killed, now, outlive_s)
    killed_at = time.time()
    print(f"killing {', '.join(killed)} after {killed_at - waited:.0f} s waiting for saturation; "
          f"hit: {', '.join(f'{job} ({len(p)} pod(s))' for job, p in hit.items())}", flush=True)
    for node in killed:
        print("  " + power_off(spec.name, node), flush=True)
    samples = [NL.Sample(**{**asdict(s), "at_s": round(at - killed_at, 1)}) for at, s in before[-6:]]
    while time.time() < killed_at + args.down_s:
        samples.append(look(api, time.time() - killed_at))
        last = samples[-1]
        print(f"  +{last.at_s:5.0f}s lost {len(last.lost)} report on lost {last.report_gpus_on_lost:g} "
              f"volcano {last.volcano_allocated:g} held {last.held_on_ready:g} pods on lost {last.pods_on_lost}",
              flush=True)
        time.sleep(max(0.0, args.every - (time.time() - killed_at - last.at_s)))
    up_at = time.time()
    for node in killed:
        print("  " + power_on(spec.name, node), flush=True)
    rejoined = wait_for(lambda: all(node_ready(api, n) for n in killed), 180, "the nodes Ready again", 1.0, error=None)
    rejoined_s = round(time.time() - up_at, 1) if rejoined else None
    while runner.is_alive():
        samples.append(look(api, time.time() - killed_at))
        runner.join(timeout=10)
    record = result["record"]
    since = record.started_epoch
    outcome = NL.outcome(hit, sizes, record.pods.values(), killed_at - since)
    lost_events = events_by_trainjob(api, "NodeLost")
    deleted_events = events_by_trainjob(api, "NodeLostPodsDeleted")
    not_ready = NL.figures(samples, killed, 0.0)["not_ready_s"] or 0.0
    settled_after = not_ready + TOLERATION_S + POD_GRACE_S + RELEASE_AFTER_S + 2 * NODE_LOSS_EVERY_S + 15
    figures = NL.figures(samples, killed, settled_after)
    rack_of, spine_of = replay.topology()
    trace_figures = summarize(trace, list(record.pods.values()), record.submitted, record.end, capacity,
                              {t.name: t.weight for t in DEFAULT_TENANTS}, rack_of, spine_of)
    return {
        **figures, "settled_after_s": round(settled_after, 1), "killed": killed, "hit": hit,
        "hit_jobs": len(hit), "hit_with_node_lost_event": sum(1 for job in hit if job in lost_events),
        "hit_without_node_lost_event": sorted(set(hit) - set(lost_events)),
        "hit_with_pods_deleted_event": sum(1 for job in hit if job in deleted_events),
        "hit_finished": len(outcome.finished), "hit_unfinished": outcome.unfinished,
        "hit_unfinished_count": len(outcome.unfinished), "reformed_s": outcome.reformed_s,
        "reformed_max_s": max(outcome.reformed_s.values(), default=None),
        "rejoined_s": rejoined_s,
        "pods_bound_on_rejoined": sum(1 for p in record.pods.values()
                                      if p.node in killed and p.bound is not None and p.bound > up_at - since),
        "jobs": len(trace), "jobs_finished": trace_figures["jobs_finished"], "unfinished": record.unfinished,
        "unfinished_count": len(record.unfinished), "refused": sorted(record.refused),
        "partial_gangs_outside_hit": [g for g in trace_figures["partial_gangs"] if g["job"] not in hit],
        "wall_s": record.wall_s, "samples": [asdict(s) for s in samples],
        "node_lost_messages": {job: lost_events[job] for job in hit if job in lost_events},
    }


def main(argv: list[str] | None = None) -> int:
    record = run_record(["bench/node_loss_trace.py", *(sys.argv[1:] if argv is None else argv)])
    args = parse_args(argv)
    started = time.monotonic()
    spec = cluster_spec(args)
    capacity = spec.nodes * spec.gpus_per_node
    trace = generate(args.seed, args.jobs, capacity, rack_nodes=spec.nodes // spec.racks,
                     spine_nodes=spec.nodes // spec.spines)
    ensure_built(*local.REQUIRED_TOOLS)
    if local.is_running(spec.name):
        local.down(spec.name, echo=lambda *_: None)
    local.up(spec, echo=lambda line: print("  " + line, flush=True))
    try:
        replay = Replay(spec.name, DEFAULT_TENANTS, capacity)
        replay.setup()
        replay.apply([render_node_loss_policy(),
                      *(render_node_loss_binding(tenant_spec(t, capacity)) for t in DEFAULT_TENANTS)])
        replay.use_scheduler_settings(SchedulerSettings(profile="gang"))
        api = live.connect(str(local.ClusterPaths.for_name(spec.name).kubeconfig))
        results = drill(args, spec, replay, trace, api)
    finally:
        if not args.keep:
            local.down(spec.name, echo=lambda *_: None)
    results.update(seed=args.seed, kill=args.kill, down_s=args.down_s, every_s=args.every,
                   cluster={"nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node, "racks": spec.racks,
                            "spines": spec.spines},
                   toleration_s=TOLERATION_S, seconds=round(time.monotonic() - started))
    keys = ("not_ready_s", "report_gpus_on_lost_max", "volcano_excess_before_max", "volcano_excess_peak",
            "volcano_excess_settled_max", "pods_on_lost_settled_max", "hit_jobs", "hit_with_node_lost_event",
            "hit_finished", "reformed_max_s", "rejoined_s", "pods_bound_on_rejoined", "jobs_finished",
            "unfinished_count", "seconds")
    for key in keys:
        print(f"{key:28s} {results[key]}")
    print(f"results in {write_results(args.out, 'node_loss_trace', record, results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
