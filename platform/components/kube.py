"""Register a plain Kubernetes object dict as the matching pulumi_kubernetes resource.

Built-in kinds become typed resources (so type tokens, previews and policies see e.g.
`kubernetes:core/v1:Namespace`); custom kinds, and built-in kinds newer than the pinned SDK (such as
`MutatingAdmissionPolicy`, GA in Kubernetes 1.36), become `apiextensions.CustomResource` with the same
type token.
"""

from __future__ import annotations

import importlib
import json
import re

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource

SDK_MODULES = {
    "": "core", "apps": "apps", "rbac.authorization.k8s.io": "rbac", "scheduling.k8s.io": "scheduling",
    "networking.k8s.io": "networking", "admissionregistration.k8s.io": "admissionregistration",
    "apiextensions.k8s.io": "apiextensions", "policy": "policy", "coordination.k8s.io": "coordination",
}
WAIT_FOR = "pulumi.com/waitFor"
PATCH_FORCE = "pulumi.com/patchForce"
_adopt_existing = False


def adopt_existing_objects(enabled: bool) -> None:
    """Take over objects someone else applied first (the local cluster pre-applies CRDs and webhooks).

    Pulumi's server-side apply then forces field ownership (`pulumi.com/patchForce`) instead of
    failing on the other field manager's conflict.
    """
    global _adopt_existing
    _adopt_existing = enabled


def with_patch_force(obj: dict) -> dict:
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), PATCH_FORCE: "true"}
    return {**obj, "metadata": meta}


def resource_name(obj: dict) -> str:
    """`<namespace>/<name>` or `<name>`: unique per type, readable in previews."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def with_crd_await(crd: dict) -> dict:
    """CRDs have no built-in await; wait for Established so dependants never race the API server."""
    meta = crd.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), WAIT_FOR: "condition=Established"}
    return crd


def with_quota_await(quota: dict) -> dict:
    """A ResourceQuota has no built-in await, and until kube-controller-manager has counted its usage the API
    server refuses every create it covers ("status unknown for quota"): wait until each limit has a usage."""
    meta = quota.setdefault("metadata", {})
    used = [f"jsonpath={{.status.used['{key}']}}" for key in sorted(quota["spec"]["hard"])]
    meta["annotations"] = {**(meta.get("annotations") or {}), WAIT_FOR: json.dumps(used)}
    return quota


def register(obj: dict, opts: pulumi.ResourceOptions | None = None, name: str | None = None) -> pulumi.CustomResource:
    group, _, version = obj["apiVersion"].rpartition("/")
    name = name or resource_name(obj)
    if _adopt_existing:
        obj = with_patch_force(obj)
    module = SDK_MODULES.get(group)
    cls = getattr(importlib.import_module(f"pulumi_kubernetes.{module}.{version}"), obj["kind"], None) if module else None
    if cls is None:
        return CustomResource(name, api_version=obj["apiVersion"], kind=obj["kind"], metadata=obj.get("metadata"),
                              spec=obj.get("spec"), opts=opts)
    kwargs = {_snake(key): value for key, value in obj.items() if key not in ("apiVersion", "kind")}
    return cls(name, opts=opts, **kwargs)


def child(parent: pulumi.Resource, depends_on: list | None = None, **extra) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, depends_on=depends_on or [], **extra)
