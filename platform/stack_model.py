"""The platform stack configuration as typed, frozen data: the one model of `stacks/Pulumi.<env>.yaml`.

Each field is a stack key (camelCase of its name, see `stack_fields`) and carries its only default; the
parser (`stack_config`), the catalog CLI (`platform/catalog_tenants.py`), the smoke suite and Pulumi.yaml's `config:`
(a unit test compares them) follow it. Kept apart from the parser so components import plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Union

from trainyard.queues.hypernodes import TopologySpec
from trainyard.tenant_policy import DEFAULT_GANG_START_TIMEOUT_SECONDS, DEFAULT_MAX_GRACE_SECONDS
from trainyard.queues.priority_classes import PriorityClassSpec
from trainyard.queues.resources import GPU, quantity
from trainyard.queues.scheduler_config import SchedulerSettings
from trainyard.queues.volcano_queues import QueueSpec
from trainyard.field_markers import DERIVED, stack_key
from trainyard.runtimes.model import CatalogTenant

NAMESPACE = "trainyard"
"""Pulumi's namespace of every key: `trainyard:tenants` in a stack file, `tenants` in Pulumi.yaml."""
Quantity = Union[int, str]
"""A Kubernetes quantity as YAML gives it: 96, '500m', '1024Gi'."""
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")


@dataclass(frozen=True)
class ClusterCapacity:
    """What the cluster declares it has; queue capabilities may not promise more."""

    nodes: int
    gpus_per_node: int
    cpu_per_node: Quantity
    memory_per_node: Quantity
    gpu_product: str | None = None

    def totals(self) -> dict[str, Fraction]:
        per_node = {"cpu": quantity(self.cpu_per_node), "memory": quantity(self.memory_per_node),
                    GPU: Fraction(self.gpus_per_node)}
        return {name: amount * self.nodes for name, amount in per_node.items() if amount is not None}


@dataclass(frozen=True)
class TenantQuota:
    """Namespace ResourceQuota hard limits; the queue capability defaults to these."""

    cpu: Quantity
    memory: Quantity
    gpu: int
    train_jobs: int = 100

    def as_resources(self) -> dict[str, object]:
        return {"cpu": self.cpu, "memory": self.memory, GPU: self.gpu}


@dataclass(frozen=True)
class TenantLimits:
    """LimitRange default requests so pods without requests still count sensibly against the quota; default limits
    so a pod without them cannot take a node's memory or disk."""

    default_cpu: str = "1"
    default_memory: str = "4Gi"
    default_ephemeral_storage: str = "1Gi"
    """The ephemeral-storage request of a container that states none (else the API server would take its limit)."""
    default_memory_limit: str = "64Gi"
    """The memory limit of a container that states none (or its request, when larger): `platform.pod_defaults`."""
    default_ephemeral_storage_limit: str = "50Gi"
    default_empty_dir_size_limit: str = "16Gi"
    """The sizeLimit of an emptyDir that states none (memory-backed ones too: tmpfs sized by it)."""
    max_termination_grace_period_seconds: int = DEFAULT_MAX_GRACE_SECONDS
    """The longest terminationGracePeriodSeconds a TrainJob's pods may ask: a suspended (stalled, reclaimed, over
    budget) job whose trainer ignores SIGTERM keeps its GPUs that long."""


@dataclass(frozen=True)
class TenantGroups:
    """Groups bound to the tenant's admin and user roles; unset, `<tenant>-admins` and `<tenant>-users`."""

    admins: tuple[str, ...]
    users: tuple[str, ...]

    @classmethod
    def defaults_for(cls, tenant: str) -> "TenantGroups":
        return cls((f"{tenant}-admins",), (f"{tenant}-users",))


@dataclass(frozen=True)
class TenantBudget:
    """GPU-hours a tenant may use per period (weeks from Monday, months from the 1st, UTC). At 80 % its TrainJobs
    get a Warning event; at 100 % the controller closes its queue (running gangs go on, no new one is admitted)
    or gives its new TrainJobs the class `demote_to`, until the next period begins."""

    gpu_hours: float
    action: str
    period: str = "monthly"
    demote_to: str | None = None

    def as_annotation(self) -> dict:
        return {"gpuHours": self.gpu_hours, "period": self.period, "action": self.action,
                **({"demoteTo": self.demote_to} if self.demote_to else {})}


@dataclass(frozen=True)
class TenantNetworkPolicy:
    default_deny: bool | None = None
    """None: follow policies.defaultDenyNetwork."""


