#!/usr/bin/env python3
"""trainyard's TrainJob controller beside Kubeflow Trainer's own, on one local cluster; prints figures,
asserts nothing.

For each controller (trainyard, upstream trainer-controller-manager), once at the shipped client limits
(upstream's clientConnection defaults, qps 50 / burst 100, which trainyard ships too) and once unlimited:
- drain: N TrainJobs (default 1000, suspended, a Volcano runtime) created while no controller runs, then
  the controller starts; seconds until every one has its JobSet and PodGroup, and TrainJobs/s;
- stream: then 200 more at a steady 20/s; p50/p99 latency from create to JobSet + PodGroup;
- API-server requests per TrainJob by verb and resource: deltas of kube-apiserver's
  `apiserver_request_total` over the run (every client counts: the JobSet and Volcano controllers react
  to the same objects for both controllers, so the difference between rows is the TrainJob controller's);
- the controller's own requests per TrainJob by method, from its client's counter (`rest_client_requests_total`
  upstream, `trainyard_rest_client_requests_total` here): every request it sent, list/watch included;
- CPU-seconds per TrainJob and peak RSS of the controller process (/proc);
- the API server's raw write ceiling (small ConfigMap creates/s from 8 threads) and, per run, throughput
  divided by (ceiling / writes per TrainJob): how close the controller gets to what its writes allow.

Results: JSON (`--out DIR`/side_by_side.json), a table on stdout, and a PNG of completed TrainJobs over time.

With `--profile`, py-spy samples trainyard's controller from its start to the end of the stream (100 Hz, the
thread holding the GIL: where its CPU goes, not where it waits); the top functions by self and total share are printed and written to the JSON
(`profile_top`), the collapsed stacks to `--out`/profile-<run>.txt.

Usage: .venv/bin/python bench/side_by_side.py [--count 1000] [--stream 200] [--rate 20] [--controllers trainyard,upstream]
       [--limits shipped|unlimited|both] [--out bench/out] [--keep] [--profile]
It starts its own cluster (name trainyard-sbs, ports from 29400) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trainyard import k8s as K
from trainyard.benchkit import ChildrenWatch, RssTrace, process_usage, run_record, samples, write_results
from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable, pid_alive
from trainyard.cluster.spec import ClusterSpec
from trainyard.profiles import ProfileEntry, format_entries, parse_collapsed, top_as_json
from trainyard.stats import percentile
from trainyard.cluster.trainer_controllers import PROCESS, stop_trainjob_controller, switch_trainjob_controller
from trainyard.controller.runtime.ratelimit import UPSTREAM_BURST, UPSTREAM_QPS
from trainyard.toolchain.build import ensure_built
from trainyard.waiting import wait_for

GROUP, VERSION = K.TRAINER_GROUP, K.TRAINER_VERSION
# TrainJobStatus off for both: upstream cannot serve it out of cluster, and it adds a ConfigMap per TrainJob.
CLUSTER = ClusterSpec(name="trainyard-sbs", port_base=29400, feature_gates="TrainJobStatus=false",
                      start_estimates_every=0, monitoring=False)
# Resources a TrainJob controller reads or writes; other rows of apiserver_request_total are left out.
RESOURCES = {"trainjobs", "trainingruntimes", "clustertrainingruntimes", "jobsets", "podgroups", "configmaps",
             "secrets", "namespaces", "queues", "resourcequotas", "events", "leases"}
# Rows reported but not summed into req/TJ: other components' work on the same objects (the JobSet
# controller's status writes, Volcano's PodGroup updates, everyone's events), the bench's own creates and
# clean-up, namespace lifecycle. What is summed is still every client's, so compare rows, not absolutes.
NOT_SUMMED = {("PUT", "jobsets/status"), ("PUT", "podgroups"), ("POST", "trainjobs")}
NOT_SUMMED_RESOURCES = {"events", "leases", "namespaces/finalize", "namespaces/status"}
WRITE_VERBS = {"APPLY", "PATCH", "POST", "CREATE", "PUT", "UPDATE"}


def runtime(namespace: str) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainingRuntime",
            "metadata": {"name": "bench-volcano", "namespace": namespace,
                         "labels": {K.LABEL_FRAMEWORK: "torch"}},
            "spec": {"mlPolicy": {"numNodes": 2, "torch": {}}, "podGroupPolicy": {"volcano": {}},
                     "template": {"metadata": {"annotations": {K.VOLCANO_QUEUE_ANNOTATION: "default"}},
                                  "spec": {"replicatedJobs": [{"name": "node", "template": {
                                      "metadata": {"labels": {K.LABEL_ANCESTOR: "trainer"}},
                                      "spec": {"template": {"spec": {"schedulerName": "volcano", "containers": [{
                                          "name": "node", "image": "pytorch/pytorch:2.7.1",
                                          "command": ["torchrun", "train.py"],
                                          "resources": {"limits": {K.GPU_RESOURCE: "8"}}}]}}}}}]}}}}


def trainjob(name: str, namespace: str) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"name": "bench-volcano", "kind": "TrainingRuntime"}, "suspend": True}}


class Clients:
    """Python clients on the bench cluster's admin kubeconfig, one per thread that needs its own."""

    def __init__(self, name: str):
        self.kubeconfig = str(local.ClusterPaths.for_name(name).kubeconfig)

    def new(self):
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=self.kubeconfig)
        return api, client.CustomObjectsApi(api), client.CoreV1Api(api)


