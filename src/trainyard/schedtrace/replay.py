"""The thin I/O layer of the trace benchmark: set up a local cluster, switch the scheduler profile, submit
the trace on time, record every trace pod's bind and end from a watch, and clean up between runs.

Everything measured is computed afterwards by `schedtrace.metrics` from the records this layer returns.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

import yaml

from trainyard import k8s as K
from trainyard.cluster import local
from trainyard.queues.scheduler_config import SchedulerSettings, render, scheduler_configmap
from trainyard.schedtrace import objects
from trainyard.schedtrace.metrics import by_job, job_finished
from trainyard.scheduling.records import PodRecord
from trainyard.scheduling.trace import Tenant, TraceJob
from trainyard.waiting import wait_for

TENANT_KINDS = (K.resource_name(K.TRAINJOBS, K.TRAINER_GROUP), K.resource_name(K.JOBSETS, K.JOBSET_GROUP), "jobs.batch",
                K.resource_name(K.PODGROUPS, K.VOLCANO_GROUP), "pods")


@dataclass
class RunRecord:
    """What one replay observed: submission times and every trace pod's record (seconds since start)."""

    profile: str
    direct: bool
    submitted: dict[str, float] = field(default_factory=dict)
    pods: dict[str, PodRecord] = field(default_factory=dict)
    end: float = 0.0
    wall_s: float = 0.0
    unfinished: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    """Jobs whose objects the API server refused, with its message (the run goes on without them)."""
    started_epoch: float = 0.0
    """Wall-clock time of its start: what puts loops' epoch timestamps (evictions) on the records' clock."""


class PodWatch:
    """Follows the trace's pods (label selector) and records when each was first seen bound and when it
    ended; a dropped watch is resumed from its last resourceVersion (relisted after a 410)."""

    def __init__(self, core, started: float):
        self.core, self.started = core, started
        self.pods: dict[str, PodRecord] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def now(self) -> float:
        return time.monotonic() - self.started

    def _saw(self, kind: str, pod) -> None:
        uid, now = pod.metadata.uid, self.now()
        gpus = sum(int((c.resources.requests or c.resources.limits or {}).get(K.GPU_RESOURCE, 0))
                   for c in pod.spec.containers)
        with self.lock:
            record = self.pods.get(uid) or PodRecord(job=pod.metadata.labels[K.TRACE_JOB_LABEL], gpus=gpus)
            if pod.spec.node_name and record.bound is None:
                record = replace(record, node=pod.spec.node_name, bound=now)
            phase = pod.status.phase if pod.status else None
            if record.ended is None and (kind == "DELETED" or phase in ("Succeeded", "Failed")
                                         or pod.metadata.deletion_timestamp):
                record = replace(record, ended=now, succeeded=phase == "Succeeded")
            self.pods[uid] = record

    def _run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        version = None
        while not self.stop.is_set():
            try:
                if version is None:
                    listed = self.core.list_pod_for_all_namespaces(label_selector=K.TRACE_JOB_LABEL)
                    for pod in listed.items:
                        self._saw("ADDED", pod)
                    version = listed.metadata.resource_version
                stream = watch.Watch().stream(self.core.list_pod_for_all_namespaces, label_selector=K.TRACE_JOB_LABEL,
                                              resource_version=version, timeout_seconds=30,
                                              allow_watch_bookmarks=True)
                for event in stream:
                    version = event["object"].metadata.resource_version
                    if event["type"] != "BOOKMARK":
                        self._saw(event["type"], event["object"])
                    if self.stop.is_set():
                        return
            except ApiException as exc:
                version = None if exc.status == 410 else version
                time.sleep(0.2)
            except Exception:  # the API server is busy or restarting: resume
                time.sleep(0.5)

    def records(self) -> dict[str, PodRecord]:
        with self.lock:
            return dict(self.pods)


