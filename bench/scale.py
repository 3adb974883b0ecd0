#!/usr/bin/env python3
"""The platform at scale: a local cluster of 1,000 simulated nodes x 8 GPUs (125 racks under 16 spines) and a
stack of 100 generated tenants (`trainyard.scale_stack`); prints figures, asserts nothing.

Phase `pulumi` (issue 21, part 2; targets in brackets):
- `pulumi up` of the 100-tenant stack onto the fresh cluster, and the number of resources it manages;
- `pulumi preview` with no change [<= 60 s], checked to be empty (`--expect-no-changes`);
- a one-tenant change (a queue weight): its preview, then its apply as `trainyard platform up` runs it (`pulumi
  up`, then the refresh of the adoptable objects it touched) [<= 60 s]; then a preview checked to be empty.

Phase `controller`, on the same cluster and tenants: a seeded trace (`trainyard.scheduling.trace`: single pods of
1-8 GPUs and gangs of 2-8 pods x 8 GPUs, log-normal durations) of `--jobs` TrainJobs arriving over a simulated hour,
played in `--span` seconds (arrivals and durations scaled alike; kwok completes each pod after its duration). Each
TrainJob is what a data scientist submits to the platform: the tenant's catalog runtime `torch-distributed-gpu`,
nodes and GPUs per node. It prints:
- the controller's drain: TrainJobs whose JobSet and PodGroup exist, per second, and the lag from create to both
  (p50/p99/max); its CPU seconds, CPU per TrainJob and resident memory (peak, and at the end) [RSS <= 1 GiB];
- Volcano's scheduling-cycle p99 over the run (vc-scheduler's e2e scheduling latency histogram);
- `trainyard report` and `trainyard fit` wall time with every TrainJob in place [<= 5 s each];
- API requests per TrainJob: every client's (kube-apiserver's apiserver_request_total) and the controller's own.

Results: `--out DIR`/scale.json and a table on stdout; Pulumi's own output goes to `--out DIR`/scale-pulumi.log.

Usage: .venv/bin/python bench/scale.py [--nodes 1000] [--racks 125] [--spines 16] [--tenants 100] [--jobs 10000]
       [--span 600] [--median-job-seconds 120] [--seed 21] [--out bench/out] [--keep] [--profile]
It starts its own cluster (name trainyard-scale, ports from 29800) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.request import urlopen

import yaml

from trainyard import k8s as K
from trainyard import stack_deploy
from trainyard.benchkit import ChildrenWatch, counter_sum, histogram_buckets, process_usage, run_record, write_results
from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable
from trainyard.cluster.spec import ClusterSpec
from trainyard.cluster.trainer_controllers import PROCESS
from trainyard.profiles import parse_collapsed, top_as_json
from trainyard.scale_stack import WEIGHTS, scale_stack_document, tenant_name, with_tenant_weight
from trainyard.schedtrace import objects
from trainyard.scheduling.trace import Tenant, TraceJob, generate
from trainyard.stats import histogram_quantile, percentile
from trainyard.timestamps import utc_now
from trainyard.toolchain.build import ensure_built
from trainyard.waiting import wait_for

STACK = "scale"


def timed(label: str, action) -> float:
    print(f"# {label} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    action()
    seconds = time.monotonic() - started
    print(f"# {label}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return round(seconds, 1)


def pulumi_phase(spec: ClusterSpec, tenants: int, log: Path) -> dict:
    """The 100-tenant stack's Pulumi passes, each as `trainyard platform preview/up` runs it (`--parallel`, and
    after `up` the refresh of adoptable objects it touched)."""
    document = scale_stack_document(stack_deploy.read_stack_file("local"), spec, tenants)
    target = stack_deploy.local_target(STACK, document, spec.name)
    figures: dict = {"tenants": tenants, "parallel": stack_deploy.PULUMI_PARALLEL}
    figures["up_seconds"] = timed(f"pulumi up of {tenants} tenants", lambda: apply(target, log))
    figures["resources"] = len(stack_deploy.stack_resources(target))
    figures["noop_preview_seconds"] = timed(
        "pulumi preview, no change", lambda: stack_deploy.run_target(target, "preview", ("--expect-no-changes",), log=log))
    changed = stack_deploy.local_target(STACK, with_tenant_weight(document, 0, 9), spec.name)
    figures["one_tenant_preview_seconds"] = timed(
        "pulumi preview of a one-tenant change", lambda: stack_deploy.run_target(changed, "preview", log=log))
    figures["one_tenant_apply_seconds"] = timed("applying it (trainyard platform up)", lambda: apply(changed, log))
    figures["one_tenant_end_to_end_seconds"] = round(figures["one_tenant_preview_seconds"]
                                                     + figures["one_tenant_apply_seconds"], 1)
    figures["after_change_noop_preview_seconds"] = timed(
        "pulumi preview after it, no change",
        lambda: stack_deploy.run_target(changed, "preview", ("--expect-no-changes",), log=log))
    return figures


def apply(target: stack_deploy.StackTarget, log: Path) -> None:
    """What `trainyard platform up` does: `pulumi up`, then the refresh of the adoptable objects it touched."""
    started = utc_now()
    stack_deploy.run_target(target, "up", log=log)
    stack_deploy.refresh_adopted(target, started, log=log)


SIMULATED_HOUR = 3600.0
RUNTIME = "torch-distributed-gpu"
"""The catalog runtime every tenant has (both pinned releases): GPU nodes, Volcano gang, the tenant's queue."""


