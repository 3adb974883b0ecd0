"""The platform stack configuration as typed, frozen data: the one model of `stacks/Pulumi.<env>.yaml`.

Each field is a stack key (camelCase of its name, see `stack_fields`) and carries its only default; the
parser (`stack_config`), the catalog CLI (`platform/catalog_tenants.py`), the smoke suite and Pulumi.yaml's `config:`
(a unit test compares them) follow it. Kept apart from the parser so components import plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Union

from trainyard import __version__
from trainyard import k8s as K
from trainyard.queues.hypernodes import TopologySpec
from trainyard.tenant_policy import (DEFAULT_CHECKPOINT_GRACE_SECONDS, DEFAULT_GANG_START_TIMEOUT_SECONDS,
                                     DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS,
                                     DEFAULT_MAX_GRACE_SECONDS, DEFAULT_NODE_LOSS_TOLERATION_SECONDS)
from trainyard.queues.priority_classes import PriorityClassSpec
from trainyard.queues.resources import GPU, quantity
from trainyard.queues.scheduler_config import SchedulerSettings
from trainyard.queues.volcano_queues import QueueSpec
from trainyard.field_markers import DERIVED, described_default, stack_key
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
    """GPU nodes the cluster has."""
    gpus_per_node: int
    """nvidia.com/gpu capacity of each node."""
    cpu_per_node: Quantity
    """Allocatable CPU of each node."""
    memory_per_node: Quantity
    """Allocatable memory of each node."""
    gpu_product: str | None = None
    """The nodes' nvidia.com/gpu.product label (informational)."""

    def totals(self) -> dict[str, Fraction]:
        per_node = {"cpu": quantity(self.cpu_per_node), "memory": quantity(self.memory_per_node),
                    GPU: Fraction(self.gpus_per_node)}
        return {name: amount * self.nodes for name, amount in per_node.items() if amount is not None}


@dataclass(frozen=True)
class TenantQuota:
    """Namespace ResourceQuota hard limits; the queue capability defaults to these."""

    cpu: Quantity
    """ResourceQuota hard limit on the namespace's CPU requests."""
    memory: Quantity
    """ResourceQuota hard limit on the namespace's memory requests."""
    gpu: int
    """ResourceQuota hard limit on the namespace's GPU requests (0: a CPU-only tenant)."""
    train_jobs: int = 100
    """The most TrainJobs the namespace may hold (an object-count quota)."""

    def as_resources(self) -> dict[str, object]:
        return {"cpu": self.cpu, "memory": self.memory, GPU: self.gpu}


@dataclass(frozen=True)
class TenantLimits:
    """LimitRange default requests so pods without requests still count sensibly against the quota; default limits
    so a pod without them cannot take a node's memory or disk."""

    default_cpu: str = "1"
    """The CPU request of a container that states none (LimitRange)."""
    default_memory: str = "4Gi"
    """The memory request of a container that states none (LimitRange)."""
    default_ephemeral_storage: str = "1Gi"
    """The ephemeral-storage request of a container that states none (else the API server would take its limit)."""
    default_memory_limit: str = "64Gi"
    """The memory limit of a container that states none (or its request, when larger): `platform.pod_defaults`."""
    default_ephemeral_storage_limit: str = "50Gi"
    """The ephemeral-storage limit of a container that states none."""
    default_empty_dir_size_limit: str = "16Gi"
    """The sizeLimit of an emptyDir that states none (memory-backed ones too: tmpfs sized by it)."""
    max_termination_grace_period_seconds: int = DEFAULT_MAX_GRACE_SECONDS
    """The longest terminationGracePeriodSeconds a TrainJob's pods may ask: a suspended (stalled, reclaimed, over
    budget) job whose trainer ignores SIGTERM keeps its GPUs that long."""
    checkpoint_grace_seconds: int = DEFAULT_CHECKPOINT_GRACE_SECONDS
    """How long reclaim waits for a TrainJob it asked to save a checkpoint (one that reports checkpoints) before it
    suspends it anyway: the waiting gang waits that much longer at most."""
    node_loss_toleration_seconds: int = DEFAULT_NODE_LOSS_TOLERATION_SECONDS
    """How long the tenant's pods stay bound to a lost node (not ready, or unreachable) before Kubernetes evicts
    them, so that the Job fails and JobSet's failure policy restarts or fails the gang
    (`platform.node_loss_toleration`; Kubernetes' default is 300 s)."""


