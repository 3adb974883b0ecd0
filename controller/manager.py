"""The controller process: informers feed a work queue, workers reconcile, one leader at a time.

Pieces: list+watch loops per watched kind (TrainJobs, and JobSets/PodGroups/ConfigMaps/Secrets
mapped to their owning TrainJob), a deduplicating rate-limited queue, N worker threads,
Lease-based leader election, Prometheus metrics and /healthz, /readyz.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .apiserver import COSCHEDULING_PODGROUP, RESOURCES, ApiServer, NotLeader, Resource
from .cache import CachedReads, Store, object_key
from .errors import ControllerError
from .leader import LeaderElector
from .plugins.trainjobstatus import StatusServerConfig
from .reconciler import owner_trainjob, reconcile
from .workqueue import LOW_PRIORITY, NORMAL_PRIORITY, WorkQueue

log = logging.getLogger("trainyard.controller")


# The event a (re)list reports for an object nothing says has changed: on the first list, everything; on a
# relist, what kept its resourceVersion. Handlers queue these at LOW_PRIORITY, as controller-runtime does.
LISTED = "LISTED"


def list_events(before: dict | None, items: list[dict]) -> list[tuple[str, dict]]:
    """What a list means to the handlers, given the store before it (None: the first list).

    Like client-go's reflector replacing its store: a relist after a watch gap reports objects created
    meanwhile as ADDED, changed ones as MODIFIED, vanished ones as DELETED; the rest (and everything on the
    first list) as LISTED, so keys nobody changed do not crowd out fresh work."""
    if before is None:
        return [(LISTED, item) for item in items]
    events, seen = [], set()
    for item in items:
        key = object_key(item)
        seen.add(key)
        previous = before.get(key)
        if previous is None:
            events.append(("ADDED", item))
        elif _version(previous) == _version(item):
            events.append((LISTED, item))
        else:
            events.append(("MODIFIED", item))
    events += [("DELETED", obj) for key, obj in before.items() if key not in seen]
    return events


def _version(obj: dict) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


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
        self.relists = Counter("trainyard_informer_relists_total", "Full relists of a watched kind after the first, "
                               "by cause (expired: 410 Gone; resync: the periodic resync)", ["resource", "cause"],
                               registry=self.registry)


class Informer:
    """List, then watch from the last seen resourceVersion, calling `on_event(type, obj)` (client-go's reflector).

    A watch that ends or drops is resumed from the last version (bookmarks included), so an API-server
    restart costs one watch request, not a relist. Only a watch ERROR (410 Gone: that version was
    compacted away, nothing after it can be replayed) or the periodic resync relists; a relist reports
    every object as ADDED, so nothing changed during the gap is lost.
    """

    def __init__(self, api: ApiServer, resource: Resource, on_event: Callable[[str, dict], None],
                 resync_seconds: int, on_relist: Callable[[str, str], None] = lambda resource, cause: None,
                 clock: Callable[[], float] = time.monotonic, store: Store | None = None):
        self.api, self.resource, self.on_event = api, resource, on_event
        self.resync_seconds = resync_seconds
        self.on_relist = on_relist
        self.clock = clock
        self.store = store if store is not None else Store(resource)
        self.synced = self.store.synced
        self.forbidden = False

    def _typed(self, obj: dict) -> dict:
        obj.setdefault("kind", self.resource.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        return obj

    def _emit(self, event_type: str, obj: dict) -> None:
        """Store first, then notify: a reconcile the event triggers reads at least this version."""
        if event_type == "DELETED":
            self.store.remove(obj)
        else:
            self.store.put(obj)
        self.on_event(event_type, obj)

    def _list(self) -> str | None:
        listing = self.api.list(self.resource)
        items = [self._typed(item) for item in listing.get("items", [])]
        before = self.store.snapshot() if self.store.synced.is_set() else None
        self.store.replace(items)
        for event_type, obj in list_events(before, items):
            self.on_event(event_type, obj)
        return listing["metadata"].get("resourceVersion")

    def _watch(self, version: str | None, stop: threading.Event) -> tuple[str | None, bool]:
        """Follow the watch; returns (last version seen, whether the version expired)."""
        for event_type, obj in self.api.watch(self.resource, version, self.resync_seconds):
            if stop.is_set():
                break
            if event_type == "ERROR":
                log.info("watch %s expired (%s %s): relisting", self.resource.plural, obj.get("code"),
                         obj.get("reason"))
                return version, True
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            if event_type != "BOOKMARK":
                self._emit(event_type, self._typed(obj))
        return version, False

    def run(self, stop: threading.Event) -> None:
        version, listed_at, cause = None, 0.0, "initial"
        while not stop.is_set():
            try:
                if cause:
                    if cause != "initial":
                        self.on_relist(self.resource.plural, cause)
                    version, listed_at, cause = self._list(), self.clock(), None
                version, expired = self._watch(version, stop)
                if expired:
                    cause = "expired"
                elif self.clock() - listed_at >= self.resync_seconds:
                    cause = "resync"
            except ApiException as exc:
                if exc.status == 404:  # CRD not installed (e.g. no coscheduling): none exist; check again later
                    self.store.replace([])
                    cause = cause or "initial"
                    stop.wait(30)
                elif exc.status == 410:
                    cause = "expired"
                elif exc.status == 403:  # not granted list/watch: reads of this kind go to the API server
                    if not self.forbidden:
                        log.warning("cannot watch %s (forbidden): reading them with GETs", self.resource.plural)
                    self.forbidden = True
                    stop.wait(60)
                else:
                    log.warning("watch %s: %s", self.resource.plural, exc.reason)
                    stop.wait(1)
            except Exception as exc:  # connection reset, API server restart: resume from `version`
                log.warning("watch %s: %s", self.resource.plural, exc)
                stop.wait(1)


class Manager:
    def __init__(self, api: ApiServer, settings: Settings, metrics: Metrics | None = None):
        self.api, self.settings = api, settings
        self.metrics = metrics or Metrics()
        self.queue = WorkQueue()
        api.observe = lambda method, resource: self.metrics.requests.labels(method, resource).inc()
        self.stop = threading.Event()
        self.elector = LeaderElector(api, settings.lease_namespace) if settings.leader_elect else None
        relisted = lambda resource, cause: self.metrics.relists.labels(resource, cause).inc()  # noqa: E731
        watched = [(RESOURCES["TrainJob"], self._on_trainjob, Store(RESOURCES["TrainJob"]))]
        watched += [(resource, self._on_owned, Store(resource)) for resource in
                    (RESOURCES["JobSet"], RESOURCES["PodGroup"], COSCHEDULING_PODGROUP)]
        watched += [(resource, self._on_owned, Store(resource, keep=is_controlled_by_a_trainjob)) for resource in
                    (RESOURCES["ConfigMap"], RESOURCES["Secret"])]
        watched += [(RESOURCES[kind], _ignore, Store(RESOURCES[kind]))
                    for kind in ("TrainingRuntime", "ClusterTrainingRuntime", "Queue", "Namespace", "ResourceQuota")]
        self.informers = [Informer(api, resource, handler, settings.resync_seconds, relisted, store=store)
                          for resource, handler, store in watched]
        reads = CachedReads(api, {informer.resource: informer.store for informer in self.informers})
        self.admission_reads = reads.for_admission()  # the webhook's lookups: stores first, like upstream's cache
        # Reconciles read from the informers' stores and write through a fenced view: one paused
        # mid-reconcile past the lease writes nothing.
        self.work_api = reads.guarded(self.elector.holds_lease) if self.elector else reads

    # event handlers -------------------------------------------------------
    def _on_trainjob(self, event: str, obj: dict) -> None:
        self.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]), priority_of(event))

    def _on_owned(self, event: str, obj: dict) -> None:
        owner = owner_trainjob(obj)
        if owner:
            self.queue.add(owner, priority_of(event))

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
            outcome = reconcile(self.work_api, namespace, name, self.settings.status_server)
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

    def shutdown(self) -> None:
        self.stop.set()
        self.queue.shutdown()

    def _start_servers(self) -> None:
        host, port = self.settings.metrics_address.rsplit(":", 1)
        start_http_server(int(port), addr=host, registry=self.metrics.registry)
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