@dataclass(frozen=True)
class TenantSpec:
    name: str
    namespace: str
    """Unset, the tenant's name."""
    catalog_version: str
    queue: QueueSpec
    quota: TenantQuota
    default_priority_class: str | None = None
    priority_classes: tuple[str, ...] = ()
    limits: TenantLimits = TenantLimits()
    groups: TenantGroups = TenantGroups((), ())
    pod_security: str | None = None
    network_policy: TenantNetworkPolicy = TenantNetworkPolicy()
    budget: TenantBudget | None = None
    service_accounts: tuple[str, ...] = ()
    """ServiceAccounts of the namespace (besides `default`) a TrainJob's pods may run as: a TrainJob names one
    through its runtime, runtimePatches or podTemplateOverrides, and admission refuses any other, so a tenant
    cannot borrow an identity the platform made for something else (a CI system's)."""

    @property
    def default_deny_network(self) -> bool | None:
        return self.network_policy.default_deny

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
    client_ca_file: str | None = None
    """Service mode: PEM CA that signed the client certificate the cluster's API server presents to admission
    webhooks (its AdmissionConfiguration `kubeConfigFile`): the webhook then answers the API server alone. Unset,
    it answers any client that reaches its Service (and says whether a runtime of a name exists anywhere)."""


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
    # Where the Kubeflow SDK looks for `kubeflow-trainer-public` (its KUBEFLOW_SYSTEM_NAMESPACE default).
    sdk_namespace: str = "kubeflow-system"
    # `trainyard controller run --feature-gates`, e.g. "TrainJobStatus=true" (upstream's alpha status server).
    feature_gates: str = ""
    prometheus_url: str = ""
    """The platform's Prometheus (`trainyard controller run --prometheus`), which the budget loop reads tenants'
    GPU-hours from; tenant budgets need it (the local stack's controller is given the local cluster's)."""
    stalled_after_minutes: int = 30
    """A TrainJob holding GPUs with no trainerStatus progress this long is flagged stalled (0: no watch)."""
    stalled_log_after_minutes: int = 0
    """Without trainerStatus: minutes with no new log line of its first pod (0: logs are not judged)."""
    stalled_action: str = "none"
    """What a stall does beyond a Warning Event: `none` or `suspend` (gives its GPUs back)."""
    reclaim: str = "none"
    """Gang-aware reclaim by the controller (`trainyard.capacity.reclaimer`): `none`, or the rule by which a gang
    of a queue below its share gets whole TrainJobs of queues above theirs suspended (`deserved`, `final-share`,
    `fair-sharing`: docs/tests.md "Toward 95 %"). Elastic queues lend, reclaim takes back: it needs
    `scheduler.queuePlugin: capacity`."""
    reclaim_holds: bool = True
    """The nodes an eviction frees are tainted for its gang until it runs, so no other job lands there meanwhile."""
    gang_start_timeout_seconds: int = DEFAULT_GANG_START_TIMEOUT_SECONDS
    """An admitted gang whose pods the API server keeps refusing for a reason that may pass (a full quota) is
    released after this long: its PodGroup deleted, its JobSet suspended until the queue admits it again (0: never).
    Refusals that cannot pass (Pod Security, LimitRange, an unknown ServiceAccount) fail the TrainJob at once."""
    webhook: WebhookSpec = WebhookSpec()
    metrics_port: int = field(default=8080, metadata=DERIVED)
    webhook_port: int = field(default=9443, metadata=DERIVED)
    status_port: int = field(default=10443, metadata=DERIVED)

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
    refuse_quota_oversubscription: bool = False
    """Tenant quotas summing above the declared cluster are a warning by default (quota is a ceiling, not a
    reservation); true makes them an error."""


@dataclass(frozen=True, kw_only=True)
class StackConfig:
    """Every `trainyard:` key of a stack file (Pulumi.yaml's `config:` declares the same keys), in that order."""

    file: str = field(metadata=DERIVED)
    kubeconfig: str | None = None
    kube_context: str | None = None
    controllers_run_locally: bool = False
    adopt_existing_objects: bool = False
    cluster: ClusterCapacity
    topology: TopologySpec = TopologySpec()
    scheduler: SchedulerSettings = SchedulerSettings()
    priority_classes: tuple[PriorityClassSpec, ...] = ()
    parent_queues: tuple[QueueSpec, ...] = field(default=(), metadata=stack_key("queues"))
    """Parent queues for hierarchical tenants (capacity plugin only)."""
    controller: ControllerSpec = ControllerSpec()
    upstream: UpstreamSpec = UpstreamSpec()
    policies: PolicySpec = PolicySpec()
    tenants: tuple[TenantSpec, ...] = ()