@dataclass(frozen=True)
class TenantGroups:
    """Groups bound to the tenant's admin and user roles; unset, `<tenant>-admins` and `<tenant>-users`."""

    admins: tuple[str, ...] = field(metadata=described_default("`<tenant>-admins`"))
    """Groups bound to the role trainyard-tenant-admin."""
    users: tuple[str, ...] = field(metadata=described_default("`<tenant>-users`"))
    """Groups bound to the role trainyard-tenant-user."""

    @classmethod
    def defaults_for(cls, tenant: str) -> "TenantGroups":
        return cls((f"{tenant}-admins",), (f"{tenant}-users",))


@dataclass(frozen=True)
class TenantBudget:
    """GPU-hours a tenant may use per period (weeks from Monday, months from the 1st, UTC). At 80 % its TrainJobs
    get a Warning event; at 100 % the controller closes its queue (running gangs go on, no new one is admitted)
    or gives its new TrainJobs the class `demote_to`, until the next period begins."""

    gpu_hours: float
    """GPU-hours the tenant may use per period."""
    action: str
    """What happens at 100 %: `closeQueue` or `demotePriority`."""
    period: str = "monthly"
    """`weekly` (from Monday) or `monthly` (from the 1st), UTC."""
    demote_to: str | None = None
    """With `demotePriority`: the declared class, below the tenant's default, new TrainJobs get."""

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
    """The tenant's name; the defaults of its namespace and groups derive from it."""
    namespace: str = field(metadata=described_default("the tenant's name"))
    """The tenant's namespace."""
    catalog_version: str
    """The runtime catalog release the namespace pins: its TrainingRuntimes are that release's."""
    queue: QueueSpec
    """The tenant's Volcano queue (its TrainJobs always land there)."""
    quota: TenantQuota
    """The namespace's ResourceQuota."""
    default_priority_class: str | None = None
    """The priority class of pods that name none."""
    priority_classes: tuple[str, ...] = ()
    """The priority classes a TrainJob of the tenant may select (label `trainyard.dev/priority-class`)."""
    limits: TenantLimits = TenantLimits()
    """The namespace's LimitRange defaults and the limits its pods must keep."""
    groups: TenantGroups = TenantGroups((), ())
    """Groups bound to the tenant's admin and user roles in its namespace."""
    pod_security: str | None = None
    """The namespace's Pod Security level; unset, policies.podSecurity."""
    network_policy: TenantNetworkPolicy = TenantNetworkPolicy()
    """The namespace's NetworkPolicy."""
    budget: TenantBudget | None = None
    """A GPU-hour budget the controller enforces; unset, none."""
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
    """URL mode: the address the API server calls the webhook at (https); unset, service mode."""
    ca_bundle_file: str | None = None
    """PEM CA that signed the webhook's serving cert (URL mode; the local cluster writes one)."""
    failure_policy: str = "Fail"
    """The webhook's failurePolicy: `Fail` refuses TrainJobs while the webhook does not answer."""
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
class MetricsSpec:
    """The in-cluster controller's /metrics, as Kubeflow Trainer v2.4 serves its own (kubeflow/trainer#3912)."""

    secure_serving: bool = True
    """HTTPS with the webhook's serving certificate (the Service `trainyard-controller-metrics`, port 8080)."""
    auth: bool = False
    """Answer only callers the API server authenticates and lets `get` the URL /metrics (bind them to the
    ClusterRole `trainyard-metrics-reader`); needs secureServing."""


