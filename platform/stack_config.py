"""The platform stack configuration (`config:` of stacks/Pulumi.<env>.yaml) as typed, frozen data.

`parse_stack_config` only checks shapes and types (Pulumi validates nested config shallowly);
cross-field rules live in `stack_validation`. Both collect every problem instead of stopping
at the first, so one `pulumi up` tells the operator everything to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Mapping

from trainyard.platform.problems import ConfigProblem, StackConfigError
from trainyard.queues.hypernodes import RackSpec, TopologySpec
from trainyard.queues.priority_classes import PriorityClassSpec
from trainyard.queues.resources import GPU, quantity
from trainyard.queues.scheduler_config import SchedulerSettings
from trainyard.queues.volcano_queues import QueueSpec
from trainyard.runtimes.model import Tenant as CatalogTenant

NAMESPACE = "trainyard"
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")


@dataclass(frozen=True)
class ClusterCapacity:
    """What the cluster declares it has; queue capabilities may not promise more."""

    nodes: int
    gpus_per_node: int
    cpu_per_node: object
    memory_per_node: object
    gpu_product: str | None = None

    def totals(self) -> dict[str, Fraction]:
        per_node = {"cpu": quantity(self.cpu_per_node), "memory": quantity(self.memory_per_node),
                    GPU: Fraction(self.gpus_per_node)}
        return {name: amount * self.nodes for name, amount in per_node.items() if amount is not None}


@dataclass(frozen=True)
class TenantQuota:
    """Namespace ResourceQuota hard limits; the queue capability defaults to these."""

    cpu: object
    memory: object
    gpu: int
    train_jobs: int = 100

    def as_resources(self) -> dict[str, object]:
        return {"cpu": self.cpu, "memory": self.memory, GPU: self.gpu}


@dataclass(frozen=True)
class TenantLimits:
    """LimitRange defaults so pods without requests still count sensibly against the quota."""

    default_cpu: str = "1"
    default_memory: str = "4Gi"


@dataclass(frozen=True)
class TenantGroups:
    admins: tuple[str, ...]
    users: tuple[str, ...]


@dataclass(frozen=True)
class TenantSpec:
    name: str
    namespace: str
    catalog_version: str
    queue: QueueSpec
    quota: TenantQuota
    default_priority_class: str | None = None
    priority_classes: tuple[str, ...] = ()
    limits: TenantLimits = TenantLimits()
    groups: TenantGroups = TenantGroups((), ())
    pod_security: str | None = None
    default_deny_network: bool | None = None

    @property
    def allowed_priority_classes(self) -> tuple[str, ...]:
        """The explicit list plus the default class (a tenant may always use its own default)."""
        extra = (self.default_priority_class,) if self.default_priority_class else ()
        return tuple(dict.fromkeys(self.priority_classes + extra))

    def as_catalog_tenant(self) -> CatalogTenant:
        """The view `trainyard.runtimes` renders TrainingRuntimes for."""
        return CatalogTenant(name=self.name, namespace=self.namespace, catalog_version=self.catalog_version,
                             queue=self.queue.name, priority_class=self.default_priority_class)


@dataclass(frozen=True)
class WebhookSpec:
    """URL mode points the API server at a local process (the local stack); service mode at the Deployment."""

    url: str | None = None
    ca_bundle_file: str | None = None
    """PEM CA that signed the webhook's serving cert (URL mode; the local cluster writes one)."""
    failure_policy: str = "Fail"
    certificate: str | None = None
    """Service mode only: where the serving certificate (Secret trainyard-webhook-cert) comes from, one of
    WEBHOOK_CERTIFICATE_SOURCES. No default: a wrong guess refuses every TrainJob (failurePolicy Fail)."""


WEBHOOK_CERTIFICATE_SOURCES = {
    "cert-manager": "cert-manager (a prerequisite, already running in the cluster) issues it from a self-signed "
                    "Issuer and injects the CA bundle",
    "provided": "the operator creates Secret trainyard-webhook-cert (tls.crt, tls.key) in the controller namespace "
                "and sets webhook.caBundleFile to the CA that signed it",
}


