"""Default limits for tenant pods: memory, ephemeral storage and emptyDir size, from the tenant's stack entry.

A pod with no memory limit may take a node's whole memory; an emptyDir without `sizeLimit` may fill the node's
disk (or, memory-backed, offer the node's RAM as tmpfs). A LimitRange's `default` limit cannot be used for this:
applied to a container that requests more than it, the pod becomes invalid (requests above limits). So a
MutatingAdmissionPolicy (CEL run by the API server at pod create) gives every container and init container that
sets no memory (ephemeral-storage) limit the larger of its request and the tenant's default, and every emptyDir
without a `sizeLimit` the tenant's default size. What a pod states itself is never changed.

Like the queue guard, one policy serves every tenant: the values are the namespace's annotations
(`trainyard.dev/default-memory-limit`, `-ephemeral-storage-limit`, `-emptydir-size-limit`), written by the
platform, which tenants cannot edit; each tenant gets a Binding for its namespace.
"""

from __future__ import annotations

from trainyard import k8s as K
from trainyard.platform.stack_config import TenantSpec
from trainyard.platform.tenant_objects import admission_policy_binding, pod_create_mutation_policy

POLICY_NAME = "trainyard-tenant-pod-defaults"
LIMITED = (("memory", "memory", K.NAMESPACE_DEFAULT_MEMORY_LIMIT_ANNOTATION),
           ("ephemeral-storage", "storage", K.NAMESPACE_DEFAULT_EPHEMERAL_LIMIT_ANNOTATION))
"""(resource, CEL variable, namespace annotation) of each limit given by default."""
EMPTYDIR = ("emptydir", K.NAMESPACE_DEFAULT_EMPTYDIR_SIZE_ANNOTATION)


def _lacks(resource: str, c: str = "c") -> str:
    return f"!{c}.?resources.?limits[?'{resource}'].hasValue()"


def _limit(resource: str, variable: str, c: str = "c") -> str:
    """The larger of the container's request and the tenant's default."""
    request = f"{c}.?resources.?requests[?'{resource}']"
    return (f"({request}.hasValue() && quantity(string({request}.value())).isGreaterThan("
            f"quantity(variables.{variable})) ? string({request}.value()) : variables.{variable})")


def _limits_map() -> str:
    (mem, mem_var, _), (eph, eph_var, _) = LIMITED
    both = f"{{'{mem}': {_limit(mem, mem_var)}, '{eph}': {_limit(eph, eph_var)}}}"
    return (f"({_lacks(mem)} && {_lacks(eph)}) ? {both} : {_lacks(mem)} ? {{'{mem}': {_limit(mem, mem_var)}}} : "
            f"{{'{eph}': {_limit(eph, eph_var)}}}")


def _needs_limits(c: str = "c") -> str:
    return " || ".join(_lacks(resource, c) for resource, _, _ in LIMITED)


def _containers(field: str) -> str:
    item = f"Object.spec.{field}"
    return (f"object.spec.?{field}.orValue([]).filter(c, {_needs_limits()}).map(c, "
            f"{item}{{name: c.name, resources: {item}.resources{{limits: {_limits_map()}}}}})")


def _unsized(v: str = "v") -> str:
    return f"{v}.?emptyDir.hasValue() && !{v}.?emptyDir.?sizeLimit.hasValue()"


def _volumes() -> str:
    return (f"object.spec.?volumes.orValue([]).filter(v, {_unsized()}).map(v, Object.spec.volumes{{name: v.name, "
            f"emptyDir: Object.spec.volumes.emptyDir{{sizeLimit: variables.{EMPTYDIR[0]}}}}})")


def needs_defaults() -> str:
    """CEL: the pod has a container or init container without a memory or ephemeral-storage limit, or an
    emptyDir without a size."""
    lists = "object.spec.?containers.orValue([]) + object.spec.?initContainers.orValue([])"
    return (f"({lists}).exists(c, {_needs_limits()}) || "
            f"object.spec.?volumes.orValue([]).exists(v, {_unsized()})")


def mutation() -> str:
    return (f"Object{{spec: Object.spec{{containers: {_containers('containers')}, "
            f"initContainers: {_containers('initContainers')}, volumes: {_volumes()}}}}}")


def _annotation(name: str) -> str:
    return f"namespaceObject.?metadata.?annotations[?'{name}'].orValue('')"


def render_pod_defaults_policy() -> dict:
    variables = [(variable, annotation) for _, variable, annotation in LIMITED] + [EMPTYDIR]
    # a namespace the platform wrote no defaults on (matchConditions cannot read the namespace) is left alone
    written = " && ".join(f"variables.{variable} != ''" for variable, _ in variables)
    return pod_create_mutation_policy(
        POLICY_NAME, [{"name": "needs-defaults", "expression": needs_defaults()}],
        [{"name": variable, "expression": _annotation(annotation)} for variable, annotation in variables],
        f"{written} ? {mutation()} : Object{{}}")


def render_pod_defaults_binding(tenant: TenantSpec) -> dict:
    return admission_policy_binding("MutatingAdmissionPolicyBinding", POLICY_NAME, tenant)