def request_counts(api_client) -> Counter:
    """kube-apiserver's apiserver_request_total, summed by (verb, resource), for the resources above."""
    text = api_client.call_api("/metrics", "GET", _preload_content=False, auth_settings=["BearerToken"],
                               _return_http_data_only=True).data.decode()
    counts: Counter = Counter()
    for sample, labels, value in samples(text, "apiserver_request_total"):
        resource = labels.get("resource", "")
        if sample == "apiserver_request_total" and resource in RESOURCES:
            subresource = labels.get("subresource")
            counts[(labels.get("verb", ""), resource + (f"/{subresource}" if subresource else ""))] += value
    return counts


# The counter of requests each controller itself sent: client-go's, which controller-runtime exposes upstream,
# and trainyard's (by method and resource). Only the controller's own requests: no other component's.
OWN_REQUEST_COUNTERS = {"upstream": "rest_client_requests", "trainyard": "trainyard_rest_client_requests"}


def own_requests(which: str) -> Counter:
    """Requests the running controller has sent, by method, from its metrics endpoint."""
    from urllib.request import urlopen

    with urlopen(f"http://127.0.0.1:{CLUSTER.ports.port('controller_metrics')}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts: Counter = Counter()
    for sample, labels, value in samples(text, OWN_REQUEST_COUNTERS[which]):
        if sample.endswith("_total"):
            counts[labels.get("method", "")] += value
    return counts


def wait_for_children(watcher: ChildrenWatch, namespace: str, names: list[str], timeout: float) -> bool:
    keys = [(namespace, name) for name in names]
    return wait_for(lambda: watcher.count(keys) == len(keys), timeout, f"the children of {len(names)} TrainJobs",
                    0.2, error=None)


def create_all(clients: Clients, namespace: str, names: list[str], threads: int = 8) -> None:
    local_clients = threading.local()

    def create(name: str) -> None:
        if not hasattr(local_clients, "custom"):
            _, local_clients.custom, _ = clients.new()
        local_clients.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs",
                                                              trainjob(name, namespace))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, names))


def write_ceiling(clients: Clients, seconds: float = 10.0, threads: int = 8) -> float:
    """Small ConfigMap creates per second the API server sustains from 8 threads."""
    _, _, core = clients.new()
    core.create_namespace({"metadata": {"name": "sbs-ceiling"}})
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()  # the writers' time box
    counts = [0] * threads

    def writer(index: int) -> None:
        _, _, api = clients.new()
        while not stop.is_set():
            api.create_namespaced_config_map("sbs-ceiling", {"metadata": {"name": f"c-{index}-{counts[index]}"},
                                                             "data": {"k": "v"}})
            counts[index] += 1

    started = time.monotonic()
    workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    rate = sum(counts) / (time.monotonic() - started)
    core.delete_namespace("sbs-ceiling")
    return rate


def start_controller(which: str, unlimited: bool) -> int:
    """Start `which` controller on the bench cluster at shipped or unlimited client limits; its pid."""
    limits = (-1.0, UPSTREAM_BURST) if unlimited else (UPSTREAM_QPS, UPSTREAM_BURST)
    switch_trainjob_controller(CLUSTER.name, which, echo=lambda msg: print(f"# {msg}", file=sys.stderr),
                               client_limits=limits)
    return ProcessTable(local.ClusterPaths.for_name(CLUSTER.name).root).load()[PROCESS]


def clean_up(custom, core, namespace: str) -> None:
    """TrainJobs first, then the namespace: the namespace controller, racing the next run's CRD switch, can
    finish a namespace while TrainJobs are left in etcd, and the next controller would reconcile them."""
    custom.delete_collection_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs")
    if not wait_for(lambda: not custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs")["items"],
                    300, f"the TrainJobs in {namespace} deleted", 1, error=None):
        raise RuntimeError(f"TrainJobs in {namespace} were not deleted within 300 s")
    core.delete_namespace(namespace)


