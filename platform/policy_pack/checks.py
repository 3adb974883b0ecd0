"""Pure checks over registered resources (type token + camelCase props), used by the policy pack and tests."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from trainyard.k8s import GPU_RESOURCE, TENANT_LABEL, VOLCANO_API_VERSION, pulumi_type

NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
QUOTA_TYPE = "kubernetes:core/v1:ResourceQuota"
ROLE_BINDING_TYPE = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
QUEUE_TYPE = pulumi_type(VOLCANO_API_VERSION, "Queue")
GUARD_TYPE = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
ROUTING_TYPE = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding"
ROLE_TYPES = ("kubernetes:rbac.authorization.k8s.io/v1:Role", "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
GPU_QUOTA = f"requests.{GPU_RESOURCE}"


def wildcard_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    if resource_type not in ROLE_TYPES:
        return []
    out = []
    for index, rule in enumerate(props.get("rules") or []):
        for key in ("apiGroups", "resources", "verbs", "resourceNames"):
            if "*" in (rule.get(key) or []):
                out.append(f"rules[{index}].{key} uses '*'; list what is needed")
    return out


def _labels(props: Mapping[str, Any]) -> dict:
    return (props.get("metadata") or {}).get("labels") or {}


def tenant_coverage_violations(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Every tenant namespace has a GPU quota, a RoleBinding, a Volcano queue, a queue-guard binding and a
    GPU-pod routing binding (without it, GPU pods would be refused rather than sent to Volcano)."""
    resources = list(resources)
    tenants = {_labels(p)[TENANT_LABEL]: (p.get("metadata") or {}).get("name")
               for t, p in resources if t == NAMESPACE_TYPE and TENANT_LABEL in _labels(p)}
    out = []
    for tenant, namespace in sorted(tenants.items()):
        def has(kind: str, extra=lambda p: True) -> bool:
            return any(t == kind and _labels(p).get(TENANT_LABEL) == tenant and extra(p) for t, p in resources)

        in_namespace = lambda p: (p.get("metadata") or {}).get("namespace") == namespace  # noqa: E731
        if not has(QUOTA_TYPE, lambda p: in_namespace(p) and GPU_QUOTA in ((p.get("spec") or {}).get("hard") or {})):
            out.append(f"tenant namespace {namespace} has no ResourceQuota on {GPU_QUOTA}")
        if not has(ROLE_BINDING_TYPE, in_namespace):
            out.append(f"tenant namespace {namespace} has no RoleBinding")
        if not has(QUEUE_TYPE):
            out.append(f"tenant {tenant} has no Volcano Queue")
        if not has(GUARD_TYPE):
            out.append(f"tenant {tenant} has no queue-guard ValidatingAdmissionPolicyBinding")
        if not has(ROUTING_TYPE):
            out.append(f"tenant {tenant} has no GPU-pod routing MutatingAdmissionPolicyBinding")
    return out