@dataclass(frozen=True)
class ControllerSpec:
    namespace: str = "trainyard-system"
    image: str = "ghcr.io/trainyard/controller:0.1.0"
    replicas: int = 2
    metrics_port: int = 8080
    webhook_port: int = 9443
    webhook: WebhookSpec = WebhookSpec()
    # Where the Kubeflow SDK looks for `kubeflow-trainer-public` (its KUBEFLOW_SYSTEM_NAMESPACE default).
    sdk_namespace: str = "kubeflow-system"
    # `trainyard controller run --feature-gates`, e.g. "TrainJobStatus=true" (upstream's alpha status server).
    feature_gates: str = ""
    status_port: int = 10443

    @property
    def trainjob_status(self) -> bool:
        from trainyard.controller.feature_gates import TRAINJOB_STATUS, parse_feature_gates

        try:
            return parse_feature_gates(self.feature_gates)[TRAINJOB_STATUS]
        except ValueError:
            return False  # stack validation reports the bad value


@dataclass(frozen=True)
class UpstreamSpec:
    """Images of the pinned upstream controllers (ignored when controllers run locally)."""

    jobset_image: str = "registry.k8s.io/jobset/jobset:v0.12.0"
    volcano_registry: str = "docker.io"
    volcano_tag: str = "v1.14.1"


@dataclass(frozen=True)
class PolicySpec:
    pod_security: str = "baseline"
    default_deny_network: bool = False
    protect_crds: bool = True
    retain_crds: bool = True  # `pulumi destroy` leaves CRDs (and so users' TrainJobs); false to delete them
    require_image_digest: bool = False


@dataclass(frozen=True)
class StackConfig:
    file: str
    kubeconfig: str | None
    kube_context: str | None
    cluster: ClusterCapacity
    tenants: tuple[TenantSpec, ...]
    controllers_run_locally: bool = False
    adopt_existing_objects: bool = False
    topology: TopologySpec = TopologySpec()
    scheduler: SchedulerSettings = SchedulerSettings()
    priority_classes: tuple[PriorityClassSpec, ...] = ()
    parent_queues: tuple[QueueSpec, ...] = ()
    controller: ControllerSpec = ControllerSpec()
    upstream: UpstreamSpec = UpstreamSpec()
    policies: PolicySpec = PolicySpec()


def stack_values(document: Any) -> dict[str, Any]:
    """A parsed stack file -> its `trainyard:` config keys without the namespace prefix."""
    config = (document or {}).get("config") or {} if isinstance(document, dict) else {}
    prefix = f"{NAMESPACE}:"
    return {key[len(prefix):]: value for key, value in config.items() if key.startswith(prefix)}


