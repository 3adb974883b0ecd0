"""Parse the platform stack configuration (`config:` of stacks/Pulumi.<env>.yaml) into the `stack_model`.

The one parser: the Pulumi program, `trainyard platform validate`, the catalog CLI and the smoke suite all
read stacks through `parse_stack_config`. Keys, types and defaults come from the model's fields
(`stack_fields.Section`); what is written here is only what the model cannot say (quantities, minimums,
defaults derived from other keys). It checks shapes, types, known keys at every level and quantities
(Pulumi validates nested config shallowly and ignores keys it does not know); cross-field rules live in
`stack_validation`. Both collect every problem instead of stopping at the first, so one run tells the
operator everything to fix.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from trainyard.platform.problems import StackConfigError, errors_of
from trainyard.platform.stack_fields import Section, default_of, is_scalar, stack_keys, value_types
from trainyard.platform.stack_model import (  # noqa: F401  (re-exported: components import them from here)
    NAMESPACE,
    POD_SECURITY_LEVELS,
    WEBHOOK_CERTIFICATE_SOURCES,
    ClusterCapacity,
    ControllerSpec,
    PolicySpec,
    StackConfig,
    TenantBudget,
    TenantGroups,
    TenantLimits,
    TenantNetworkPolicy,
    TenantQuota,
    TenantSpec,
    UpstreamSpec,
    WebhookSpec,
    MetricsSpec,
)
from trainyard.platform.stack_reader import Reader, entry_labels
from trainyard.queues.hypernodes import RackSpec, TopologySpec
from trainyard.queues.priority_classes import PriorityClassSpec
from trainyard.queues.scheduler_config import SchedulerSettings
from trainyard.queues.volcano_queues import QueueSpec

CATALOG_VERSION_TYPES = (str, int, float)
"""YAML reads an unquoted `1.2` as a number; the release is its text."""


def stack_values(document: Any) -> dict[str, Any]:
    """A parsed stack file -> its `trainyard:` config keys without the namespace prefix."""
    config = (document or {}).get("config") or {} if isinstance(document, dict) else {}
    if not isinstance(config, dict):
        return {}
    prefix = f"{NAMESPACE}:"
    return {str(key)[len(prefix):]: value for key, value in config.items() if str(key).startswith(prefix)}


def _queue(section: Section, default_capability: Mapping[str, object] | None) -> QueueSpec:
    """A Volcano queue; a tenant's capability defaults to its quota."""
    return QueueSpec(**section.scalars(), capability=section.resources("capability") or dict(default_capability or {}),
                     deserved=section.resources("deserved"), guarantee=section.resources("guarantee"))


def _quota(section: Section) -> TenantQuota:
    """Quota hard limits: cpu and memory above zero, GPUs whole and zero or more (a CPU-only tenant)."""
    return TenantQuota(cpu=section.amount("cpu", positive=True), memory=section.amount("memory", positive=True),
                       gpu=section.scalar("gpu", minimum=0), train_jobs=section.scalar("trainJobs", minimum=1))


def _tenant(r: Reader, data: dict, path: str) -> TenantSpec:
    tenant = Section(r, TenantSpec, data, path)
    name = str(tenant.scalar("name"))
    quota_section = tenant.child("quota", TenantQuota, required=True, empty_ok=True)
    quota = _quota(quota_section)
    limits = tenant.child("limits", TenantLimits)
    groups = tenant.child("groups", TenantGroups)
    network = tenant.child("networkPolicy", TenantNetworkPolicy)
    budget = tenant.child("budget", TenantBudget)
    queue = tenant.child("queue", QueueSpec, required=True)
    return TenantSpec(
        name=name,
        namespace=str(tenant.scalar("namespace", required=False, default=name)),
        catalog_version=str(tenant.scalar("catalogVersion", kinds=CATALOG_VERSION_TYPES)),
        queue=_queue(queue, quota.as_resources() if quota_section.data else None),
        quota=quota,
        default_priority_class=tenant.scalar("defaultPriorityClass"),
        priority_classes=tenant.names("priorityClasses"),
        limits=TenantLimits(default_cpu=str(limits.amount("defaultCpu", positive=True)),
                            default_memory=str(limits.amount("defaultMemory", positive=True)),
                            default_ephemeral_storage=str(limits.amount("defaultEphemeralStorage", positive=True)),
                            default_memory_limit=str(limits.amount("defaultMemoryLimit", positive=True)),
                            default_ephemeral_storage_limit=str(limits.amount("defaultEphemeralStorageLimit",
                                                                              positive=True)),
                            default_empty_dir_size_limit=str(limits.amount("defaultEmptyDirSizeLimit", positive=True)),
                            max_termination_grace_period_seconds=int(limits.scalar(
                                "maxTerminationGracePeriodSeconds", minimum=0)),
                            checkpoint_grace_seconds=int(limits.scalar("checkpointGraceSeconds", minimum=0)),
                            node_loss_toleration_seconds=int(limits.scalar("nodeLossTolerationSeconds", minimum=0))),
        groups=TenantGroups(admins=groups.names("admins") or TenantGroups.defaults_for(name).admins,
                            users=groups.names("users") or TenantGroups.defaults_for(name).users),
        pod_security=tenant.scalar("podSecurity"),
        network_policy=TenantNetworkPolicy(**network.scalars()),
        budget=TenantBudget(**budget.scalars()) if budget.data else None,
        service_accounts=tenant.names("serviceAccounts"),
    )


