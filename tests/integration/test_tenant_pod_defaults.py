"""Tenant pods get the stack's default limits on the real API server (`platform.pod_defaults`): a container
without a memory or ephemeral-storage limit gets the larger of its request and the tenant's default, an emptyDir
without a size gets the tenant's default size; what a pod states itself is kept; other namespaces are untouched.
Also through a TrainJob: the Job controller's pods carry them."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from trainyard.platform.stack_model import TenantLimits

from builders import new_trainjob, tenant_spec
from tenant_helpers import add_tenant, create, remove_tenant

pytestmark = pytest.mark.integration

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
    "initContainers": [{"name": "sidecar", "image": "busybox", "restartPolicy": "Always"}],
    "containers": [
        {"name": "big", "image": "busybox", "resources": {"requests": {"memory": "100Gi", "ephemeral-storage": "80Gi"}}},
        {"name": "stated", "image": "busybox", "resources": {"limits": {"memory": "1Gi", "ephemeral-storage": "2Gi"}}},
        {"name": "bare", "image": "busybox"}],
    "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}, {"name": "scratch", "emptyDir": {}},
                {"name": "sized", "emptyDir": {"sizeLimit": "1Gi"}}]}}


def admitted(cluster, ns: str, user: tuple[str, str] | None = None) -> dict:
    who = [f"--as={user[0]}", f"--as-group={user[1]}"] if user else []
    return json.loads(cluster.kubectl("create", "-n", ns, "--dry-run=server", "-f", "-", "-o", "json", *who,
                                      input_text=json.dumps(POD)))["spec"]


def limits(spec: dict) -> dict[str, dict]:
    return {c["name"]: (c.get("resources") or {}).get("limits") or {}
            for c in spec.get("initContainers", []) + spec["containers"]}


def sizes(spec: dict) -> dict[str, str | None]:
    return {v["name"]: v["emptyDir"].get("sizeLimit") for v in spec["volumes"] if "emptyDir" in v}


def test_tenant_pods_get_the_stacks_default_limits_and_keep_their_own(cluster, shared):
    spec = replace(tenant_spec(), limits=TenantLimits(default_memory_limit="32Gi", default_ephemeral_storage_limit="20Gi",
                                                      default_empty_dir_size_limit="8Gi"))
    tenant = add_tenant(cluster, spec)
    try:
        pod = admitted(cluster, tenant.ns)
        assert limits(pod) == {
            "sidecar": {"memory": "32Gi", "ephemeral-storage": "20Gi"},
            "big": {"memory": "100Gi", "ephemeral-storage": "80Gi"},  # its request is larger than the default
            "stated": {"memory": "1Gi", "ephemeral-storage": "2Gi"},  # its own, kept
            "bare": {"memory": "32Gi", "ephemeral-storage": "20Gi"}}
        assert sizes(pod) == {"shm": "8Gi", "scratch": "8Gi", "sized": "1Gi"}
        requests = {c["name"]: c["resources"]["requests"]["ephemeral-storage"] for c in pod["containers"]}
        assert requests["bare"] == "1Gi", "the LimitRange's default request, not the limit"
        outside = admitted(cluster, "default")
        assert limits(outside)["bare"] == {} and sizes(outside)["scratch"] is None
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_trainjobs_pods_get_them_through_the_job_controller(cluster, shared, catalog_runtime):
    tenant = add_tenant(cluster, tenant_spec())
    try:
        create(cluster, new_trainjob("limited", catalog_runtime, namespace=tenant.ns, nodes=1), as_user=tenant.user)

        def pods():
            return [p for p in cluster.core.list_namespaced_pod(tenant.ns).items
                    if (p.metadata.labels or {}).get("jobset.sigs.k8s.io/jobset-name") == "limited"]

        (pod,) = cluster.wait(pods, timeout=90, what="the TrainJob's pod")
        (container,) = [c for c in pod.spec.containers if c.name == "node"]
        assert container.resources.limits["memory"] == TenantLimits().default_memory_limit
        assert container.resources.limits["ephemeral-storage"] == TenantLimits().default_ephemeral_storage_limit
    finally:
        remove_tenant(cluster, tenant.spec)
