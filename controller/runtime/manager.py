"""The controller process: informers feed a work queue, workers reconcile, one leader at a time.

Pieces: list+watch loops per watched kind (TrainJobs, and JobSets/PodGroups/ConfigMaps/Secrets
mapped to their owning TrainJob), a deduplicating rate-limited queue, N worker threads,
Lease-based leader election, Prometheus metrics and /healthz, /readyz.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from trainyard import k8s as K

from ..errors import ControllerError
from ..plugins.framework import StatusServerConfig
from ..snapshot_seal import SEAL_SECRET, SEAL_SECRET_KEY
from ..tenant_namespace import gang_admitted
from ..pod_refusals import owning_jobset_name
from .apiserver import COSCHEDULING_PODGROUP, FAILED_CREATE_EVENTS, RESOURCES, ApiServer, NotLeader, Resource
from .cache import CachedReads, Store
from .informer import LISTED, Informer
from .leader import LeaderElector
from .metrics_server import METRICS_PATH, serve_metrics
from .reconciler import owner_trainjob, reconcile
from .transport import ApiError
from .workqueue import ADMITTED_PRIORITY, LOW_PRIORITY, NORMAL_PRIORITY, WorkQueue

log = logging.getLogger("trainyard.controller")


def priority_of(event_type: str) -> int:
    return LOW_PRIORITY if event_type == LISTED else NORMAL_PRIORITY


def _ignore(_event: str, _obj: dict) -> None:
    """Cached for reads only: a change of these starts no reconcile (as upstream)."""


def is_controlled_by_a_trainjob(obj: dict) -> bool:
    return owner_trainjob(obj) is not None

Key = tuple[str, str]


@dataclass
class Settings:
    workers: int = 5
    leader_elect: bool = True
    lease_namespace: str = "trainyard-system"
    metrics_address: str = "127.0.0.1:8080"
    health_address: str = "127.0.0.1:8081"
    resync_seconds: int = 300
    status_server: StatusServerConfig | None = None  # feature gate TrainJobStatus
    gang_start_timeout: float = 0.0  # seconds; see reconciler.release_gang
    metrics_cert_dir: str | None = None  # /metrics over HTTPS with this serving pair (metrics_server.py)
    metrics_auth: bool = False  # /metrics only to callers allowed to get it (TokenReview, SubjectAccessReview)


def snapshot_seal_key(api: ApiServer, namespace: str) -> bytes:
    """The runtime-snapshot seal key from Secret `SEAL_SECRET` in the controller's namespace, created with 32
    random bytes by the first replica that finds none (a replica losing the create race reads the winner's)."""
    resource = RESOURCES["Secret"]
    for _ in range(3):
        found = api.get(resource, SEAL_SECRET, namespace)
        if found is not None:
            return base64.b64decode((found.get("data") or {})[SEAL_SECRET_KEY])
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": SEAL_SECRET, "namespace": namespace, "labels": {K.PART_OF_LABEL: "trainyard"}},
                  "data": {SEAL_SECRET_KEY: base64.b64encode(secrets.token_bytes(32)).decode()}}
        try:
            api.create(secret)
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise RuntimeError(f"cannot read or create Secret {namespace}/{SEAL_SECRET} (the runtime-snapshot seal key)")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.reconciles = Counter("trainyard_trainjob_reconcile_total", "TrainJob reconciles by result",
                                  ["result"], registry=self.registry)
        self.duration = Histogram("trainyard_trainjob_reconcile_duration_seconds", "Reconcile duration",
                                  registry=self.registry)
        self.depth = Gauge("trainyard_workqueue_depth", "Keys waiting in the work queue", registry=self.registry)
        self.leader = Gauge("trainyard_leader", "1 while this replica holds the lease", registry=self.registry)
        self.requests = Counter("trainyard_rest_client_requests_total", "Requests this process sent to the API "
                                "server, by method (WATCH for watches) and resource", ["method", "resource"],
                                registry=self.registry)
        self.resumes = Histogram("trainyard_admitted_gang_resume_seconds", "From the controller seeing Volcano admit "
                                 "a tenant gang whose JobSet waits suspended to the end of the reconcile that resumes "
                                 "it: the controller's share of an admitted gang's wait",
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300), registry=self.registry)
        self.reclaim_lost = Counter("trainyard_reclaim_lost_gpu_seconds_total", "GPU-seconds of work the reclaim loop "
                                    "threw away by suspending TrainJobs (since each one's last reported checkpoint), "
                                    "by namespace", ["namespace"], registry=self.registry)
        self.relists = Counter("trainyard_informer_relists_total", "Full relists of a watched kind after the first, "
                               "by cause (expired: 410 Gone; resync: the periodic resync)", ["resource", "cause"],
                               registry=self.registry)


