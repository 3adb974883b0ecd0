"""A tenant's namespaced objects, as plain dicts: Namespace, quotas, LimitRange, NetworkPolicy, Queue.

The ResourceQuota is a backstop at least as large as the queue capability: Volcano gates whole
gangs on the queue, while quota admission rejects pods one by one (and could strand half a gang).
"""

from __future__ import annotations

import json

from trainyard import k8s as K
from trainyard.k8s import TENANT_LABEL
from trainyard.k8s import part_of_trainyard
from trainyard.platform.stack_config import PolicySpec, TenantLimits, TenantSpec
from trainyard.queues.resources import GPU
from trainyard.queues.volcano_queues import render_queue

QUEUE_LABEL = K.NAMESPACE_QUEUE_LABEL
PART_OF = part_of_trainyard()
TRAINJOB_COUNT = f"count/{K.resource_name(K.TRAINJOBS, K.TRAINER_GROUP)}"


def tenant_labels(tenant: TenantSpec) -> dict[str, str]:
    return {**PART_OF, TENANT_LABEL: tenant.name}


def tenant_namespace_annotations(tenant: TenantSpec) -> dict[str, str]:
    """Granted and default priority classes, read by the TrainJob controller and its webhook (tenants
    cannot edit their Namespace). No grant: no annotation, and the namespace is not restricted."""
    limits = tenant.limits
    out = {K.NAMESPACE_DEFAULT_MEMORY_LIMIT_ANNOTATION: limits.default_memory_limit,  # platform.pod_defaults
           K.NAMESPACE_DEFAULT_EPHEMERAL_LIMIT_ANNOTATION: limits.default_ephemeral_storage_limit,
           K.NAMESPACE_DEFAULT_EMPTYDIR_SIZE_ANNOTATION: limits.default_empty_dir_size_limit,
           K.NAMESPACE_NODE_LOSS_TOLERATION_ANNOTATION: str(limits.node_loss_toleration_seconds)}
    if tenant.allowed_priority_classes:
        out[K.NAMESPACE_PRIORITY_CLASSES_ANNOTATION] = ",".join(tenant.allowed_priority_classes)
    if tenant.limits.max_termination_grace_period_seconds != TenantLimits.max_termination_grace_period_seconds:
        out[K.NAMESPACE_MAX_GRACE_ANNOTATION] = str(tenant.limits.max_termination_grace_period_seconds)
    if limits.checkpoint_grace_seconds != TenantLimits.checkpoint_grace_seconds:
        out[K.NAMESPACE_CHECKPOINT_GRACE_ANNOTATION] = str(limits.checkpoint_grace_seconds)
    if tenant.service_accounts:
        out[K.NAMESPACE_SERVICE_ACCOUNTS_ANNOTATION] = ",".join(tenant.service_accounts)
    if tenant.default_priority_class:
        out[K.NAMESPACE_DEFAULT_PRIORITY_CLASS_ANNOTATION] = tenant.default_priority_class
    if tenant.budget is not None:
        out[K.NAMESPACE_BUDGET_ANNOTATION] = json.dumps(tenant.budget.as_annotation(), sort_keys=True)
    return out


def render_namespace(tenant: TenantSpec, policies: PolicySpec) -> dict:
    """Pod Security enforced at the tenant's level; the default queue is readable by the queue guard (CEL)
    and, with the priority class annotations, by the TrainJob controller (defaults) and webhook (admission)."""
    level = tenant.pod_security or policies.pod_security
    annotations = tenant_namespace_annotations(tenant)
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": tenant.namespace,
            **({"annotations": annotations} if annotations else {}),
            "labels": {
                **tenant_labels(tenant),
                QUEUE_LABEL: tenant.queue.name,
                K.CATALOG_VERSION_LABEL: tenant.catalog_version,
                "pod-security.kubernetes.io/enforce": level,
                "pod-security.kubernetes.io/audit": "restricted",
                "pod-security.kubernetes.io/warn": "restricted",
            },
        },
    }


def _meta(tenant: TenantSpec, name: str) -> dict:
    return {"name": name, "namespace": tenant.namespace, "labels": tenant_labels(tenant)}