def trace_tenants(count: int) -> tuple[Tenant, ...]:
    """The stack's tenants with the stack's queue weights, each submitting an equal share of the jobs."""
    return tuple(Tenant(tenant_name(i), WEIGHTS[i % len(WEIGHTS)], 1.0 / count) for i in range(count))


def over_an_hour(trace: list[TraceJob], span: float) -> list[TraceJob]:
    """The trace's arrivals stretched to a simulated hour and played in `span` real seconds: arrival times and
    durations scaled by the same factor, so the offered load is the simulated one."""
    last = max((job.arrival for job in trace), default=0.0) or 1.0
    to_hour, to_real = SIMULATED_HOUR / last, span / SIMULATED_HOUR
    return [dataclasses.replace(job, arrival=round(job.arrival * to_hour * to_real, 3),
                                duration=round(max(1.0, job.duration * to_real), 2)) for job in trace]


def scale_trainjob(job: TraceJob) -> dict:
    """The trace job as a tenant's user submits it: the catalog runtime in their namespace, nodes and GPUs per node
    (the trace's runtime patch only stamps how long kwok lets the pods run)."""
    trainjob = objects.trainjob(job, gang=True)
    trainjob["spec"]["runtimeRef"] = {"name": RUNTIME, "kind": "TrainingRuntime"}
    return trainjob


def metric_text(url: str) -> str:
    with urlopen(url, timeout=30) as response:
        return response.read().decode()


def api_requests(cluster: str) -> float:
    """Every client's requests so far (apiserver_request_total, all verbs and resources)."""
    return counter_sum(local.kubectl(cluster, "get", "--raw", "/metrics"), "apiserver_request_total")