class Manager:
    def __init__(self, api: ApiServer, settings: Settings, metrics: Metrics | None = None):
        self.api, self.settings = api, settings
        self.metrics = metrics or Metrics()
        self.queue: WorkQueue[Key] = WorkQueue()
        api.observe = lambda method, resource: self.metrics.requests.labels(method, resource).inc()
        self.stop = threading.Event()
        self.elector = LeaderElector(api, settings.lease_namespace) if settings.leader_elect else None
        relisted = lambda resource, cause: self.metrics.relists.labels(resource, cause).inc()  # noqa: E731
        watched: list[tuple[Resource, Callable[[str, dict], None], Store]] = [
            (RESOURCES["TrainJob"], self._on_trainjob, Store(RESOURCES["TrainJob"]))]
        watched += [(resource, self._on_owned, Store(resource)) for resource in
                    (RESOURCES["JobSet"], RESOURCES["PodGroup"], COSCHEDULING_PODGROUP)]
        watched += [(resource, self._on_owned, Store(resource, keep=is_controlled_by_a_trainjob)) for resource in
                    (RESOURCES["ConfigMap"], RESOURCES["Secret"])]
        watched.append((FAILED_CREATE_EVENTS, self._on_failed_create, Store(FAILED_CREATE_EVENTS)))
        watched += [(RESOURCES[kind], _ignore, Store(RESOURCES[kind]))
                    for kind in ("TrainingRuntime", "ClusterTrainingRuntime", "Queue", "Namespace", "ResourceQuota")]
        self.informers = [Informer(api, resource, handler, settings.resync_seconds, relisted, store=store)
                          for resource, handler, store in watched]
        self.stores = {resource: store for resource, _, store in watched}
        self.admitted_at: dict[Key, float] = {}  # TrainJobs whose gang was seen admitted, not yet reconciled since
        reads = CachedReads(api, {informer.resource: informer.store for informer in self.informers})
        # The webhook's and the companion loops' lookups: stores first, like upstream's cache; a miss asks the
        # API server (a store keeps only what reconcile reads: not the scheduler's ConfigMap, say).
        self.admission_reads = reads.for_admission()
        # Reconciles read from the informers' stores and write through a fenced view: one paused
        # mid-reconcile past the lease writes nothing.
        self.work_api = reads.guarded(self.elector.holds_lease) if self.elector else reads
        self.seal_key: bytes | None = None  # read (or created) by `run`, before any reconcile

    # event handlers -------------------------------------------------------
    def _on_trainjob(self, event: str, obj: dict) -> None:
        self.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]), priority_of(event))

    def _on_owned(self, event: str, obj: dict) -> None:
        owner = owner_trainjob(obj)
        if not owner:
            return
        if event != LISTED and self.resumes(owner, obj):
            self.admitted_at.setdefault(owner, time.monotonic())
            self.queue.add(owner, ADMITTED_PRIORITY)
        else:
            self.queue.add(owner, priority_of(event))

    def _on_failed_create(self, event: str, obj: dict) -> None:
        """The Job controller could not create a pod of some Job: reconcile the TrainJob whose JobSet made that Job
        (the reconcile checks the Job itself before it believes the Event)."""
        if event == "DELETED":
            return
        involved = obj.get("involvedObject") or {}
        namespace = involved.get("namespace") or (obj.get("metadata") or {}).get("namespace") or ""
        jobsets = self.stores[RESOURCES["JobSet"]]
        names = [name for (ns, name) in jobsets.keys() if ns == namespace]
        jobset_name = owning_jobset_name(str(involved.get("name") or ""), names)
        jobset = jobsets.get(jobset_name, namespace) if jobset_name else None
        owner = owner_trainjob(jobset) if jobset else None
        if owner:
            self.queue.add(owner, priority_of(event))

    def resumes(self, owner: Key, obj: dict) -> bool:
        """Whether `obj` is a Volcano PodGroup just admitted while its TrainJob's JobSet waits suspended for it (the
        tenant plugin's `awaiting_admission`): the reconcile it brings resumes the JobSet."""
        if obj.get("kind") != "PodGroup" or obj.get("apiVersion") != K.VOLCANO_API_VERSION or not gang_admitted(obj):
            return False
        jobset = self.stores[RESOURCES["JobSet"]].get(owner[1], owner[0])
        trainjob = self.stores[RESOURCES["TrainJob"]].get(owner[1], owner[0])
        return bool(jobset and trainjob and K.mapping(jobset.get("spec")).get("suspend")
                    and not K.mapping(trainjob.get("spec")).get("suspend"))

    # workers --------------------------------------------------------------
    def process_one(self, key: Key) -> None:
        namespace, name = key
        if self.elector and not self.elector.holds_lease():
            # Paused past the renew deadline (GC, SIGSTOP, partition): another replica may lead by now.
            # Reconcile nothing; the elector notices the loss and ends the process.
            self.queue.add_after(key, self.elector.retry_seconds)
            return
        started = time.monotonic()
        try:
            outcome = reconcile(self.work_api, namespace, name, self.settings.status_server, seal_key=self.seal_key,
                                gang_start_timeout=self.settings.gang_start_timeout)
        except NotLeader as exc:
            log.warning(json.dumps({"msg": "reconcile abandoned", "trainjob": f"{namespace}/{name}", "error": str(exc)}))
            self.queue.add_after(key, self.elector.retry_seconds if self.elector else 1.0)
        except ControllerError as exc:
            self.metrics.reconciles.labels("error").inc()
            log.warning(json.dumps({"msg": "reconcile failed", "trainjob": f"{namespace}/{name}", "error": str(exc)}))
            if not self.queue.retry(key):
                log.error(json.dumps({"msg": "giving up until the next change", "trainjob": f"{namespace}/{name}"}))
        except Exception as exc:  # API errors, conflicts: retry with backoff
            self.metrics.reconciles.labels("error").inc()
            detail = getattr(exc, "body", None) or str(exc)
            log.warning(json.dumps({"msg": "reconcile error", "trainjob": f"{namespace}/{name}",
                                    "error": f"{type(exc).__name__}: {detail}"[:800]}))
            if not self.queue.retry(key):
                log.error(json.dumps({"msg": "giving up until the next change", "trainjob": f"{namespace}/{name}"}))
        else:
            self.queue.forget(key)
            self.metrics.reconciles.labels("success").inc()
            admitted = self.admitted_at.pop(key, None)
            if admitted is not None:
                self.metrics.resumes.observe(time.monotonic() - admitted)
            if outcome and outcome.requeue_after is not None:
                self.queue.add_after(key, outcome.requeue_after + 0.5)
            if outcome and (outcome.applied or outcome.status_changed):
                log.info(json.dumps({"msg": "reconciled", "trainjob": f"{namespace}/{name}",
                                     "applied": outcome.applied, "statusChanged": outcome.status_changed}))
        finally:
            self.metrics.duration.observe(time.monotonic() - started)

    def _worker(self) -> None:
        while not self.stop.is_set():
            key = self.queue.get(timeout=0.5)
            if key is None:
                continue
            try:
                self.process_one(key)
            finally:
                self.queue.done(key)
                self.metrics.depth.set(len(self.queue))

    # lifecycle ------------------------------------------------------------
    def ready(self) -> bool:
        """/readyz. A standby replica, waiting for the lease, is ready: it serves admission (the webhook Service
        sends to every replica; its lookups go to the API server until informers sync, see CachedReads), and a
        Deployment whose standby never turned ready would never be Available. The leader is ready once its
        informers have synced."""
        if self.elector is not None and not self.elector.is_leader.is_set():
            return True
        return all(i.synced.is_set() or i.forbidden for i in self.informers)

    def run(self) -> None:
        """Block until stopped (or the lease is lost, which ends the process like upstream)."""
        self._start_servers()
        if self.elector:
            threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True, name="leader").start()
            while not self.elector.is_leader.wait(0.5):
                if self.stop.is_set():
                    return
            self.metrics.leader.set(1)
        self.seal_key = snapshot_seal_key(self.api, self.settings.lease_namespace)
        for informer in self.informers:
            threading.Thread(target=informer.run, args=(self.stop,), daemon=True,
                             name=f"informer-{informer.resource.plural}").start()
        for index in range(self.settings.workers):
            threading.Thread(target=self._worker, daemon=True, name=f"worker-{index}").start()
        log.info(json.dumps({"msg": "controller started", "workers": self.settings.workers}))
        while not self.stop.is_set():
            if self.elector and self.elector.lost.is_set():
                self.metrics.leader.set(0)
                raise SystemExit("lost leader election")
            self.stop.wait(0.5)
        if self.elector:  # a clean stop (SIGTERM: a rollout, a drain, a deleted pod) hands over at once
            self.metrics.leader.set(0)
            self.elector.release()

    def shutdown(self) -> None:
        self.stop.set()
        self.queue.shutdown()

    def _start_servers(self) -> None:
        api = self.api
        serve_metrics(self.metrics.registry, self.settings.metrics_address, self.settings.metrics_cert_dir,
                      api.token_review if self.settings.metrics_auth else None,
                      (lambda user: api.may_get_path(user, METRICS_PATH)) if self.settings.metrics_auth else None)
        manager = self

        class Health(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server API)
                ok = self.path == "/healthz" or (self.path == "/readyz" and manager.ready())
                self.send_response(200 if ok else 503)
                self.end_headers()
                self.wfile.write(b"ok" if ok else b"not ready")

            def log_message(self, *args):  # keep probes out of the logs
                pass

        host, port = self.settings.health_address.rsplit(":", 1)
        server = ThreadingHTTPServer((host, int(port)), Health)
        threading.Thread(target=server.serve_forever, daemon=True, name="health").start()