def _each(r: Reader, values: Mapping[str, Any], key: str, build: Callable[[Reader, dict, str], Any]) -> tuple:
    """Build every entry of a list; paths name entries (`tenants[team-a]`), by index when unnamed."""
    out = []
    entries = r.listing(values.get(key), f"{NAMESPACE}:{key}")
    for label, entry in zip(entry_labels(entries), entries):
        path = f"{NAMESPACE}:{key}[{label}]"
        if not isinstance(entry, dict):
            r.problem(path, "must be a mapping", "write the entry as key: value pairs")
            continue
        out.append(build(r, entry, path))
    return tuple(out)


def _plain(cls: type) -> Callable[[Reader, dict, str], Any]:
    """A builder for list entries made of scalar keys only (priority classes)."""
    return lambda r, data, path: cls(**Section(r, cls, data, path).scalars())


def _rack(r: Reader, data: dict, path: str) -> RackSpec:
    rack = Section(r, RackSpec, data, path)
    return RackSpec(**rack.scalars(), nodes=rack.names("nodes"))


def _topology(r: Reader, values: Mapping[str, Any]) -> TopologySpec:
    topology = Section(r, TopologySpec, values.get("topology"), f"{NAMESPACE}:topology")
    return TopologySpec(**topology.scalars(),
                        racks=_each(r, {"topology.racks": topology.data.get("racks")}, "topology.racks", _rack))


def _scheduler(r: Reader, values: Mapping[str, Any]) -> SchedulerSettings:
    section = Section(r, SchedulerSettings, values.get("scheduler"), f"{NAMESPACE}:scheduler")
    scheduler = SchedulerSettings(**section.scalars(), hierarchical_queues=bool(values.get("queues")))
    r.problems += scheduler.problems(r.file, section.path)
    return scheduler


def _controller(r: Reader, values: Mapping[str, Any]) -> ControllerSpec:
    controller = Section(r, ControllerSpec, values.get("controller"), f"{NAMESPACE}:controller")
    return ControllerSpec(**controller.scalars(), webhook=WebhookSpec(**controller.child("webhook", WebhookSpec).scalars()),
                          metrics=MetricsSpec(**controller.child("metrics", MetricsSpec).scalars()))


def _section(r: Reader, values: Mapping[str, Any], key: str, cls: type, required: bool = False) -> Any:
    """A top-level mapping made of scalar keys only (cluster, upstream, policies)."""
    return cls(**Section(r, cls, values.get(key), f"{NAMESPACE}:{key}", required=required, empty_ok=True).scalars())


def _policies(r: Reader, values: Mapping[str, Any]) -> PolicySpec:
    """`policies`: its scalar keys, and the list of GPU DeviceClasses (the default when the key is absent)."""
    section = Section(r, PolicySpec, values.get("policies"), f"{NAMESPACE}:policies", empty_ok=True)
    classes = section.names("gpuDeviceClasses") if "gpuDeviceClasses" in section.data else \
        PolicySpec().gpu_device_classes
    return PolicySpec(**section.scalars(), gpu_device_classes=classes)


def _top_scalar(r: Reader, values: Mapping[str, Any], key: str) -> Any:
    """A top-level scalar; booleans may be the strings `pulumi config set` stores."""
    kind, value = value_types(StackConfig, key)[0], values.get(key)
    if isinstance(value, str) and kind is bool and value in ("true", "false"):
        return value == "true"
    if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
        r.problem(f"{NAMESPACE}:{key}", f"must be {kind.__name__}, got {value!r}", f"write a {kind.__name__}")
        value = None
    return default_of(StackConfig, key) if value is None else value


def parse_stack_config(values: Mapping[str, Any], *, file: str) -> tuple[StackConfig, list]:
    """Config values (keys without `trainyard:`) -> StackConfig plus shape problems."""
    r = Reader(file)
    r.unknown_keys(values, NAMESPACE, stack_keys(StackConfig), sep=":")
    topology = _topology(r, values)
    scalars = {key: _top_scalar(r, values, key) for key in stack_keys(StackConfig) if is_scalar(StackConfig, key)}
    config = StackConfig(
        file=file,
        kubeconfig=scalars["kubeconfig"],
        kube_context=scalars["kubeContext"],
        controllers_run_locally=scalars["controllersRunLocally"],
        adopt_existing_objects=scalars["adoptExistingObjects"],
        cluster=_section(r, values, "cluster", ClusterCapacity, required=True),
        tenants=_each(r, values, "tenants", _tenant),
        topology=topology,
        scheduler=_scheduler(r, values),
        priority_classes=_each(r, values, "priorityClasses", _plain(PriorityClassSpec)),
        parent_queues=_each(r, values, "queues", lambda rr, data, path: _queue(Section(rr, QueueSpec, data, path), None)),
        controller=_controller(r, values),
        upstream=_section(r, values, "upstream", UpstreamSpec),
        policies=_policies(r, values),
    )
    return config, r.problems


def raise_on(problems: list) -> None:
    """Raise the errors (warnings never stop a deploy)."""
    if errors_of(problems):
        raise StackConfigError(errors_of(problems))