@dataclass(frozen=True)
class ControllerSpec:
    namespace: str = "trainyard-system"
    """Namespace of the controller's Deployment, Service and lease."""
    image: str = f"ghcr.io/trainyard/controller:{__version__}"
    """The controller's image (in-cluster controllers only)."""
    replicas: int = 2
    """Controller replicas; one holds the lease and writes."""
    sdk_namespace: str = "kubeflow-system"
    """Where the Kubeflow SDK looks for the `kubeflow-trainer-public` ConfigMap (its KUBEFLOW_SYSTEM_NAMESPACE default)."""
    feature_gates: str = ""
    """`trainyard controller run --feature-gates`, e.g. `TrainJobStatus=true` (upstream's alpha status server)."""
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
    node_loss_release_after_seconds: int = DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS
    """An evicted TrainJob pod of a lost node, which no kubelet will confirm stopped, is deleted for good this long
    after its grace period, so JobSet can recreate its gang (-1: never; the node's return, or an operator's
    out-of-service taint, does it)."""
    webhook: WebhookSpec = WebhookSpec()
    """How the API server reaches the admission webhook."""
    metrics: MetricsSpec = MetricsSpec()
    """How /metrics is served (in-cluster controllers; the local cluster's serve plain HTTP on loopback)."""
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
    """The JobSet controller's image."""
    volcano_registry: str = "docker.io"
    """Registry of the Volcano images."""
    volcano_tag: str = "v1.14.1"
    """Tag of the Volcano images."""


@dataclass(frozen=True)
class PolicySpec:
    pod_security: str = "baseline"
    """Pod Security level of tenant namespaces (`privileged`, `baseline`, `restricted`)."""
    default_deny_network: bool = False
    """Give every tenant namespace a default-deny NetworkPolicy."""
    protect_crds: bool = True
    """Pulumi protects the CRDs: `pulumi destroy` refuses to delete them."""
    retain_crds: bool = True  # `pulumi destroy` leaves CRDs (and so users' TrainJobs); false to delete them
    """`pulumi destroy` leaves the CRDs, and so users' TrainJobs; false deletes them."""
    require_image_digest: bool = False
    """Refuse a controller image not pinned by digest (`image@sha256:...`)."""
    refuse_quota_oversubscription: bool = False
    """Tenant quotas summing above the declared cluster are a warning by default (quota is a ceiling, not a
    reservation); true makes them an error."""
    gpu_device_classes: tuple[str, ...] = K.DRA_GPU_DEVICE_CLASSES
    """DRA DeviceClasses whose devices are GPUs: each tenant's GPU quota caps the devices of each class its
    ResourceClaims request, and a TrainJob claiming GPUs of a class not listed is refused in a tenant namespace."""


@dataclass(frozen=True, kw_only=True)
class StackConfig:
    """Every `trainyard:` key of a stack file (Pulumi.yaml's `config:` declares the same keys), in that order."""

    file: str = field(metadata=DERIVED)
    kubeconfig: str | None = None
    """Path of the kubeconfig for this stack (the local stack uses `trainyard cluster kubeconfig`)."""
    kube_context: str | None = None
    """Context inside the kubeconfig; also the provider's clusterIdentifier."""
    controllers_run_locally: bool = False
    """JobSet, Volcano and trainyard controllers run as local processes (`trainyard cluster up`); no Deployments."""
    adopt_existing_objects: bool = False
    """Adopt objects that already exist (the local cluster pre-applies CRDs and webhook registrations)."""
    cluster: ClusterCapacity
    """The declared capacity."""
    topology: TopologySpec = TopologySpec()
    """The HyperNode tree (racks and spines) for network-topology-aware scheduling."""
    scheduler: SchedulerSettings = SchedulerSettings()
    priority_classes: tuple[PriorityClassSpec, ...] = ()
    """PriorityClasses the platform creates; tenants are granted some of them."""
    parent_queues: tuple[QueueSpec, ...] = field(default=(), metadata=stack_key("queues"))
    """Parent queues for hierarchical tenants (capacity plugin only)."""
    controller: ControllerSpec = ControllerSpec()
    """The TrainJob controller."""
    upstream: UpstreamSpec = UpstreamSpec()
    """Images of the upstream controllers (in-cluster controllers only)."""
    policies: PolicySpec = PolicySpec()
    """Platform-wide policies."""
    tenants: tuple[TenantSpec, ...] = ()
    """One entry per tenant: its namespace, queue, quota, catalog release, groups and limits."""