def _rounded(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def observed_since(before: dict[float, float], after: dict[float, float]) -> list[tuple[float, float]]:
    """A histogram's cumulative buckets for the observations between two scrapes."""
    return [(bound, count - before.get(bound, 0.0)) for bound, count in after.items()]


def observations(buckets: list[tuple[float, float]]) -> int:
    return round(sum(count for bound, count in buckets if bound == float("inf")))


@dataclasses.dataclass(frozen=True)
class CommandRun:
    seconds: float
    cpu_seconds: float
    """The command's own CPU (user + system): what the wall time is not spent waiting on the API server."""
    exit_code: int
    profile: dict | None = None


CACHED_BYTECODE = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
"""The commands' environment: with the bytecode cache a user's second run of a command has (a shell that sets
PYTHONDONTWRITEBYTECODE recompiles every module on every run: 0.5 s of CPU that is not the command's)."""


def timed_command(*args: str, profile: Path | None = None) -> CommandRun:
    """Run a trainyard command; with `profile`, under py-spy (every thread, idle ones too: waiting on the API server
    shows as such), its collapsed stacks written there and their top entries returned."""
    command = list(args)
    if profile is not None:
        command = [str(Path(sys.executable).parent / "py-spy"), "record", "--idle", "--rate", "100", "--format", "raw",
                   "--nolineno", "--output", str(profile), "--", *command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, env=CACHED_BYTECODE)
    seconds = round(time.monotonic() - started, 2)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    found = None
    if profile is not None and profile.is_file():
        stacks = parse_collapsed(profile.read_text())
        found = top_as_json(stacks, 15)
    return CommandRun(seconds, round(cpu, 2), result.returncode, found)


def delivered_load(offered: float, span: float, created_at: list[float]) -> dict:
    """What the submitters really offered: the trace's load was stated over `span` seconds; creates that took
    longer spread the same work over their real arrival span, a lower load (offered x span / real span)."""
    real_span = max(created_at) - min(created_at) if len(created_at) > 1 else 0.0
    return {"arrival_span_seconds": round(real_span, 1),
            "creates_per_second": round(len(created_at) / real_span, 2) if real_span else None,
            "stated_creates_per_second": None,
            "offered_load_delivered": round(offered * span / real_span, 3) if real_span else None}


def pods_by_phase(core) -> dict[str, int]:
    """Pods of every namespace by phase, at the end of the phase (kwok completes each after its duration)."""
    phases: dict[str, int] = {}
    token = None
    while True:
        page = core.list_pod_for_all_namespaces(limit=5000, _continue=token)
        for pod in page.items:
            phase = (pod.status.phase if pod.status else None) or "Unknown"
            phases[phase] = phases.get(phase, 0) + 1
        token = page.metadata._continue
        if not token:
            return phases


def controller_phase(spec: ClusterSpec, tenants: int, jobs: int, span: float, median: float, seed: int,
                     out: Path, profile: bool = False, submitters: int = 16) -> dict:
    """Play the trace against the platform the Pulumi phase deployed and measure the controller at that size."""
    from kubernetes import client, config

    paths = local.ClusterPaths.for_name(spec.name)
    kubeconfig = str(paths.kubeconfig)
    capacity = spec.nodes * spec.gpus_per_node
    hourly = generate(seed, jobs, capacity, trace_tenants(tenants), median_duration=median, overload=1.0,
                      rack_nodes=spec.nodes // spec.racks, spine_nodes=spec.nodes // spec.spines)
    offered = sum(j.pods * j.gpus_per_pod * j.duration for j in hourly) / (SIMULATED_HOUR * capacity)
    trace = over_an_hour(hourly, span)
    pid = ProcessTable(paths.root).load()[PROCESS]
    scheduler_metrics = f"http://127.0.0.1:{spec.ports.port('volcano_scheduler_metrics')}/metrics"
    controller_metrics = f"http://127.0.0.1:{spec.ports.port('controller_metrics')}/metrics"
    cycle_metric = "volcano_e2e_scheduling_latency_milliseconds"
    own_metric = "trainyard_rest_client_requests_total"
    resume_metric = "trainyard_admitted_gang_resume_seconds"
    cycles_before = histogram_buckets(metric_text(scheduler_metrics), cycle_metric)
    resumes_before = histogram_buckets(metric_text(controller_metrics), resume_metric)
    own_before = counter_sum(metric_text(controller_metrics), own_metric)
    requests_before = api_requests(spec.name)
    cpu_before = process_usage(pid).cpu_s
    children = ChildrenWatch(lambda: client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))).start()
    submitted: dict[tuple[str, str], float] = {}
    refused: dict[str, str] = {}
    created_at: list[float] = []
    lock = threading.Lock()
    local_api = threading.local()
    started = time.monotonic()

    def submit(job: TraceJob) -> None:
        if not hasattr(local_api, "custom"):
            local_api.custom = client.CustomObjectsApi(config.new_client_from_config(config_file=kubeconfig))
        at = time.monotonic()
        try:
            local_api.custom.create_namespaced_custom_object(K.TRAINER_GROUP, K.TRAINER_VERSION, job.tenant,
                                                             K.TRAINJOBS, scale_trainjob(job))
            done_at = time.monotonic()
        except Exception as exc:  # noqa: BLE001 - counted and reported, never silently dropped
            with lock:
                refused[job.name] = str(exc)[-300:]
            return
        with lock:
            submitted[(job.tenant, job.name)] = at
            created_at.append(done_at - started)

    print(f"# {len(trace)} TrainJobs over a simulated hour in {span:.0f} s (offered load {offered:.2f} of the "
          "cluster)", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(max_workers=submitters) as pool:
        for job in trace:
            delay = job.arrival - (time.monotonic() - started)
            if delay > 0:
                time.sleep(delay)
            pool.submit(submit, job)
    submit_seconds = time.monotonic() - started
    keys = set(submitted)
    print(f"# submitted {len(keys)} ({len(refused)} refused) in {submit_seconds:.0f} s; waiting for their children",
          file=sys.stderr, flush=True)
    wait_for(lambda: children.count(keys) == len(keys), 900, "every TrainJob's JobSet and PodGroup", 2.0, error=None)
    children.stop.set()
    usage = process_usage(pid)
    cpu_after, peak_rss, rss = usage.cpu_s, usage.peak_rss_mib, usage.rss_mib
    lags = [children.both[key] - submitted[key] for key in keys if key in children.both]
    last_child = max((children.both[key] for key in keys if key in children.both), default=started)
    trainyard = str(Path(sys.executable).parent / "trainyard")
    probe = out / "scale-fit-probe.yaml"
    probe.write_text(yaml.safe_dump(scale_trainjob(TraceJob("fit-probe", tenant_name(0), 0.0, 60.0, 4, 8, None))))
    for warm_up in (("report",), ("fit", str(probe))):  # untimed: writes the bytecode cache a user's first run does
        timed_command(trainyard, *warm_up, "--kubeconfig", kubeconfig)
    report = timed_command(trainyard, "report", "--kubeconfig", kubeconfig)
    fit = timed_command(trainyard, "fit", str(probe), "--kubeconfig", kubeconfig)
    profiled = {}
    if profile:  # again, sampled (py-spy slows the command a little: the figures above are unsampled)
        profiled = {"report": timed_command(trainyard, "report", "--kubeconfig", kubeconfig,
                                            profile=out / "scale-report-profile.txt").profile,
                    "fit": timed_command(trainyard, "fit", str(probe), "--kubeconfig", kubeconfig,
                                         profile=out / "scale-fit-profile.txt").profile}
    cycles_after = histogram_buckets(metric_text(scheduler_metrics), cycle_metric)
    cycles = observed_since(cycles_before, cycles_after)
    own = counter_sum(metric_text(controller_metrics), own_metric) - own_before
    resumes_after = histogram_buckets(metric_text(controller_metrics), resume_metric)
    resumes = observed_since(resumes_before, resumes_after)
    requests = api_requests(spec.name) - requests_before
    done = len(lags)
    delivered = delivered_load(offered, span, created_at)
    delivered["stated_creates_per_second"] = round(jobs / span, 2)
    figures = {
        "jobs": jobs, "span_seconds": span, "simulated_seconds": SIMULATED_HOUR, "offered_load": round(offered, 2),
        "submitters": submitters, **delivered, "pods_by_phase_at_end": pods_by_phase(client.CoreV1Api(
            config.new_client_from_config(config_file=kubeconfig))),
        "submitted": len(keys), "refused": len(refused), "refused_examples": dict(list(refused.items())[:3]),
        "submit_seconds": round(submit_seconds, 1), "with_children": done,
        "drain_per_second": round(done / max(1e-9, last_child - started), 1),
        "lag_p50_seconds": round(percentile(lags, 50) or 0.0, 2), "lag_p99_seconds": round(percentile(lags, 99) or 0.0, 2),
        "lag_max_seconds": round(max(lags, default=0.0), 2),
        "controller_cpu_seconds": round(cpu_after - cpu_before, 1),
        "controller_cpu_per_trainjob": round((cpu_after - cpu_before) / max(1, done), 4),
        "controller_peak_rss_mib": round(peak_rss, 1), "controller_rss_mib_at_end": round(rss, 1),
        "volcano_cycles": observations(cycles),
        "volcano_cycle_p99_ms": _rounded(histogram_quantile(cycles, 99)),
        "volcano_cycle_p50_ms": _rounded(histogram_quantile(cycles, 50)),
        "admitted_gang_resumes": observations(resumes),
        "admitted_gang_resume_p50_seconds": _rounded(histogram_quantile(resumes, 50), 2),
        "admitted_gang_resume_p99_seconds": _rounded(histogram_quantile(resumes, 99), 2),
        "report_seconds": report.seconds, "report_cpu_seconds": report.cpu_seconds, "report_exit": report.exit_code,
        "fit_seconds": fit.seconds, "fit_cpu_seconds": fit.cpu_seconds, "fit_exit": fit.exit_code,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "api_requests_per_trainjob": round(requests / max(1, len(keys)), 1),
        "controller_requests_per_trainjob": round(own / max(1, len(keys)), 2),
        **({"profiles": profiled} if profiled else {}),
    }
    return figures


def table(figures: dict) -> str:
    p = figures["pulumi"]
    rows = [("what", "seconds", "target"),
            (f"pulumi up, {p['tenants']} tenants ({p['resources']} resources)", p["up_seconds"], "-"),
            ("pulumi preview, no change", p["noop_preview_seconds"], "<= 60"),
            ("one-tenant change: preview", p["one_tenant_preview_seconds"], "-"),
            ("one-tenant change: apply (trainyard platform up)", p["one_tenant_apply_seconds"], "<= 60"),
            ("one-tenant change: preview + apply", p["one_tenant_end_to_end_seconds"], "-"),
            ("pulumi preview after it, no change", p["after_change_noop_preview_seconds"], "<= 60")]
    c = figures.get("controller")
    if c:
        rows += [(f"{c['submitted']} TrainJobs over a simulated hour stated as {c['span_seconds']:.0f} s: created "
                  f"over (offered load {c['offered_load']} stated, {c['offered_load_delivered']} delivered; "
                  f"{c['creates_per_second']} creates/s by {c['submitters']} clients)", c["arrival_span_seconds"], "-"),
                 ("  controller drain (TrainJobs with JobSet + PodGroup per s)", c["drain_per_second"], "-"),
                 ("  lag create -> children p50 / p99 / max", f"{c['lag_p50_seconds']} / {c['lag_p99_seconds']} / "
                  f"{c['lag_max_seconds']}", "-"),
                 ("  controller CPU s (per TrainJob)", f"{c['controller_cpu_seconds']} "
                  f"({c['controller_cpu_per_trainjob']})", "-"),
                 ("  controller RSS MiB peak / at end", f"{c['controller_peak_rss_mib']} / "
                  f"{c['controller_rss_mib_at_end']}", "<= 1024"),
                 ("  Volcano scheduling cycle ms p50 / p99", f"{c['volcano_cycle_p50_ms']} / {c['volcano_cycle_p99_ms']}",
                  "-"),
                 ("  gang admitted -> JobSet resumed s p50 / p99 (resumes)",
                  f"{c.get('admitted_gang_resume_p50_seconds')} / {c.get('admitted_gang_resume_p99_seconds')} "
                  f"({c.get('admitted_gang_resumes')})", "-"),
                 (f"  trainyard report (its own CPU s; load average {c.get('load_average_1m')})",
                  f"{c['report_seconds']} ({c.get('report_cpu_seconds')})", "<= 5"),
                 ("  trainyard fit (its own CPU s)", f"{c['fit_seconds']} ({c.get('fit_cpu_seconds')})", "<= 5"),
                 ("  API requests per TrainJob: all clients / controller", f"{c['api_requests_per_trainjob']} / "
                  f"{c['controller_requests_per_trainjob']}", "-")]
    widths = [max(len(str(row[i])) for row in rows) for i in range(3)]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(row, widths)) for row in rows)


