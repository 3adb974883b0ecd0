#!/usr/bin/env python3
"""Benchmark trainyard's TrainJob controller on the local cluster; prints figures, asserts nothing.

- TrainJobs per second from creation to JobSet + PodGroup applied, and p50/p99 latency, for N
  TrainJobs (default 1000) created through the API as fast as one client can;
- `trainyard render` throughput: objects built per second by the pure pipeline (in process) and
  whole `trainyard render` invocations per second (CLI start-up included);
- the controller process's peak RSS (VmHWM).

Usage: .venv/bin/python bench/controller_throughput.py [--count 1000] [--keep] [--feature-gates TrainJobStatus=false]
It starts its own cluster (name trainyard-bench, ports from 27200) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from trainyard import k8s as K
from trainyard.benchkit import run_record, write_results
from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable
from trainyard.cluster.spec import ClusterSpec
from trainyard.controller.build import build_objects
from trainyard.stats import percentile
from trainyard.toolchain.build import ensure_built
from trainyard.toolchain.flux_templates import read_flux_templates

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = {
    "apiVersion": K.TRAINER_API_VERSION, "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "bench-torch"},
    "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "podGroupPolicy": {"volcano": {}},
             "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
                 "metadata": {"labels": {K.LABEL_ANCESTOR: "trainer"}},
                 "spec": {"template": {"spec": {"schedulerName": "volcano", "containers": [{
                     "name": "node", "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                     "resources": {"limits": {K.GPU_RESOURCE: "8"}}}]}}}}}]}}},
}


def trainjob(name: str, namespace: str) -> dict:
    return {"apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"name": "bench-torch"}, "suspend": True, "trainer": {"numNodes": 2}}}


def bench_controller(cluster: ClusterSpec, count: int) -> dict:
    from kubernetes import client, config, watch

    kubeconfig = str(local.ClusterPaths.for_name(cluster.name).kubeconfig)
    api = config.new_client_from_config(config_file=kubeconfig)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    namespace = "bench"
    core.create_namespace({"metadata": {"name": namespace}})
    custom.create_cluster_custom_object(K.TRAINER_GROUP, K.TRAINER_VERSION, K.CLUSTERTRAININGRUNTIMES, RUNTIME)
    created: dict[str, float] = {}
    seen: dict[tuple[str, str], float] = {}

    def observe(group: str, version: str, plural: str) -> None:
        api_w = config.new_client_from_config(config_file=kubeconfig)
        objs = client.CustomObjectsApi(api_w)
        for event in watch.Watch().stream(objs.list_namespaced_custom_object, group, version, namespace, plural,
                                          timeout_seconds=900):
            if event["type"] == "ADDED":
                seen[(plural, event["object"]["metadata"]["name"])] = time.monotonic()
                if sum(1 for k in seen if k[0] == plural) >= count:
                    return

    watchers = [threading.Thread(target=observe, args=a, daemon=True) for a in
                ((K.JOBSET_GROUP, K.JOBSET_VERSION, K.JOBSETS), (K.VOLCANO_GROUP, K.VOLCANO_VERSION, K.PODGROUPS))]
    for w in watchers:
        w.start()
    time.sleep(1)
    started = time.monotonic()
    for index in range(count):
        name = f"bench-{index:04d}"
        custom.create_namespaced_custom_object(K.TRAINER_GROUP, K.TRAINER_VERSION, namespace, K.TRAINJOBS,
                                               trainjob(name, namespace))
        created[name] = time.monotonic()
    create_seconds = time.monotonic() - started
    for w in watchers:
        w.join(900)
    latencies = []
    for name, t0 in created.items():
        t_js, t_pg = seen.get(("jobsets", name)), seen.get(("podgroups", name))
        if t_js and t_pg:
            latencies.append(max(t_js, t_pg) - t0)
    finished = max(seen.values()) if seen else time.monotonic()
    table = ProcessTable(local.ClusterPaths.for_name(cluster.name).root)
    pid = table.load()["trainjob-controller"]
    rss_kib = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            rss_kib = int(line.split()[1])
    return {
        "trainjobs": count, "completed": len(latencies),
        "create_seconds": round(create_seconds, 2),
        "trainjobs_per_second": round(len(latencies) / (finished - started), 1),
        "latency_p50_seconds": round(percentile(latencies, 50) or 0, 3) if latencies else None,
        "latency_p99_seconds": round(percentile(latencies, 99) or 0, 3) if latencies else None,
        "controller_peak_rss_mib": round(rss_kib / 1024, 1),
    }


def bench_render(iterations: int = 300) -> dict:
    seeds = ROOT / "tests" / "fixtures" / "seeds"
    tj = yaml.safe_load((seeds / "000-trainjob-torch-ddp.yaml").read_text())
    rt = yaml.safe_load((seeds / "000-ctr-torch-distributed-multi-node.yaml").read_text())
    objects = 0
    started = time.perf_counter()
    for _ in range(iterations):
        objects += len(build_objects(tj, rt, flux_templates=read_flux_templates))
    in_process = objects / (time.perf_counter() - started)
    cli_runs = 5
    started = time.perf_counter()
    for _ in range(cli_runs):
        subprocess.run([sys.executable, "-m", "trainyard.cli", "render", str(seeds / "000-trainjob-torch-ddp.yaml"),
                        "--runtime", str(seeds / "000-ctr-torch-distributed-multi-node.yaml")],
                       check=True, capture_output=True)
    cli = cli_runs / (time.perf_counter() - started)
    return {"render_objects_per_second_in_process": round(in_process, 1),
            "render_cli_invocations_per_second": round(cli, 2)}


def main(argv: list[str] | None = None) -> int:
    record = run_record(["bench/controller_throughput.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    parser.add_argument("--feature-gates", default=ClusterSpec.feature_gates,
                        help="the controller's gates (TrainJobStatus adds a ConfigMap per TrainJob)")
    parser.add_argument("--out", type=Path, help="write DIR/controller_throughput.json")
    args = parser.parse_args(argv)
    figures = bench_render()
    print(json.dumps(figures), flush=True)
    ensure_built(*local.REQUIRED_TOOLS)
    spec = ClusterSpec(name="trainyard-bench", port_base=27200, feature_gates=args.feature_gates,
                       start_estimates_every=0, monitoring=False)
    if local.is_running(spec.name):
        local.down(spec.name, echo=lambda *_: None)
    local.up(spec, echo=lambda msg: print(f"# {msg}", file=sys.stderr))
    try:
        figures.update(bench_controller(spec, args.count))
    finally:
        if not args.keep:
            local.down(spec.name, echo=lambda *_: None)
    print(json.dumps(figures, indent=2))
    if args.out:
        write_results(args.out, "controller_throughput", record, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