class Sampler:
    """py-spy recording a live process into collapsed stacks until `stop()`."""

    def __init__(self, pid: int, path: Path):
        py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent))
        if not py_spy:
            raise SystemExit("--profile needs py-spy in the venv (it is in the test extra: make dev)")
        self.path = path
        self.process = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--rate", "100", "--gil", "--format", "raw",
                                         "--nolineno", "--output", str(path)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop(self) -> dict:
        self.process.send_signal(signal.SIGINT)
        _, err = self.process.communicate(timeout=120)
        if not self.path.is_file():
            raise RuntimeError(f"py-spy wrote no profile: {err.strip()[-400:]}")
        stacks = parse_collapsed(self.path.read_text())
        return {"samples": sum(stacks.values()), **top_as_json(stacks, 20)}


def run_one(clients: Clients, which: str, unlimited: bool, index: int, count: int, stream: int, rate: float,
            profile_dir: Path | None = None) -> dict:
    label = f"{which}{' unlimited' if unlimited else ''}"
    print(f"# {label}: {count} TrainJobs pre-created, then a stream of {stream} at {rate}/s", file=sys.stderr)
    stop_trainjob_controller(CLUSTER.name)
    api_client, custom, core = clients.new()
    namespace = f"sbs-{index}"
    core.create_namespace({"metadata": {"name": namespace}})
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "trainingruntimes", runtime(namespace))
    drain_names = [f"tj-{i:05d}" for i in range(count)]
    create_all(clients, namespace, drain_names)
    watcher = ChildrenWatch(lambda: clients.new()[1], namespace).start()
    done = watcher.both  # (namespace, name) -> when both children were seen
    before = request_counts(api_client)
    started = time.monotonic()
    pid = start_controller(which, unlimited)
    rss = RssTrace(pid, started)
    sampler = None
    if profile_dir is not None and which == "trainyard":
        profile_dir.mkdir(parents=True, exist_ok=True)
        sampler = Sampler(pid, profile_dir / f"profile-{label.replace(' ', '-')}.txt")
    drained = wait_for_children(watcher, namespace, drain_names, timeout=1800)
    drain_seconds = max(done.get((namespace, n), time.monotonic()) for n in drain_names) - started

    stream_names, created = [f"st-{i:05d}" for i in range(stream)], {}
    stream_started = time.monotonic()
    for i, name in enumerate(stream_names):
        time.sleep(max(0.0, stream_started + i / rate - time.monotonic()))
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs", trainjob(name, namespace))
        created[name] = time.monotonic()
    wait_for_children(watcher, namespace, stream_names, timeout=600)
    latencies = [done[(namespace, n)] - created[n] for n in stream_names if (namespace, n) in done]
    usage = process_usage(pid) if pid_alive(pid) else None
    cpu, peak = (usage.cpu_s, usage.peak_rss_mib) if usage else (float("nan"), float("nan"))
    profile = sampler.stop() if sampler else None
    rss_points = rss.finish()
    own = own_requests(which)
    after = request_counts(api_client)
    watcher.stop.set()
    total = count + stream
    deltas = {k: (after[k] - before.get(k, 0)) / total for k in sorted(after) if after[k] - before.get(k, 0) > 0}
    summed = {(verb, resource): v for (verb, resource), v in deltas.items()
              if verb != "DELETE" and (verb, resource) not in NOT_SUMMED and resource not in NOT_SUMMED_RESOURCES}
    writes = sum(v for (verb, _), v in summed.items() if verb in WRITE_VERBS)
    curve = sorted(done[(namespace, n)] - started for n in drain_names if (namespace, n) in done)
    stop_trainjob_controller(CLUSTER.name)
    clean_up(custom, core, namespace)
    return {
        "controller": which, "limits": "unlimited" if unlimited else "shipped (qps 50, burst 100)",
        "drained": drained, "drain_seconds": round(drain_seconds, 1),
        "trainjobs_per_second": round(len(curve) / drain_seconds, 1) if drain_seconds > 0 else None,
        "stream_p50_ms": round(1000 * (percentile(latencies, 50) or 0), 1) if latencies else None,
        "stream_p99_ms": round(1000 * (percentile(latencies, 99) or 0), 1) if latencies else None,
        "stream_completed": len(latencies),
        "requests_per_trainjob": {f"{verb} {resource}": round(v, 2) for (verb, resource), v in deltas.items()},
        "requests_per_trainjob_summed": round(sum(summed.values()), 2),
        "own_requests_per_trainjob": {method: round(n / total, 2) for method, n in sorted(own.items())},
        "own_requests_per_trainjob_total": round(sum(own.values()) / total, 2),
        "writes_per_trainjob": round(writes, 2),
        "cpu_seconds_per_trainjob": round(cpu / total, 4), "peak_rss_mib": round(peak, 1),
        "completed_over_time": curve,
        "rss_mib_over_time": rss_points,
        **({"profile_top": profile} if profile else {}),
    }