def main(argv: list[str] | None = None) -> int:
    record = run_record(["bench/scale.py", *(sys.argv[1:] if argv is None else argv)])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--racks", type=int, default=125)
    parser.add_argument("--spines", type=int, default=16)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=10000, help="TrainJobs of the controller phase (0: skip it)")
    parser.add_argument("--span", type=float, default=600.0, help="real seconds the simulated hour is played in")
    parser.add_argument("--median-job-seconds", type=float, default=120.0, help="simulated median job duration")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--submitters", type=int, default=16, help="concurrent clients creating TrainJobs")
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--keep", action="store_true", help="leave the bench cluster running")
    parser.add_argument("--profile", action="store_true", help="run report and fit once more under py-spy and "
                        "write their top functions into scale.json (`profiles`)")
    args = parser.parse_args(argv)
    spec = ClusterSpec(name="trainyard-scale", port_base=29800, nodes=args.nodes, racks=args.racks, spines=args.spines,
                       timed_pods=True, feature_gates="TrainJobStatus=false", start_estimates_every=60, monitoring=False)
    ensure_built(*local.REQUIRED_TOOLS, "pulumi", "pulumi-kubernetes", "pulumi-policy-analyzer")
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "scale-pulumi.log"
    log.write_text("")
    if local.is_running(spec.name):
        local.down(spec.name, echo=lambda *_: None)
    # `pulumi stack init scale` writes the new stack's settings file into stacks/ (the project's stackConfigDir):
    # the bench's stack is generated, not reviewed, so that file goes when the bench ends
    settings = stack_deploy.stack_file(STACK)
    settings_existed = settings.exists()
    figures: dict = {"nodes": spec.nodes, "gpus": spec.nodes * spec.gpus_per_node, "racks": spec.racks,
                     "spines": spec.spines}
    try:
        figures["cluster_up_seconds"] = timed(
            f"cluster up with {spec.nodes} nodes",
            lambda: local.up(spec, echo=lambda msg: print(f"# {msg}", file=sys.stderr)))
        figures["pulumi"] = pulumi_phase(spec, args.tenants, log)
        if args.jobs:
            figures["controller"] = controller_phase(spec, args.tenants, args.jobs, args.span,
                                                     args.median_job_seconds, args.seed, args.out, args.profile,
                                                     args.submitters)
    finally:
        if not args.keep:
            local.down(spec.name, echo=lambda *_: None)
        if not settings_existed:
            settings.unlink(missing_ok=True)
    write_results(args.out, "scale", record, figures)
    print(f"cluster up with {spec.nodes} nodes: {figures['cluster_up_seconds']} s")
    print(table(figures))
    print(f"figures: {args.out / 'scale.json'}; Pulumi's output: {log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