def gpu_device_quota(tenant: TenantSpec, policies: PolicySpec) -> dict[str, str]:
    """The tenant's GPU quota again for each DRA device class of GPUs: GPUs claimed through DRA count too."""
    return {f"{device_class}{K.DRA_DEVICES_QUOTA_SUFFIX}": str(tenant.quota.gpu)
            for device_class in policies.gpu_device_classes}


def render_resource_quota(tenant: TenantSpec, policies: PolicySpec = PolicySpec()) -> dict:
    quota = tenant.quota
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _meta(tenant, "tenant-quota"),
        "spec": {"hard": {
            "requests.cpu": str(quota.cpu),
            "requests.memory": str(quota.memory),
            f"requests.{GPU}": str(quota.gpu),
            **gpu_device_quota(tenant, policies),
            TRAINJOB_COUNT: str(quota.train_jobs),
        }},
    }


def render_priority_quotas(tenant: TenantSpec) -> list[dict]:
    """Priority classes the tenant may use: its GPU quota is only usable under allowed classes, and a
    pod naming any other class hits a zero-pod quota. Pods naming no class are left to the default."""
    allowed = list(tenant.allowed_priority_classes)
    if not allowed:
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _meta(tenant, "allowed-priority-classes"),
            "spec": {
                "hard": {f"requests.{GPU}": str(tenant.quota.gpu)},
                "scopeSelector": {"matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": allowed}]},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _meta(tenant, "other-priority-classes"),
            "spec": {
                "hard": {"pods": "0"},
                "scopeSelector": {"matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "Exists"},
                    {"scopeName": "PriorityClass", "operator": "NotIn", "values": allowed},
                ]},
            },
        },
    ]


def render_limit_range(tenant: TenantSpec) -> dict:
    """Default requests for containers that state none, so quota accounting never rejects them outright.

    No default *limits*: a default cpu/memory limit below what a training container requests makes
    the pod invalid (requests must not exceed limits), which fails every GPU job that asks for more. Default
    limits come from `platform.pod_defaults` instead (the larger of the request and the tenant's default).
    """
    limits = tenant.limits
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _meta(tenant, "tenant-defaults"),
        "spec": {"limits": [{
            "type": "Container",
            "defaultRequest": {"cpu": limits.default_cpu, "memory": limits.default_memory,
                               "ephemeral-storage": limits.default_ephemeral_storage},
        }]},
    }


def render_default_deny(tenant: TenantSpec) -> dict:
    """Deny ingress from other namespaces; pods of one job still talk to each other (rendezvous, NCCL)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(tenant, "default-deny-other-namespaces"),
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
        },
    }


def wants_default_deny(tenant: TenantSpec, policies: PolicySpec) -> bool:
    return policies.default_deny_network if tenant.default_deny_network is None else tenant.default_deny_network


def render_tenant_queue(tenant: TenantSpec) -> dict:
    return render_queue(tenant.queue, labels=tenant_labels(tenant))


def admission_policy_binding(kind: str, policy: str, tenant: TenantSpec, **spec: object) -> dict:
    """A (Validating|Mutating)AdmissionPolicyBinding of `policy` to the tenant's namespace only."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": f"{policy}-{tenant.name}", "labels": tenant_labels(tenant)},
        "spec": {"policyName": policy, **spec, "matchResources": {"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": tenant.namespace}}}},
    }


def pod_create_mutation_policy(name: str, match_conditions: list[dict], variables: list[dict],
                               expression: str, patch_type: str = "ApplyConfiguration") -> dict:
    """A MutatingAdmissionPolicy applying `expression` (an ApplyConfiguration, or a JSONPatch list: the only way
    to change an atomic list such as tolerations) to pods at create."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": PART_OF},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                                                    "operations": ["CREATE"]}]},
            "matchConditions": match_conditions,
            "variables": variables,
            "mutations": [{"patchType": patch_type, ("jsonPatch" if patch_type == "JSONPatch" else "applyConfiguration"):
                           {"expression": expression}}],
        },
    }