class Replay:
    """One local cluster, set up once for the trace's tenants; `run` replays a trace under one profile."""

    def __init__(self, cluster: str, tenants: tuple[Tenant, ...], capacity_gpus: int, echo=print):
        from kubernetes import client, config

        self.cluster, self.tenants, self.capacity, self.echo = cluster, tenants, capacity_gpus, echo
        self.api_client = config.new_client_from_config(config_file=str(local.ClusterPaths.for_name(cluster).kubeconfig))
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)

    def apply(self, documents: list[dict]) -> None:
        local.kubectl(self.cluster, "apply", "--server-side", "--force-conflicts", "-f", "-",
                      input_text=yaml.safe_dump_all(documents))

    def setup(self) -> None:
        """Tenants (namespace + queue), HyperNodes from the nodes' labels, and the trace runtimes."""
        nodes = [self.api_client.sanitize_for_serialization(n) for n in self.core.list_node().items]
        self.apply(objects.tenant_objects_for(self.tenants, self.capacity) + objects.hypernodes_for(nodes)
                   + objects.runtimes(gang=True) + objects.runtimes(gang=False))
        wait_for(lambda: all(self._queue_open(t.name) for t in self.tenants), 90, "the tenant queues to open", 0.5)

    def _tenant_namespaces(self, gang: bool) -> None:
        """The kube-scheduler baseline needs plain namespaces: in a tenant namespace (queue label) the controller
        makes every TrainJob a Volcano gang. Gang profiles put the label back."""
        for tenant in self.tenants:
            label = f"{K.NAMESPACE_QUEUE_LABEL}={tenant.name}" if gang else f"{K.NAMESPACE_QUEUE_LABEL}-"
            local.kubectl(self.cluster, "label", "namespace", tenant.name, label, "--overwrite")

    def topology(self) -> tuple[dict[str, str], dict[str, str]]:
        """node -> rack, node -> spine, from the node labels."""
        nodes = self.core.list_node().items
        labels = {n.metadata.name: n.metadata.labels or {} for n in nodes}
        return ({n: lab.get(K.RACK_LABEL, "") for n, lab in labels.items()},
                {n: lab.get(K.SPINE_LABEL, "") for n, lab in labels.items()})

    def _queue_open(self, name: str) -> bool:
        queue = self.custom.get_cluster_custom_object(K.VOLCANO_GROUP, K.VOLCANO_VERSION, K.QUEUES, name)
        return (queue.get("status") or {}).get("state") == "Open"

    def use_scheduler_settings(self, settings: SchedulerSettings) -> None:
        """Deploy the generated scheduler ConfigMap and wait until vc-scheduler's file holds it (the cluster's
        scheduler-conf sync copies it; vc-scheduler reloads on the file's change)."""
        self.apply(objects.tenant_queues_for(self.tenants, self.capacity, settings.queue_plugin)
                   + [scheduler_configmap(settings)])
        conf = local.ClusterPaths.for_name(self.cluster).scheduler_conf
        wanted = render(settings)
        wait_for(lambda: conf.exists() and conf.read_text() == wanted, 60, "the scheduler conf file to update", 0.5)
        time.sleep(2.0)  # vc-scheduler reloads on the file event; give it a few cycles

    def run(self, trace: list[TraceJob], profile: str, gang: bool, direct: bool, timeout: float,
            build: Callable[[TraceJob], list[dict]] | None = None) -> RunRecord:
        """Submit every job at its arrival time (the objects `build` makes of it, by default the bench's);
        return when all finished or `timeout` seconds passed."""
        build = build or (lambda job: objects.submissions(job, gang, direct))
        self._tenant_namespaces(gang)
        record = RunRecord(profile=profile, direct=direct, started_epoch=time.time())
        started = time.monotonic()
        watcher = PodWatch(self.core, started)
        lock = threading.Lock()

        def submit(job: TraceJob) -> None:
            at = time.monotonic() - started
            try:
                for obj in build(job):
                    self._create(obj)
            except Exception as exc:  # noqa: BLE001 - reported with the run, never silently dropped
                with lock:
                    record.refused[job.name] = str(exc)[-500:]
                self.echo(f"  {job.name} refused: {str(exc)[-300:]}")
                return
            with lock:
                record.submitted[job.name] = at

        with ThreadPoolExecutor(max_workers=4) as pool:
            for job in sorted(trace, key=lambda j: j.arrival):
                delay = job.arrival - (time.monotonic() - started)
                if delay > 0:
                    time.sleep(delay)
                pool.submit(submit, job)
        self.echo(f"  {profile}: {len(trace)} jobs submitted after {time.monotonic() - started:.0f}s; waiting for them")
        remaining = {job.name: job for job in trace if job.name not in record.refused}

        def all_finished() -> bool:
            for name in _finished_jobs(remaining.values(), watcher.records()):
                remaining.pop(name)
            return not remaining

        wait_for(all_finished, started + timeout - time.monotonic(), "every trace job to finish", 2.0, error=None)
        record.end = watcher.now()
        watcher.stop.set()
        record.pods = watcher.records()
        record.unfinished = sorted(remaining)
        record.wall_s = round(time.monotonic() - started, 1)
        return record

    def _create(self, obj: dict) -> None:
        namespace = obj["metadata"]["namespace"]
        if obj["kind"] == "Pod":
            self.core.create_namespaced_pod(namespace, obj)
            return
        group, version = obj["apiVersion"].split("/")
        plural = {"TrainJob": K.TRAINJOBS, "PodGroup": K.PODGROUPS}[obj["kind"]]
        self.custom.create_namespaced_custom_object(group, version, namespace, plural, obj)

    def clean(self, timeout: float = 300) -> None:
        """Delete every trace object in the tenant namespaces and wait until none is left: the next run
        reuses the job names, and a JobSet or pod still being collected would be taken for the new job's."""
        kinds = ",".join(TENANT_KINDS)
        for tenant in self.tenants:
            local.kubectl(self.cluster, "delete", kinds, "--all", "-n", tenant.name, "--wait=false", "--ignore-not-found")

        def gone() -> bool:
            return all(not local.kubectl(self.cluster, "get", kinds, "-n", t.name, "-o", "name").strip()
                       for t in self.tenants)

        wait_for(gone, timeout, "the trace objects to be deleted", 2.0)


def _finished_jobs(jobs, pods: dict[str, PodRecord]) -> list[str]:
    grouped = by_job(pods.values())
    return [job.name for job in jobs if job_finished(job, grouped.get(job.name, ())) is not None]
