"""The thin I/O layer: list what the pure capacity functions need from a live API server; dry-run a TrainJob.

Read-only: every write goes out with `dryRun=All`.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable, Generic, Iterable, TypeVar

from trainyard import k8s as K
from trainyard.scheduling.cluster_state import GPU, Node, lost_nodes, nodes_from, queue_uses, weight_shares
from trainyard.scheduling.reservation import waiting_gpus
from trainyard.controller import constants as C
from trainyard.controller.runtime.apiserver import ApiServer, Resource
from trainyard.controller.runtime.transport import ApiError
from trainyard.errors import TrainyardError

NODES = Resource("v1", "Node", "nodes", namespaced=False)
PODS = Resource("v1", "Pod", "pods")
EVENTS = Resource("v1", "Event", "events")
NAMESPACES = Resource("v1", "Namespace", "namespaces", namespaced=False)
QUOTAS = Resource("v1", "ResourceQuota", "resourcequotas")
QUEUES = Resource(K.VOLCANO_API_VERSION, "Queue", "queues", namespaced=False)
PODGROUPS = Resource(K.VOLCANO_API_VERSION, "PodGroup", "podgroups")
HYPERNODES = Resource(f"{K.VOLCANO_TOPOLOGY_GROUP}/v1alpha1", "HyperNode", "hypernodes", namespaced=False)
TRAINJOBS = Resource(K.TRAINER_API_VERSION, C.TRAINJOB_KIND, "trainjobs")
JOBS = Resource("batch/v1", "Job", "jobs")
JOBSETS = Resource(K.JOBSET_API_VERSION, "JobSet", K.JOBSETS)


@dataclass
class Snapshot:
    nodes: list[dict] = field(default_factory=list)
    pods: list[dict] = field(default_factory=list)
    queues: list[dict] = field(default_factory=list)
    pod_groups: list[dict] = field(default_factory=list)
    quotas: list[dict] = field(default_factory=list)
    hypernodes: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    """Events of PodGroups (Volcano's enqueue verdicts)."""
    namespaces: list[dict] = field(default_factory=list)
    """Tenant namespaces' budgets, budget status and stalled TrainJobs (their annotations)."""
    never_starting: list[dict] = field(default_factory=list)
    """TrainJobs the controller labelled as never starting (`K.NEVER_STARTS_LABEL`)."""


def list_items(api: ApiServer, resource: Resource, namespace: str | None = None, field_selector: str | None = None,
           optional: bool = False, label_selector: str | None = None) -> list[dict]:
    try:
        found = api.list(resource, namespace, label_selector=label_selector, field_selector=field_selector).get(
            "items") or []
    except ApiError as exc:
        if optional and exc.status in (403, 404):  # CRD not installed, or not allowed: the report does without
            return []
        raise
    for item in found:
        item.setdefault("apiVersion", resource.api_version)
        item.setdefault("kind", resource.kind)
    return found


ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
PODGROUP_VERDICTS = "involvedObject.kind=PodGroup,reason=Unschedulable"
"""Volcano's Events on PodGroups saying why a gang waits (`gang_pending`)."""
BOUND_PODS = f"spec.nodeName!=,{ACTIVE_PODS}"


def snapshot(api: ApiServer, namespace: str | None = None, unbound_pods: bool = False,
             podgroup_events: bool = True) -> Snapshot:
    """Everything cluster-wide (capacity is shared); quotas of `namespace` only when given. The lists go out
    together: at 1,000 nodes and 10,000 PodGroups each waits mostly on the API server. Pods: the bound ones
    (what capacity is made of), and the pending ones too only when `unbound_pods` (the loops that give a gang's
    pods a toleration): a backlog of 20,000 pending pods is a 28 MB list the report never needs. Events are read
    from etcd, never from the API server's cache (see `events_in`): without `podgroup_events` the caller reads the
    ones it needs itself. The stalled TrainJobs come with the Namespaces (the stall loop records them there)."""
    lists = {
        "nodes": (NODES, None, None, False),
        "pods": (PODS, None, ACTIVE_PODS if unbound_pods else BOUND_PODS, False),
        "queues": (QUEUES, None, None, True),
        "quotas": (QUOTAS, namespace, None, False),
        "hypernodes": (HYPERNODES, None, None, True),
        **({"events": (EVENTS, None, PODGROUP_VERDICTS, True)} if podgroup_events else {}),
        "namespaces": (NAMESPACES, None, None, True),
    }
    started = {field_name: Background(list_items, api, resource, ns, field_selector=selector, optional=optional)
               for field_name, (resource, ns, selector, optional) in lists.items()}
    started["pod_groups"] = Background(unfinished_pod_groups, api)
    return Snapshot(**{field_name: call.result() for field_name, call in started.items()})


UNFINISHED = "status.phase!=Completed"


def unfinished_pod_groups(api: ApiServer) -> list[dict]:
    """The PodGroups not Completed: a finished gang holds nothing and waits for nothing, and on a busy platform they
    are a third of the list and growing. The selector needs the phase selectable (`upstream.with_selectable_phase`,
    on every CRD trainyard installs); where Volcano was installed otherwise the API server refuses it (400), and
    the whole list is read."""
    try:
        return list_items(api, PODGROUPS, field_selector=UNFINISHED, optional=True)
    except ApiError as exc:
        if exc.status != 400:
            raise
        return list_items(api, PODGROUPS, optional=True)


class RememberedReads(ApiServer):
    """`api`'s connection, whose GETs are each sent once, and may be sent ahead of need (`prefetch`, on their own
    threads): fit's checks read the same Namespace and runtime several times (admission, runtime, build), and on a
    busy API server each round trip costs a fifth of a second. Every caller gets its own copy."""

    def __init__(self, api: ApiServer):
        super().__init__(api.transport, api.may_write, api.limiter, api.observe)
        self._gets: dict[str, Background[dict | None]] = {}  # by the object's path

    def prefetch(self, resource: Resource, name: str, namespace: str | None = None) -> None:
        if resource.path(namespace, name) not in self._gets:
            self._gets[resource.path(namespace, name)] = Background(super().get, resource, name, namespace)

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict | None:
        self.prefetch(resource, name, namespace)
        return copy.deepcopy(self._gets[resource.path(namespace, name)].result())


def fit_reads(trainjob: dict) -> list[tuple[Resource, str, str | None]]:
    """What `fit`'s admission check and runtime fetch will GET of `trainjob`: its runtime, its JobSet, and what the
    tenant admission reads (`admission_lookups`: the Namespace, the pinned runtime copy, the selected class)."""
    from trainyard.controller import dra
    from trainyard.controller.runtime.apiserver import RESOURCES
    from trainyard.controller.tenant_namespace import admission_lookups

    meta, spec = trainjob.get("metadata") or {}, trainjob.get("spec") or {}
    namespace, ref = meta.get("namespace"), spec.get("runtimeRef") or {}
    wanted = []
    kind = ref.get("kind", C.CLUSTER_TRAINING_RUNTIME_KIND)
    if kind in C.RUNTIME_KINDS and ref.get("name"):
        wanted.append((kind, ref["name"], namespace if kind == C.TRAINING_RUNTIME_KIND else None))
    if meta.get("name"):
        wanted.append(("JobSet", meta["name"], namespace))
    wanted += admission_lookups(trainjob) + dra.template_refs(trainjob)
    return [(RESOURCES[kind], name, ns) for kind, name, ns in wanted if kind in RESOURCES and isinstance(name, str)]


def events_in(api: ApiServer, namespaces: Iterable[str], field_selector: str = PODGROUP_VERDICTS) -> list[dict]:
    """The Events matching `field_selector` in each of `namespaces` (read together): a namespaced list reads only
    that namespace's Events from etcd, where a cluster-wide one reads them all."""
    started = [Background(list_items, api, EVENTS, ns, field_selector=field_selector, optional=True)
               for ns in sorted(set(namespaces))]
    return [event for call in started for event in call.result()]


T = TypeVar("T")


class Background(Generic[T]):
    """A call started now on a daemon thread, its result (or exception) taken later. Daemon: a command that returns
    early (a refused `fit`) does not wait for reads whose results it never takes, as an executor's threads would."""

    def __init__(self, fn: Callable[..., T], *args, **kwargs):
        self._outcome: tuple[bool, object] | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self._thread.start()

    def _run(self, fn, args, kwargs) -> None:
        try:
            self._outcome = (True, fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever takes the result
            self._outcome = (False, exc)

    def result(self) -> T:
        self._thread.join()
        assert self._outcome is not None
        ok, value = self._outcome
        if not ok:
            raise value  # type: ignore[misc]
        return value  # type: ignore[return-value]


CONFIGMAPS = Resource("v1", "ConfigMap", "configmaps")


def scheduler_conf(api: ApiServer) -> str:
    """vc-scheduler's configuration text (empty when it cannot be read: the estimates then assume `proportion`)."""
    from trainyard.queues.scheduler_config import CONFIGMAP_KEY, CONFIGMAP_NAME, CONFIGMAP_NAMESPACE

    try:
        found = api.get(CONFIGMAPS, CONFIGMAP_NAME, CONFIGMAP_NAMESPACE)
    except ApiError:
        return ""
    return ((found or {}).get("data") or {}).get(CONFIGMAP_KEY, "")


TRAINING_RUNTIMES = Resource(K.TRAINER_API_VERSION, C.TRAINING_RUNTIME_KIND, "trainingruntimes")
CLUSTER_TRAINING_RUNTIMES = Resource(K.TRAINER_API_VERSION, C.CLUSTER_TRAINING_RUNTIME_KIND, "clustertrainingruntimes",
                                     namespaced=False)


def runtimes_for(api: ApiServer, namespace: str) -> list[dict]:
    """The TrainingRuntimes of `namespace` and every ClusterTrainingRuntime (what a TrainJob there may name)."""
    return list_items(api, TRAINING_RUNTIMES, namespace, optional=True) + list_items(
        api, CLUSTER_TRAINING_RUNTIMES, optional=True)


def never_starting(api: ApiServer) -> list[dict]:
    """The TrainJobs the controller labelled as never starting (a label selector: served from the watch cache)."""
    return list_items(api, TRAINJOBS, optional=True, label_selector=K.NEVER_STARTS_LABEL)


def trainjobs(api: ApiServer) -> list[dict]:
    """Every TrainJob (for their trainerStatus; empty when not allowed to list them)."""
    return list_items(api, TRAINJOBS, optional=True)


def estimate_inputs(api: ApiServer, snap: Snapshot, default_run_s: float, priorities: dict[str, int] | None = None,
                    for_namespaces: Iterable[str] | None = None):
    """What the start estimates replay (`capacity.estimates.inputs`): the snapshot plus TrainJobs' trainerStatus,
    PriorityClass values (read unless given) and the scheduler's queue plugin. With `for_namespaces`, one input per
    namespace, each reading only that namespace's trainer reports (`estimates.reports_one_tenant_may_see`)."""
    import time

    from trainyard.capacity import estimates

    nodes, jobs = nodes_from(snap.nodes, snap.pods, snap.hypernodes), trainjobs(api)
    classes = priority_values(api) if priorities is None else priorities
    plugin, now_s = estimates.queue_plugin_of(scheduler_conf(api)), time.time()

    def inputs(reports: list[dict]):
        return estimates.inputs(nodes, snap.pods, snap.pod_groups, snap.queues, reports, classes, plugin, now_s,
                                default_run_s)

    if for_namespaces is None:
        return inputs(jobs)
    return {namespace: inputs(estimates.reports_one_tenant_may_see(jobs, namespace)) for namespace in for_namespaces}


def priority_values(api: ApiServer) -> dict[str, int]:
    """PriorityClass name -> value (empty when not allowed to list them)."""
    classes = list_items(api, Resource("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False),
                     optional=True)
    return {meta_name(c): int(c.get("value") or 0) for c in classes}


def meta_name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


class NoKubeconfig(TrainyardError):
    """No cluster to ask: neither --kubeconfig, $KUBECONFIG, ~/.kube/config nor a running local cluster."""


def default_kubeconfig() -> str | None:
    """$KUBECONFIG or ~/.kube/config when present (the client's own order), else the running local cluster's
    (`make up`), so the README's commands work in a fresh shell."""
    import os

    from trainyard.cluster import local
    from trainyard.cluster.spec import ClusterSpec

    if os.environ.get("KUBECONFIG") or Path("~/.kube/config").expanduser().is_file():
        return None
    if local.is_running(ClusterSpec.name):
        return str(local.ClusterPaths.for_name(ClusterSpec.name).kubeconfig)
    raise NoKubeconfig("no cluster to ask: pass --kubeconfig FILE or set KUBECONFIG, or start the local "
                       "platform with `make up`")


def connect(kubeconfig: str | None) -> ApiServer:
    return ApiServer.from_kubeconfig(kubeconfig or default_kubeconfig())


def _message(exc: ApiError) -> str:
    try:
        return (json.loads(exc.body or "{}") or {}).get("message") or f"{exc.status} {exc.reason}"
    except (TypeError, ValueError):
        return str(exc.body or f"{exc.status} {exc.reason}")


def dry_run_create(api: ApiServer, obj: dict, resource: Resource) -> str | None:
    """None when the API server (authentication, RBAC, admission webhooks and policies, quota) would accept
    creating `obj`; else its refusal. Sent with generateName so an existing object of that name does not matter."""
    body = json.loads(json.dumps(obj))
    meta = body.setdefault("metadata", {})
    meta["generateName"] = (meta.pop("name", None) or "fit") + "-"
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "ownerReferences"):
        meta.pop(key, None)
    body.pop("status", None)
    try:
        api._call("POST", resource.path(meta.get("namespace")), body=body, query={"dryRun": "All"})
    except ApiError as exc:
        return _message(exc)
    return None


def fetch_runtime(api: ApiServer, trainjob: dict) -> dict | None:
    from trainyard.controller.runtime.reconciler import fetch_runtime as controller_fetch

    return controller_fetch(api, trainjob)


def claim_templates(api: ApiServer, trainjob: dict) -> list[dict]:
    """The ResourceClaimTemplates the TrainJob's `resourceClaimsPerNode` name, those that exist."""
    from trainyard.controller import dra
    from trainyard.controller.runtime.apiserver import RESOURCES

    found = []
    for kind, name, namespace in dra.template_refs(trainjob):
        template = api.get(RESOURCES[kind], name, namespace)
        if template is not None:
            found.append({**template, "kind": kind, "apiVersion": RESOURCES[kind].api_version})
    return found


def namespace_object(api: ApiServer, namespace: str) -> list[dict]:
    try:
        found = api.get(Resource("v1", "Namespace", "namespaces", namespaced=False), namespace)
    except ApiError as exc:
        if exc.status == 403:
            return []
        raise
    if found is None:
        return []
    found.setdefault("apiVersion", "v1")
    found.setdefault("kind", "Namespace")
    return [found]


def admission(api: ApiServer, trainjob: dict, quotas: bool = True) -> tuple[list[str], list[str]]:
    """(errors, warnings) of trainyard's admission webhook for creating `trainjob`, run in process;
    `quotas=False` leaves out its ResourceQuota check (`fit` words that verdict itself)."""
    from trainyard.controller.admission import admission_review_response
    from trainyard.toolchain.flux_templates import read_flux_templates
    from trainyard.controller.runtime.webhook_server import make_lookup

    review = {"request": {"uid": "fit", "kind": {"kind": C.TRAINJOB_KIND}, "operation": "CREATE", "object": trainjob}}
    lookup = make_lookup(api)
    if not quotas:
        base = lookup
        lookup = lambda kind, name, namespace=None: None if name is None else base(kind, name, namespace)  # noqa: E731
    response = admission_review_response(review, lookup, flux_templates=read_flux_templates)["response"]
    errors = [] if response["allowed"] else [response.get("status", {}).get("message", "refused")]
    return errors, list(response.get("warnings") or [])


@dataclass(frozen=True)
class ClusterView:
    """What the gang reservation and reclaim loops plan from: one snapshot, as models."""

    snapshot: Snapshot
    nodes: list[Node]
    """With what their active pods use."""
    allocated: dict[str, Fraction]
    """Queue -> GPUs its bound, active pods hold."""
    deserved: dict[str, Fraction]
    """Queue -> its `deserved` GPUs, else its weight share of the cluster."""
    weights: dict[str, int] = field(default_factory=dict)
    waiting: dict[str, Fraction] = field(default_factory=dict)
    """Queue -> GPUs its waiting PodGroups ask for (minResources)."""

    @property
    def capacity(self) -> Fraction:
        return sum((n.allocatable.get(GPU, Fraction(0)) for n in self.nodes if n.schedulable), Fraction(0))


def cluster_view(api: ApiServer) -> ClusterView:
    snap = snapshot(api, unbound_pods=True, podgroup_events=False)
    nodes = nodes_from(snap.nodes, snap.pods, snap.hypernodes)
    uses = queue_uses(snap.queues, snap.pod_groups, snap.pods, lost=lost_nodes(snap.nodes))
    shares = weight_shares(uses, sum((n.allocatable.get(GPU, Fraction(0)) for n in nodes), Fraction(0)))
    return ClusterView(snapshot=snap, nodes=nodes,
                       allocated={name: use.allocated.get(GPU, Fraction(0)) for name, use in uses.items()},
                       deserved={name: use.deserved.get(GPU) or shares.get(name, Fraction(0)) for name, use in uses.items()},
                       weights={name: use.weight for name, use in uses.items() if name != "root"},
                       waiting=waiting_gpus(snap.pod_groups))