class _Reader:
    """Typed access to nested config that records a problem (file + path + fix) instead of raising."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[ConfigProblem] = []

    def problem(self, path: str, message: str, fix: str) -> None:
        self.problems.append(ConfigProblem(self.file, path, message, fix))

    def mapping(self, value: Any, path: str, required: bool = False) -> dict:
        if value is None:
            if required:
                self.problem(path, "is missing", f"add {path.rsplit('.', 1)[-1]}: {{...}}")
            return {}
        if not isinstance(value, dict):
            self.problem(path, f"must be a mapping, got {type(value).__name__}", "write key: value pairs")
            return {}
        return value

    def listing(self, value: Any, path: str) -> list:
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(path, f"must be a list, got {type(value).__name__}", "write a YAML list")
            return []
        return value

    def scalar(self, data: dict, key: str, path: str, kind: type | tuple, default: Any = None,
               required: bool = False) -> Any:
        value = data.get(key)
        if value is None:
            if required:
                self.problem(f"{path}.{key}", "is missing", f"set {key}")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            self.problem(f"{path}.{key}", f"must be {kinds[0].__name__}, got {value!r}", f"write a {kinds[0].__name__}")
            return default
        if not isinstance(value, kinds):
            self.problem(f"{path}.{key}", f"must be {kinds[0].__name__}, got {value!r}", f"write a {kinds[0].__name__}")
            return default
        return value

    def resources(self, data: dict, key: str, path: str) -> dict[str, object]:
        raw = self.mapping(data.get(key), f"{path}.{key}")
        good = {}
        for name, value in raw.items():
            if quantity(value) is None or isinstance(value, bool):
                self.problem(f"{path}.{key}[{name}]", f"{value!r} is not a Kubernetes quantity",
                             "write e.g. 16, '500m' or '512Gi'")
            else:
                good[str(name)] = value
        return good

    def names(self, data: dict, key: str, path: str) -> tuple[str, ...]:
        items = self.listing(data.get(key), f"{path}.{key}")
        if not all(isinstance(item, str) for item in items):
            self.problem(f"{path}.{key}", "must be a list of names", "write names as strings")
            return ()
        return tuple(items)


def _queue(r: _Reader, data: dict, path: str, default_capability: Mapping[str, object] | None) -> QueueSpec:
    capability = r.resources(data, "capability", path) or dict(default_capability or {})
    return QueueSpec(
        name=str(r.scalar(data, "name", path, str, required=True, default="")),
        weight=r.scalar(data, "weight", path, int, default=1),
        capability=capability,
        deserved=r.resources(data, "deserved", path),
        guarantee=r.resources(data, "guarantee", path),
        reclaimable=r.scalar(data, "reclaimable", path, bool, default=True),
        parent=r.scalar(data, "parent", path, str),
        priority=r.scalar(data, "priority", path, int),
    )


def _tenant(r: _Reader, data: dict, path: str) -> TenantSpec:
    name = str(r.scalar(data, "name", path, str, required=True, default=""))
    quota_data = r.mapping(data.get("quota"), f"{path}.quota", required=True)
    quota = TenantQuota(
        cpu=r.scalar(quota_data, "cpu", f"{path}.quota", (int, float, str), required=bool(quota_data), default="0"),
        memory=r.scalar(quota_data, "memory", f"{path}.quota", (int, str), required=bool(quota_data), default="0"),
        gpu=r.scalar(quota_data, "gpu", f"{path}.quota", int, required=bool(quota_data), default=0),
        train_jobs=r.scalar(quota_data, "trainJobs", f"{path}.quota", int, default=100),
    )
    for key in ("cpu", "memory"):
        if quota_data.get(key) is not None and quantity(quota_data[key]) is None:
            r.problem(f"{path}.quota.{key}", f"{quota_data[key]!r} is not a Kubernetes quantity", "write e.g. 96 or '512Gi'")
    limits_data = r.mapping(data.get("limits"), f"{path}.limits")
    groups_data = r.mapping(data.get("groups"), f"{path}.groups")
    network = r.mapping(data.get("networkPolicy"), f"{path}.networkPolicy")
    return TenantSpec(
        name=name,
        namespace=str(r.scalar(data, "namespace", path, str, default=name)),
        catalog_version=str(r.scalar(data, "catalogVersion", path, (str, int, float), required=True, default="")),
        queue=_queue(r, r.mapping(data.get("queue"), f"{path}.queue", required=True), f"{path}.queue",
                     quota.as_resources() if quota_data else None),
        quota=quota,
        default_priority_class=r.scalar(data, "defaultPriorityClass", path, str),
        priority_classes=r.names(data, "priorityClasses", path),
        limits=TenantLimits(
            default_cpu=str(r.scalar(limits_data, "defaultCpu", f"{path}.limits", (int, str), default="1")),
            default_memory=str(r.scalar(limits_data, "defaultMemory", f"{path}.limits", str, default="4Gi")),
        ),
        groups=TenantGroups(
            admins=r.names(groups_data, "admins", f"{path}.groups") or (f"{name}-admins",),
            users=r.names(groups_data, "users", f"{path}.groups") or (f"{name}-users",),
        ),
        pod_security=r.scalar(data, "podSecurity", path, str),
        default_deny_network=r.scalar(network, "defaultDeny", f"{path}.networkPolicy", bool),
    )


def _each(r: _Reader, values: Mapping[str, Any], key: str, build: Callable[[_Reader, dict, str], Any]) -> tuple:
    out = []
    for index, entry in enumerate(r.listing(values.get(key), f"{NAMESPACE}:{key}")):
        path = f"{NAMESPACE}:{key}[{index}]"
        if not isinstance(entry, dict):
            r.problem(path, "must be a mapping", "write the entry as key: value pairs")
            continue
        out.append(build(r, entry, path))
    return tuple(out)


def _priority_class(r: _Reader, data: dict, path: str) -> PriorityClassSpec:
    return PriorityClassSpec(
        name=str(r.scalar(data, "name", path, str, required=True, default="")),
        value=r.scalar(data, "value", path, int, required=True, default=0),
        description=r.scalar(data, "description", path, str, default=""),
        preemption_policy=r.scalar(data, "preemptionPolicy", path, str, default="PreemptLowerPriority"),
        global_default=r.scalar(data, "globalDefault", path, bool, default=False),
    )


def _rack(r: _Reader, data: dict, path: str) -> RackSpec:
    return RackSpec(name=str(r.scalar(data, "name", path, str, required=True, default="")),
                    spine=str(r.scalar(data, "spine", path, str, default="spine-0")),
                    nodes=r.names(data, "nodes", path))


def parse_stack_config(values: Mapping[str, Any], *, file: str) -> tuple[StackConfig, list[ConfigProblem]]:
    """Config values (keys without `trainyard:`) -> StackConfig plus shape problems."""
    r = _Reader(file)
    ns = NAMESPACE
    cluster_data = r.mapping(values.get("cluster"), f"{ns}:cluster", required=True)
    cluster = ClusterCapacity(
        nodes=r.scalar(cluster_data, "nodes", f"{ns}:cluster", int, required=bool(cluster_data), default=0),
        gpus_per_node=r.scalar(cluster_data, "gpusPerNode", f"{ns}:cluster", int, required=bool(cluster_data), default=0),
        cpu_per_node=r.scalar(cluster_data, "cpuPerNode", f"{ns}:cluster", (int, str), required=bool(cluster_data), default=0),
        memory_per_node=r.scalar(cluster_data, "memoryPerNode", f"{ns}:cluster", (int, str), required=bool(cluster_data),
                                 default=0),
        gpu_product=r.scalar(cluster_data, "gpuProduct", f"{ns}:cluster", str),
    )
    topology_data = r.mapping(values.get("topology"), f"{ns}:topology")
    topology = TopologySpec(
        rack_label=r.scalar(topology_data, "rackLabel", f"{ns}:topology", str, default="trainyard.dev/rack"),
        racks=_each(r, {"topology.racks": topology_data.get("racks")}, "topology.racks", _rack),
    )
    sched = r.mapping(values.get("scheduler"), f"{ns}:scheduler")
    scheduler = SchedulerSettings(
        profile=r.scalar(sched, "profile", f"{ns}:scheduler", str, default="gang"),
        queue_plugin=r.scalar(sched, "queuePlugin", f"{ns}:scheduler", str, default="proportion"),
        binpack_weight=r.scalar(sched, "binpackWeight", f"{ns}:scheduler", int, default=10),
        gpu_binpack_weight=r.scalar(sched, "gpuBinpackWeight", f"{ns}:scheduler", int, default=10),
        topology_weight=r.scalar(sched, "topologyWeight", f"{ns}:scheduler", int, default=10),
        overcommit_factor=float(r.scalar(sched, "overcommitFactor", f"{ns}:scheduler", (int, float), default=1.0)),
        hierarchical_queues=bool(values.get("queues")),
    )
    for problem in scheduler.problems():
        field_name, _, message = problem.partition(" ")
        r.problem(f"{ns}:{field_name}", message, "see queues/scheduler_config.py for allowed values")
    ctl = r.mapping(values.get("controller"), f"{ns}:controller")
    hook = r.mapping(ctl.get("webhook"), f"{ns}:controller.webhook")
    controller = ControllerSpec(
        namespace=r.scalar(ctl, "namespace", f"{ns}:controller", str, default=ControllerSpec.namespace),
        image=r.scalar(ctl, "image", f"{ns}:controller", str, default=ControllerSpec.image),
        replicas=r.scalar(ctl, "replicas", f"{ns}:controller", int, default=ControllerSpec.replicas),
        sdk_namespace=r.scalar(ctl, "sdkNamespace", f"{ns}:controller", str, default=ControllerSpec.sdk_namespace),
        feature_gates=r.scalar(ctl, "featureGates", f"{ns}:controller", str, default=ControllerSpec.feature_gates),
        webhook=WebhookSpec(
            url=r.scalar(hook, "url", f"{ns}:controller.webhook", str),
            ca_bundle_file=r.scalar(hook, "caBundleFile", f"{ns}:controller.webhook", str),
            failure_policy=r.scalar(hook, "failurePolicy", f"{ns}:controller.webhook", str, default="Fail"),
            certificate=r.scalar(hook, "certificate", f"{ns}:controller.webhook", str),
        ),
    )
    up = r.mapping(values.get("upstream"), f"{ns}:upstream")
    upstream = UpstreamSpec(
        jobset_image=r.scalar(up, "jobsetImage", f"{ns}:upstream", str, default=UpstreamSpec.jobset_image),
        volcano_registry=r.scalar(up, "volcanoRegistry", f"{ns}:upstream", str, default=UpstreamSpec.volcano_registry),
        volcano_tag=r.scalar(up, "volcanoTag", f"{ns}:upstream", str, default=UpstreamSpec.volcano_tag),
    )
    pol = r.mapping(values.get("policies"), f"{ns}:policies")
    policies = PolicySpec(
        pod_security=r.scalar(pol, "podSecurity", f"{ns}:policies", str, default="baseline"),
        default_deny_network=r.scalar(pol, "defaultDenyNetwork", f"{ns}:policies", bool, default=False),
        protect_crds=r.scalar(pol, "protectCrds", f"{ns}:policies", bool, default=True),
        retain_crds=r.scalar(pol, "retainCrds", f"{ns}:policies", bool, default=True),
        require_image_digest=r.scalar(pol, "requireImageDigest", f"{ns}:policies", bool, default=False),
    )
    config = StackConfig(
        file=file,
        kubeconfig=_scalar_key(r, values, "kubeconfig", str),
        kube_context=_scalar_key(r, values, "kubeContext", str),
        controllers_run_locally=bool(_scalar_key(r, values, "controllersRunLocally", bool) or False),
        adopt_existing_objects=bool(_scalar_key(r, values, "adoptExistingObjects", bool) or False),
        cluster=cluster,
        tenants=_each(r, values, "tenants", _tenant),
        topology=topology,
        scheduler=scheduler,
        priority_classes=_each(r, values, "priorityClasses", _priority_class),
        parent_queues=_each(r, values, "queues", lambda rr, d, p: _queue(rr, d, p, None)),
        controller=controller,
        upstream=upstream,
        policies=policies,
    )
    return config, r.problems


def _scalar_key(r: _Reader, values: Mapping[str, Any], key: str, kind: type) -> Any:
    value = values.get(key)
    if isinstance(value, str) and kind is bool and value in ("true", "false"):
        return value == "true"  # `pulumi config set` stores plain strings
    if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
        r.problem(f"{NAMESPACE}:{key}", f"must be {kind.__name__}, got {value!r}", f"write a {kind.__name__}")
        return None
    return value


def raise_on(problems: list[ConfigProblem]) -> None:
    if problems:
        raise StackConfigError(problems)
