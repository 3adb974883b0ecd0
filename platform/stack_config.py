"""Parse the platform stack configuration (`config:` of stacks/Pulumi.<env>.yaml) into `stack_model` data.

`parse_stack_config` checks shapes, types, known keys at every level and quantities (Pulumi
validates nested config shallowly and ignores keys it does not know); cross-field rules live in
`stack_validation`. Both collect every problem instead of stopping at the first, so one run tells
the operator everything to fix.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from trainyard.platform.problems import StackConfigError, errors_of
from trainyard.platform.stack_model import (  # noqa: F401  (re-exported: components import them from here)
    NAMESPACE,
    POD_SECURITY_LEVELS,
    WEBHOOK_CERTIFICATE_SOURCES,
    ClusterCapacity,
    ControllerSpec,
    PolicySpec,
    StackConfig,
    TenantGroups,
    TenantLimits,
    TenantQuota,
    TenantSpec,
    UpstreamSpec,
    WebhookSpec,
)
from trainyard.platform.stack_reader import Reader, entry_labels
from trainyard.queues.hypernodes import RackSpec, TopologySpec
from trainyard.queues.priority_classes import PriorityClassSpec
from trainyard.queues.scheduler_config import SchedulerSettings
from trainyard.queues.volcano_queues import QueueSpec

TOP_KEYS = ("kubeconfig", "kubeContext", "controllersRunLocally", "adoptExistingObjects", "cluster", "topology",
            "scheduler", "priorityClasses", "queues", "controller", "upstream", "policies", "tenants")
CLUSTER_KEYS = ("nodes", "gpusPerNode", "cpuPerNode", "memoryPerNode", "gpuProduct")
TOPOLOGY_KEYS = ("rackLabel", "racks")
RACK_KEYS = ("name", "spine", "nodes")
SCHEDULER_KEYS = ("profile", "queuePlugin", "binpackWeight", "gpuBinpackWeight", "topologyWeight", "overcommitFactor")
PRIORITY_CLASS_KEYS = ("name", "value", "description", "preemptionPolicy", "globalDefault")
QUEUE_KEYS = ("name", "weight", "capability", "deserved", "guarantee", "reclaimable", "parent", "priority")
CONTROLLER_KEYS = ("namespace", "image", "replicas", "sdkNamespace", "featureGates", "webhook")
WEBHOOK_KEYS = ("url", "caBundleFile", "failurePolicy", "certificate")
UPSTREAM_KEYS = ("jobsetImage", "volcanoRegistry", "volcanoTag")
POLICY_KEYS = ("podSecurity", "defaultDenyNetwork", "protectCrds", "retainCrds", "requireImageDigest",
               "refuseQuotaOversubscription")
TENANT_KEYS = ("name", "namespace", "catalogVersion", "queue", "quota", "defaultPriorityClass", "priorityClasses",
               "limits", "groups", "podSecurity", "networkPolicy")
QUOTA_KEYS = ("cpu", "memory", "gpu", "trainJobs")
LIMITS_KEYS = ("defaultCpu", "defaultMemory")
GROUPS_KEYS = ("admins", "users")
NETWORK_KEYS = ("defaultDeny",)


def stack_values(document: Any) -> dict[str, Any]:
    """A parsed stack file -> its `trainyard:` config keys without the namespace prefix."""
    config = (document or {}).get("config") or {} if isinstance(document, dict) else {}
    if not isinstance(config, dict):
        return {}
    prefix = f"{NAMESPACE}:"
    return {str(key)[len(prefix):]: value for key, value in config.items() if str(key).startswith(prefix)}


def _queue(r: Reader, data: dict, path: str, default_capability: Mapping[str, object] | None) -> QueueSpec:
    r.unknown_keys(data, path, QUEUE_KEYS)
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


def _quota(r: Reader, data: dict, path: str) -> TenantQuota:
    """Quota hard limits: cpu and memory above zero, GPUs whole and zero or more (a CPU-only tenant)."""
    need = bool(data)
    return TenantQuota(
        cpu=r.amount(data, "cpu", path, positive=True, required=need, default="0"),
        memory=r.amount(data, "memory", path, positive=True, required=need, default="0"),
        gpu=r.scalar(data, "gpu", path, int, required=need, default=0, minimum=0),
        train_jobs=r.scalar(data, "trainJobs", path, int, default=100, minimum=1),
    )


def _tenant(r: Reader, data: dict, path: str) -> TenantSpec:
    r.unknown_keys(data, path, TENANT_KEYS)
    name = str(r.scalar(data, "name", path, str, required=True, default=""))
    quota_data = r.mapping(data.get("quota"), f"{path}.quota", QUOTA_KEYS, required=True)
    quota = _quota(r, quota_data, f"{path}.quota")
    limits_data = r.mapping(data.get("limits"), f"{path}.limits", LIMITS_KEYS)
    groups_data = r.mapping(data.get("groups"), f"{path}.groups", GROUPS_KEYS)
    network = r.mapping(data.get("networkPolicy"), f"{path}.networkPolicy", NETWORK_KEYS)
    queue_data = r.mapping(data.get("queue"), f"{path}.queue", required=True)
    return TenantSpec(
        name=name,
        namespace=str(r.scalar(data, "namespace", path, str, default=name)),
        catalog_version=str(r.scalar(data, "catalogVersion", path, (str, int, float), required=True, default="")),
        queue=_queue(r, queue_data, f"{path}.queue", quota.as_resources() if quota_data else None),
        quota=quota,
        default_priority_class=r.scalar(data, "defaultPriorityClass", path, str),
        priority_classes=r.names(data, "priorityClasses", path),
        limits=TenantLimits(
            default_cpu=str(r.amount(limits_data, "defaultCpu", f"{path}.limits", positive=True, default="1")),
            default_memory=str(r.amount(limits_data, "defaultMemory", f"{path}.limits", positive=True, default="4Gi")),
        ),
        groups=TenantGroups(
            admins=r.names(groups_data, "admins", f"{path}.groups") or (f"{name}-admins",),
            users=r.names(groups_data, "users", f"{path}.groups") or (f"{name}-users",),
        ),
        pod_security=r.scalar(data, "podSecurity", path, str),
        default_deny_network=r.scalar(network, "defaultDeny", f"{path}.networkPolicy", bool),
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


def _priority_class(r: Reader, data: dict, path: str) -> PriorityClassSpec:
    r.unknown_keys(data, path, PRIORITY_CLASS_KEYS)
    return PriorityClassSpec(
        name=str(r.scalar(data, "name", path, str, required=True, default="")),
        value=r.scalar(data, "value", path, int, required=True, default=0),
        description=r.scalar(data, "description", path, str, default=""),
        preemption_policy=r.scalar(data, "preemptionPolicy", path, str, default="PreemptLowerPriority"),
        global_default=r.scalar(data, "globalDefault", path, bool, default=False),
    )


def _rack(r: Reader, data: dict, path: str) -> RackSpec:
    r.unknown_keys(data, path, RACK_KEYS)
    return RackSpec(name=str(r.scalar(data, "name", path, str, required=True, default="")),
                    spine=str(r.scalar(data, "spine", path, str, default="spine-0")),
                    nodes=r.names(data, "nodes", path))


def _cluster(r: Reader, values: Mapping[str, Any]) -> ClusterCapacity:
    path = f"{NAMESPACE}:cluster"
    data = r.mapping(values.get("cluster"), path, CLUSTER_KEYS, required=True)
    need = bool(data)
    return ClusterCapacity(
        nodes=r.scalar(data, "nodes", path, int, required=need, default=0),
        gpus_per_node=r.scalar(data, "gpusPerNode", path, int, required=need, default=0),
        cpu_per_node=r.scalar(data, "cpuPerNode", path, (int, str), required=need, default=0),
        memory_per_node=r.scalar(data, "memoryPerNode", path, (int, str), required=need, default=0),
        gpu_product=r.scalar(data, "gpuProduct", path, str),
    )


def _scheduler(r: Reader, values: Mapping[str, Any]) -> SchedulerSettings:
    path = f"{NAMESPACE}:scheduler"
    sched = r.mapping(values.get("scheduler"), path, SCHEDULER_KEYS)
    scheduler = SchedulerSettings(
        profile=r.scalar(sched, "profile", path, str, default="gang"),
        queue_plugin=r.scalar(sched, "queuePlugin", path, str, default="proportion"),
        binpack_weight=r.scalar(sched, "binpackWeight", path, int, default=10),
        gpu_binpack_weight=r.scalar(sched, "gpuBinpackWeight", path, int, default=10),
        topology_weight=r.scalar(sched, "topologyWeight", path, int, default=10),
        overcommit_factor=float(r.scalar(sched, "overcommitFactor", path, (int, float), default=1.0)),
        hierarchical_queues=bool(values.get("queues")),
    )
    r.problems += scheduler.problems(r.file, path)
    return scheduler


def _controller(r: Reader, values: Mapping[str, Any]) -> ControllerSpec:
    path = f"{NAMESPACE}:controller"
    ctl = r.mapping(values.get("controller"), path, CONTROLLER_KEYS)
    hook = r.mapping(ctl.get("webhook"), f"{path}.webhook", WEBHOOK_KEYS)
    return ControllerSpec(
        namespace=r.scalar(ctl, "namespace", path, str, default=ControllerSpec.namespace),
        image=r.scalar(ctl, "image", path, str, default=ControllerSpec.image),
        replicas=r.scalar(ctl, "replicas", path, int, default=ControllerSpec.replicas),
        sdk_namespace=r.scalar(ctl, "sdkNamespace", path, str, default=ControllerSpec.sdk_namespace),
        feature_gates=r.scalar(ctl, "featureGates", path, str, default=ControllerSpec.feature_gates),
        webhook=WebhookSpec(
            url=r.scalar(hook, "url", f"{path}.webhook", str),
            ca_bundle_file=r.scalar(hook, "caBundleFile", f"{path}.webhook", str),
            failure_policy=r.scalar(hook, "failurePolicy", f"{path}.webhook", str, default="Fail"),
            certificate=r.scalar(hook, "certificate", f"{path}.webhook", str),
        ),
    )


def _upstream(r: Reader, values: Mapping[str, Any]) -> UpstreamSpec:
    path = f"{NAMESPACE}:upstream"
    up = r.mapping(values.get("upstream"), path, UPSTREAM_KEYS)
    return UpstreamSpec(
        jobset_image=r.scalar(up, "jobsetImage", path, str, default=UpstreamSpec.jobset_image),
        volcano_registry=r.scalar(up, "volcanoRegistry", path, str, default=UpstreamSpec.volcano_registry),
        volcano_tag=r.scalar(up, "volcanoTag", path, str, default=UpstreamSpec.volcano_tag),
    )


def _policies(r: Reader, values: Mapping[str, Any]) -> PolicySpec:
    path = f"{NAMESPACE}:policies"
    pol = r.mapping(values.get("policies"), path, POLICY_KEYS)
    return PolicySpec(
        pod_security=r.scalar(pol, "podSecurity", path, str, default="baseline"),
        default_deny_network=r.scalar(pol, "defaultDenyNetwork", path, bool, default=False),
        protect_crds=r.scalar(pol, "protectCrds", path, bool, default=True),
        retain_crds=r.scalar(pol, "retainCrds", path, bool, default=True),
        require_image_digest=r.scalar(pol, "requireImageDigest", path, bool, default=False),
        refuse_quota_oversubscription=r.scalar(pol, "refuseQuotaOversubscription", path, bool, default=False),
    )


def parse_stack_config(values: Mapping[str, Any], *, file: str) -> tuple[StackConfig, list]:
    """Config values (keys without `trainyard:`) -> StackConfig plus shape problems."""
    r = Reader(file)
    r.unknown_keys(values, NAMESPACE, TOP_KEYS, sep=":")
    topology_data = r.mapping(values.get("topology"), f"{NAMESPACE}:topology", TOPOLOGY_KEYS)
    topology = TopologySpec(
        rack_label=r.scalar(topology_data, "rackLabel", f"{NAMESPACE}:topology", str, default="trainyard.dev/rack"),
        racks=_each(r, {"topology.racks": topology_data.get("racks")}, "topology.racks", _rack),
    )
    config = StackConfig(
        file=file,
        kubeconfig=_scalar_key(r, values, "kubeconfig", str),
        kube_context=_scalar_key(r, values, "kubeContext", str),
        controllers_run_locally=bool(_scalar_key(r, values, "controllersRunLocally", bool) or False),
        adopt_existing_objects=bool(_scalar_key(r, values, "adoptExistingObjects", bool) or False),
        cluster=_cluster(r, values),
        tenants=_each(r, values, "tenants", _tenant),
        topology=topology,
        scheduler=_scheduler(r, values),
        priority_classes=_each(r, values, "priorityClasses", _priority_class),
        parent_queues=_each(r, values, "queues", lambda rr, d, p: _queue(rr, d, p, None)),
        controller=_controller(r, values),
        upstream=_upstream(r, values),
        policies=_policies(r, values),
    )
    return config, r.problems


def _scalar_key(r: Reader, values: Mapping[str, Any], key: str, kind: type) -> Any:
    value = values.get(key)
    if isinstance(value, str) and kind is bool and value in ("true", "false"):
        return value == "true"  # `pulumi config set` stores plain strings
    if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
        r.problem(f"{NAMESPACE}:{key}", f"must be {kind.__name__}, got {value!r}", f"write a {kind.__name__}")
        return None
    return value


def raise_on(problems: list) -> None:
    """Raise the errors (warnings never stop a deploy)."""
    if errors_of(problems):
        raise StackConfigError(errors_of(problems))
