"""Cross-field guardrails over a parsed stack, checked before anything is registered with Pulumi.

Every rule returns problems naming the stack file, the field path and the fix; `load_stack`
raises them together as one StackConfigError. `RULES` is every rule in order: those over names, the
cluster, tenants, queues, priority classes and budgets are here, those over the controller's settings in
`stack_controller_rules`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence, TypeVar

from trainyard.tenant_policy import BUDGET_ACTIONS, BUDGET_PERIODS
from trainyard.k8s import GPU_RESOURCE, format_quantity
from trainyard.platform.problems import WARNING, ConfigProblem
from trainyard.platform.stack_reader import entry_labels, total
from trainyard.platform.stack_config import (
    NAMESPACE,
    POD_SECURITY_LEVELS,
    StackConfig,
    TenantSpec,
    parse_stack_config,
    raise_on,
)
from trainyard.platform.stack_controller_rules import check_controller, check_controller_enforcement
from trainyard.platform.stack_source import locate, read_stack_source
from trainyard.queues.priority_classes import MAX_USER_VALUE, PREEMPTION_POLICIES
from trainyard.queues.resources import over, quantity
from trainyard.queues.volcano_queues import RESERVED_QUEUES, QueueSpec, ordering_problems
from trainyard.runtimes.model import PINNABLE_STATUSES, RETIRED, Catalog

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RESERVED_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "volcano-system", "jobset-system")
MAX_QUEUE_DEPTH = 5


def _tenants(config: StackConfig) -> Iterable[tuple[str, TenantSpec]]:
    """(path, tenant): paths name the tenant (`trainyard:tenants[team-a]`) as the parser does."""
    return _named("tenants", config.tenants)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


NamedSpec = TypeVar("NamedSpec", bound=_Named)


def _named(key: str, specs: Sequence[NamedSpec]) -> list[tuple[str, NamedSpec]]:
    labels = entry_labels([{"name": spec.name} for spec in specs])
    return [(f"{NAMESPACE}:{key}[{label}]", spec) for label, spec in zip(labels, specs)]


def check_names(config: StackConfig) -> list[ConfigProblem]:
    """DNS-1123 labels for tenant, namespace and queue names; no reserved namespaces or queues."""
    out = []

    def label(path: str, value: str) -> None:
        if not value or len(value) > 63 or not DNS1123_LABEL.match(value):
            out.append(ConfigProblem(config.file, path, f"{value!r} is not a DNS-1123 label",
                                     "use at most 63 lowercase letters, digits and '-', starting and ending alphanumeric"))

    for path, tenant in _tenants(config):
        label(f"{path}.name", tenant.name)
        label(f"{path}.namespace", tenant.namespace)
        label(f"{path}.queue.name", tenant.queue.name)
        if tenant.namespace in RESERVED_NAMESPACES or tenant.namespace == config.controller.namespace:
            out.append(ConfigProblem(config.file, f"{path}.namespace", f"{tenant.namespace!r} is a system namespace",
                                     "give the tenant its own namespace, e.g. its name"))
        if tenant.queue.name in RESERVED_QUEUES:
            out.append(ConfigProblem(config.file, f"{path}.queue.name", f"{tenant.queue.name!r} is Volcano's own queue",
                                     "name the queue after the tenant"))
    for path, queue in _named("queues", config.parent_queues):
        label(f"{path}.name", queue.name)
    label(f"{NAMESPACE}:controller.sdkNamespace", config.controller.sdk_namespace)
    if config.controller.sdk_namespace in {t.namespace for t in config.tenants}:
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:controller.sdkNamespace",
                                 f"{config.controller.sdk_namespace!r} is a tenant namespace",
                                 "keep the SDK's public namespace for platform objects (default kubeflow-system)"))
    return out


def check_duplicates(config: StackConfig) -> list[ConfigProblem]:
    """Tenants, namespaces and queues must each be unique (queues across tenants and parents)."""
    out = []
    seen: dict[tuple[str, str], str] = {}
    entries = [(f"{path}.name", "tenant", t.name) for path, t in _tenants(config)]
    entries += [(f"{path}.namespace", "namespace", t.namespace) for path, t in _tenants(config)]
    entries += [(f"{path}.queue.name", "queue", t.queue.name) for path, t in _tenants(config)]
    entries += [(f"{path}.name", "queue", q.name) for path, q in _named("queues", config.parent_queues)]
    entries += [(f"{path}.name", "priority class", p.name) for path, p in _named("priorityClasses", config.priority_classes)]
    racks = _named("topology.racks", config.topology.racks)
    entries += [(f"{path}.name", "rack", r.name) for path, r in racks]  # one HyperNode per rack name
    entries += [(f"{path}.nodes", "rack member node", n) for path, r in racks for n in r.nodes]
    for path, what, value in entries:
        first = seen.get((what, value))
        if first:
            out.append(ConfigProblem(config.file, path, f"{what} {value!r} is already declared at {first}",
                                     f"give each {what} a unique name or remove the duplicate"))
        else:
            seen[(what, value)] = path
    return out


def check_cluster(config: StackConfig) -> list[ConfigProblem]:
    out, c, base = [], config.cluster, f"{NAMESPACE}:cluster"
    for key, count in (("nodes", c.nodes), ("gpusPerNode", c.gpus_per_node)):
        if isinstance(count, int) and count < (1 if key == "nodes" else 0):
            out.append(ConfigProblem(config.file, f"{base}.{key}", f"{count} is not a valid count", "declare the real count"))
    for key, value in (("cpuPerNode", c.cpu_per_node), ("memoryPerNode", c.memory_per_node)):
        amount = quantity(value)
        if amount is None or amount <= 0:
            out.append(ConfigProblem(config.file, f"{base}.{key}", f"{value!r} is not a positive quantity",
                                     "write e.g. 96 or '1Ti'"))
    return out


def check_capacity(config: StackConfig) -> list[ConfigProblem]:
    """Queue capability within the tenant's quota and the cluster's declared capacity; quotas too."""
    out = []
    totals = config.cluster.totals()
    for path, tenant in _tenants(config):
        quota = tenant.quota.as_resources()
        for name in over(tenant.queue.capability, quota):
            out.append(ConfigProblem(
                config.file, f"{path}.queue.capability[{name}]",
                f"{tenant.queue.capability[name]} is above the tenant's quota ({quota[name]})",
                f"lower the capability or raise quota.{'gpu' if name.endswith('gpu') else name}"))
        for name in over(tenant.queue.capability, totals):
            out.append(ConfigProblem(
                config.file, f"{path}.queue.capability[{name}]",
                f"{tenant.queue.capability[name]} is above the cluster's declared capacity ({totals[name]})",
                f"lower it, or correct {NAMESPACE}:cluster if the cluster is bigger"))
        for name in over(quota, totals):
            out.append(ConfigProblem(
                config.file, f"{path}.quota.{'gpu' if name.endswith('gpu') else name}",
                f"{quota[name]} is above the cluster's declared capacity ({totals[name]})",
                "lower the quota to what the cluster has"))
        for field, message, fix in ordering_problems(tenant.queue):
            out.append(ConfigProblem(config.file, f"{path}.queue.{field}", message, fix))
        if tenant.queue.weight < 1 or tenant.queue.weight > 65535:
            out.append(ConfigProblem(config.file, f"{path}.queue.weight", f"{tenant.queue.weight} is out of range",
                                     "use a weight between 1 and 65535"))
    return out


def check_oversubscription(config: StackConfig) -> list[ConfigProblem]:
    """Tenant quotas summing above the declared cluster: a warning (quotas are ceilings), an error by policy."""
    out, totals = [], config.cluster.totals()
    refuse = config.policies.refuse_quota_oversubscription
    for name, key in ((GPU_RESOURCE, "gpu"), ("cpu", "cpu"), ("memory", "memory")):
        shares = [(t.name, t.quota.as_resources()[name]) for t in config.tenants]
        summed, capacity = total(v for _, v in shares), totals.get(name)
        if capacity is None or capacity <= 0 or summed <= capacity or len(shares) < 2:
            continue
        listing = ", ".join(f"{n} {v}" for n, v in shares)
        binary = name == "memory"
        fix = (f"lower the tenants' quota.{key} to at most {format_quantity(capacity, binary)} in total, or set "
               f"{NAMESPACE}:policies.refuseQuotaOversubscription: false to accept it")
        if not refuse:
            fix = (f"fine if intended (a quota is a ceiling, queues share the cluster); otherwise lower quota.{key}. "
                   f"{NAMESPACE}:policies.refuseQuotaOversubscription: true makes this an error")
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:tenants",
                                 f"tenant quota.{key} sums to {format_quantity(summed, binary)} of the cluster's "
                                 f"{format_quantity(capacity, binary)} "
                                 f"({listing})", fix, severity="error" if refuse else WARNING))
    return out


def check_queue_parents(config: StackConfig) -> list[ConfigProblem]:
    """Parents must be declared queues, no cycles, depth <= 5 (Volcano's webhook rules, mirrored here)."""
    out = []
    parents = {q.name: q.parent for q in config.parent_queues}
    queues: list[tuple[str, QueueSpec]] = list(_named("queues", config.parent_queues))
    queues += [(f"{path}.queue", t.queue) for path, t in _tenants(config)]
    for path, queue in queues:
        if queue.parent and queue.parent != "root" and queue.parent not in parents:
            out.append(ConfigProblem(config.file, f"{path}.parent", f"parent queue {queue.parent!r} is not declared",
                                     f"declare it under {NAMESPACE}:queues or use root"))
            continue
        depth, current, visited = 1, queue.parent, {queue.name}
        while current and current != "root":
            if current in visited or depth > MAX_QUEUE_DEPTH:
                out.append(ConfigProblem(config.file, f"{path}.parent", "queue hierarchy has a cycle or is deeper than 5",
                                         "flatten the hierarchy"))
                break
            visited.add(current)
            depth, current = depth + 1, parents.get(current)
    if config.scheduler.queue_plugin == "proportion":
        for path, queue in queues:
            if queue.parent and queue.parent != "root":
                out.append(ConfigProblem(config.file, f"{path}.parent", "queue hierarchy needs the capacity plugin",
                                         f"set {NAMESPACE}:scheduler.queuePlugin: capacity, or drop parent"))
    return out


def check_priority_classes(config: StackConfig) -> list[ConfigProblem]:
    out = []
    known = {p.name for p in config.priority_classes}
    for path, spec in _named("priorityClasses", config.priority_classes):
        if spec.name.startswith("system-"):
            out.append(ConfigProblem(config.file, f"{path}.name", "system- names are reserved by Kubernetes",
                                     "choose another name"))
        if not -MAX_USER_VALUE <= spec.value <= MAX_USER_VALUE:
            out.append(ConfigProblem(config.file, f"{path}.value", f"{spec.value} is outside user range",
                                     f"use a value between -{MAX_USER_VALUE} and {MAX_USER_VALUE}"))
        if spec.preemption_policy not in PREEMPTION_POLICIES:
            out.append(ConfigProblem(config.file, f"{path}.preemptionPolicy", f"{spec.preemption_policy!r} is unknown",
                                     f"use one of {', '.join(PREEMPTION_POLICIES)}"))
    defaults = [path for path, p in _named("priorityClasses", config.priority_classes) if p.global_default]
    for path in defaults[1:]:
        out.append(ConfigProblem(config.file, f"{path}.globalDefault",
                                 "only one PriorityClass may be the global default", "set globalDefault: false"))
    for path, tenant in _tenants(config):
        if tenant.default_priority_class and tenant.default_priority_class not in known:
            out.append(ConfigProblem(config.file, f"{path}.defaultPriorityClass",
                                     f"unknown priority class {tenant.default_priority_class!r}",
                                     f"declare it under {NAMESPACE}:priorityClasses or use one of: {', '.join(sorted(known)) or 'none declared'}"))
        for i, name in enumerate(tenant.priority_classes):
            if name not in known:
                out.append(ConfigProblem(config.file, f"{path}.priorityClasses[{i}]", f"unknown priority class {name!r}",
                                         f"declare it under {NAMESPACE}:priorityClasses or remove it"))
    return out


def check_catalog_pins(config: StackConfig, catalog: Catalog | None) -> list[ConfigProblem]:
    """Each tenant pins a release that exists and is still rendered (not draft, not retired)."""
    if catalog is None:
        return []
    out = []
    releases = {r.version: r for r in catalog.releases}
    for path, tenant in _tenants(config):
        release = releases.get(tenant.catalog_version)
        if release is None:
            out.append(ConfigProblem(config.file, f"{path}.catalogVersion", f"unknown catalog release {tenant.catalog_version!r}",
                                     f"pin one of {', '.join(releases)} (trainyard catalog list)"))
        elif release.status not in PINNABLE_STATUSES:
            what = "retired" if release.status == RETIRED else f"{release.status} (not released)"
            out.append(ConfigProblem(config.file, f"{path}.catalogVersion", f"release {release.version} is {what}",
                                     f"move the tenant to {catalog.current.version}"))
    return out


def check_tenant_policies(config: StackConfig) -> list[ConfigProblem]:
    out = []
    for path, tenant in _tenants(config):
        if tenant.pod_security and tenant.pod_security not in POD_SECURITY_LEVELS:
            out.append(ConfigProblem(config.file, f"{path}.podSecurity", f"{tenant.pod_security!r} is not a Pod Security level",
                                     f"use one of {', '.join(POD_SECURITY_LEVELS)}"))
        if not tenant.groups.admins and not tenant.groups.users:
            out.append(ConfigProblem(config.file, f"{path}.groups", "no admin or user group", "list at least one group"))
    if config.policies.pod_security not in POD_SECURITY_LEVELS:
        out.append(ConfigProblem(config.file, f"{NAMESPACE}:policies.podSecurity", f"{config.policies.pod_security!r} is unknown",
                                 f"use one of {', '.join(POD_SECURITY_LEVELS)}"))
    for index, device_class in enumerate(config.policies.gpu_device_classes):
        if not DEVICE_CLASS_NAME.match(str(device_class)) or len(str(device_class)) > MAX_DEVICE_CLASS_NAME:
            out.append(ConfigProblem(config.file, f"{NAMESPACE}:policies.gpuDeviceClasses[{index}]",
                                     f"{device_class!r} is not a DeviceClass name",
                                     f"use the name of a DeviceClass (a DNS subdomain of at most {MAX_DEVICE_CLASS_NAME} "
                                     "characters, such as gpu.nvidia.com), as `kubectl get deviceclasses` lists them"))
    return out


DEVICE_CLASS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_DEVICE_CLASS_NAME = 253 - len(".deviceclass.resource.k8s.io")
"""Its ResourceQuota key's prefix `<class>.deviceclass.resource.k8s.io` must stay a DNS subdomain."""


def check_budgets(config: StackConfig) -> list[ConfigProblem]:
    """A budget: GPU-hours above 0, a known period and action; demotePriority names a declared class below the
    tenant's default (a demotion), and only demotePriority takes demoteTo."""
    out = []
    values = {p.name: p.value for p in config.priority_classes}
    for path, tenant in _tenants(config):
        budget, at = tenant.budget, f"{path}.budget"
        if budget is None:
            continue

        def problem(key: str, message: str, fix: str) -> None:
            out.append(ConfigProblem(config.file, f"{at}.{key}", message, fix))

        if budget.gpu_hours <= 0:
            problem("gpuHours", f"{budget.gpu_hours:g} is not above 0", "give the GPU-hours the tenant may use per "
                    "period, or remove the budget")
        if budget.period not in BUDGET_PERIODS:
            problem("period", f"{budget.period!r} is unknown", f"use one of {', '.join(BUDGET_PERIODS)}")
        if budget.action not in BUDGET_ACTIONS:
            problem("action", f"{budget.action!r} is unknown", f"use one of {', '.join(BUDGET_ACTIONS)}")
        if budget.action == "demotePriority":
            if not budget.demote_to:
                problem("demoteTo", "demotePriority needs the class to demote to",
                        f"name one of {', '.join(sorted(values)) or 'the declared priority classes'}")
            elif budget.demote_to not in values:
                problem("demoteTo", f"unknown priority class {budget.demote_to!r}",
                        f"declare it under {NAMESPACE}:priorityClasses or use one of: {', '.join(sorted(values))}")
            elif tenant.default_priority_class in values and \
                    values[budget.demote_to] >= values[tenant.default_priority_class]:
                problem("demoteTo", f"{budget.demote_to} ({values[budget.demote_to]}) is not below the tenant's "
                        f"default {tenant.default_priority_class} ({values[tenant.default_priority_class]})",
                        "demote to a class of lower value")
        elif budget.demote_to:
            problem("demoteTo", f"only demotePriority demotes; the action is {budget.action}",
                    "remove demoteTo or set action: demotePriority")
        if not config.controllers_run_locally and not config.controller.prometheus_url:
            out.append(ConfigProblem(config.file, at, "no Prometheus to measure the budget against: the controller "
                                     "reads the tenant's GPU-hours from the platform's Prometheus",
                                     f"set {NAMESPACE}:controller.prometheusUrl (the local stack needs none)"))
    return out


RULES = (check_names, check_duplicates, check_cluster, check_capacity, check_oversubscription, check_queue_parents,
         check_priority_classes, check_tenant_policies, check_budgets, check_controller_enforcement, check_controller)


def validate_stack(config: StackConfig, catalog: Catalog | None = None) -> list[ConfigProblem]:
    """Every cross-field problem of a parsed stack, in rule order."""
    problems = [p for rule in RULES for p in rule(config)]
    return problems + check_catalog_pins(config, catalog)


def check_stack(values: Mapping[str, Any], *, file: str, catalog: Catalog | None = None,
                lines: Mapping[tuple, int] | None = None) -> tuple[StackConfig, list[ConfigProblem]]:
    """Parse and validate: the config and every problem (errors and warnings), with lines when known."""
    config, problems = parse_stack_config(values, file=file)
    problems = problems + validate_stack(config, catalog)
    return config, locate(problems, dict(lines or {}))


def load_stack(values: Mapping[str, Any], *, file: str, catalog: Catalog | None = None,
               lines: Mapping[tuple, int] | None = None) -> StackConfig:
    """Parse and validate; raise one StackConfigError listing every error (warnings do not stop it)."""
    config, problems = check_stack(values, file=file, catalog=catalog, lines=lines)
    raise_on(problems)
    return config


def check_stack_file(path: Path, file: str | None = None, catalog: Any = None) -> list[ConfigProblem]:
    """Offline `trainyard platform validate`: every problem of one stack file, with lines (no Pulumi, no cluster)."""
    from trainyard.runtimes.store import load_catalog

    source = read_stack_source(path, file)
    if source.problem:
        return [source.problem]
    _, problems = check_stack(source.values, file=source.file, catalog=catalog or load_catalog(), lines=source.lines)
    return list(source.misspelt) + problems