def table(results: list[dict], ceiling: float) -> str:
    rows = [("controller", "limits", "drain s", "TJ/s", "p50 ms", "p99 ms", "req/TJ", "own req/TJ", "writes/TJ",
             "CPU s/TJ", "RSS MiB", "of ceiling")]
    for r in results:
        allowed = ceiling / r["writes_per_trainjob"] if r["writes_per_trainjob"] else None
        share = f"{r['trainjobs_per_second'] / allowed:.2f}" if allowed and r["trainjobs_per_second"] else "-"
        rows.append((r["controller"], r["limits"].split(" ")[0], r["drain_seconds"], r["trainjobs_per_second"],
                     r["stream_p50_ms"], r["stream_p99_ms"], r["requests_per_trainjob_summed"],
                     r.get("own_requests_per_trainjob_total", "-"), r["writes_per_trainjob"],
                     r["cpu_seconds_per_trainjob"], r["peak_rss_mib"], share))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).rjust(w) for v, w in zip(row, widths)) for row in rows)


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        curve = r["completed_over_time"]
        ax.step(curve, range(1, len(curve) + 1), where="post", label=f"{r['controller']} ({r['limits'].split(' ')[0]})")
    ax.set_xlabel("seconds since the controller started")
    ax.set_ylabel("TrainJobs with JobSet + PodGroup")
    ax.set_title("Drain of pre-created TrainJobs")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run_key(run: dict) -> str:
    """`trainyard-shipped`, `upstream-unlimited`: a run's name in the results, whatever the order they ran in."""
    return f"{run['controller']}-{run['limits'].split()[0]}"


def main(argv: list[str] | None = None) -> int:
    record = run_record(["bench/side_by_side.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--stream", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--controllers", default="trainyard,upstream")
    parser.add_argument("--limits", choices=("shipped", "unlimited", "both"), default="both")
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    parser.add_argument("--profile", action="store_true", help="sample trainyard's controller with py-spy")
    args = parser.parse_args(argv)
    ensure_built(*local.REQUIRED_TOOLS, "kubeflow-trainer")
    if local.is_running(CLUSTER.name):
        local.down(CLUSTER.name, echo=lambda *_: None)
    local.up(CLUSTER, echo=lambda msg: print(f"# {msg}", file=sys.stderr))
    clients = Clients(CLUSTER.name)
    results: list[dict] = []
    try:
        ceiling = write_ceiling(clients)
        runs = [(which, unlimited) for which in args.controllers.split(",") for unlimited in
                {"shipped": (False,), "unlimited": (True,), "both": (False, True)}[args.limits]]
        for index, (which, unlimited) in enumerate(runs):
            results.append(run_one(clients, which, unlimited, index, args.count, args.stream, args.rate,
                                   args.out if args.profile else None))
    finally:
        if not args.keep:
            local.down(CLUSTER.name, echo=lambda *_: None)
    args.out.mkdir(parents=True, exist_ok=True)
    figures = {"trainjobs": args.count, "stream": args.stream, "stream_rate": args.rate,
               "write_ceiling_per_second": round(ceiling, 1), "runs": results}
    figures["by_run"] = {run_key(r): r for r in results}
    write_results(args.out, "side_by_side", record, figures)
    plot(results, args.out / "side_by_side.png")
    print(f"API-server write ceiling: {ceiling:.0f} ConfigMap creates/s (8 threads)")
    print(table(results, ceiling))
    print(f"figures: {args.out / 'side_by_side.json'}, plot: {args.out / 'side_by_side.png'}")
    for r in results:
        print(f"{r['controller']} ({r['limits']}): " + ", ".join(f"{k} {v}" for k, v in r["requests_per_trainjob"].items()))
        print("  its own requests per TrainJob: " + ", ".join(f"{k} {v}" for k, v in r["own_requests_per_trainjob"].items()))
        if "profile_top" in r:
            for by in ("self", "total"):
                entries = [ProfileEntry(e["function"], e["self"], e["total"]) for e in r["profile_top"][f"by_{by}"]]
                print(f"  profile ({r['profile_top']['samples']} samples), top by {by}:\n" + format_entries(entries[:15]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
