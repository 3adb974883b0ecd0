"""TrainJobs that claim their GPUs through Dynamic Resource Allocation (`spec.trainer.resourceClaimsPerNode`,
Kubeflow Trainer KEP-2782), on the real API server with its resource-claim controller and quota admission:

- the claims reach the trainer's pods, and the API server makes one ResourceClaim per pod from the template;
- the tenant's GPU quota caps the GPUs claimed through DRA too (`policies.gpuDeviceClasses`), so a tenant cannot
  go around it: the API server refuses a claim beyond it, the webhook refuses at create a gang that could never get
  its claims, and `trainyard fit` says the same, counting what the running claims already use;
- what could never get its devices (a template that does not exist, GPUs of a class no quota caps, or
  `resourcesPerNode.claims`) is refused at create, naming the field and the fix.
"""

from __future__ import annotations

import json

import pytest

from trainyard import k8s as K

from builders import new_trainjob, tenant_spec, torch_runtime
from tenant_helpers import add_tenant, create, create_error, delete_cluster_object, jobset, remove_tenant
from test_capacity import fit

pytestmark = pytest.mark.integration

DEVICES = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
CLAIMS = [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]


def claim_template(name: str, ns: str, count: int, device_class: str = "gpu.nvidia.com") -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": count}}]}}}}


def claiming(name: str, runtime: str, ns: str, nodes: int, claims=CLAIMS, **trainer) -> dict:
    """A TrainJob claiming per node from `claims`; kwok runs its pods ten minutes (their claims held meanwhile)."""
    tj = new_trainjob(name, runtime, namespace=ns, nodes=nodes, podTemplateOverrides=[
        {"targetJobs": [{"name": "node"}], "metadata": {"annotations": {K.KWOK_POD_COMPLETE_DELAY_ANNOTATION: "600s"}}}])
    tj["spec"]["trainer"].update(resourceClaimsPerNode=claims, **trainer)
    return tj


@pytest.fixture
def claiming_runtime(cluster):
    """The catalog's torch gang without a GPU request of its own: the TrainJobs' claims are its only GPUs."""
    name = "torch-claims"
    create(cluster, torch_runtime(name))
    yield name
    delete_cluster_object(cluster, "clustertrainingruntime", name)


def admin(tenant) -> tuple[str, str]:
    return "bob-" + tenant.spec.name, tenant.spec.groups.admins[0]


def quota_used(cluster, ns: str) -> str | None:
    quota = json.loads(cluster.kubectl("get", "resourcequota", "tenant-quota", "-n", ns, "-o", "json"))
    return (quota.get("status") or {}).get("used", {}).get(DEVICES)


def test_claimed_gpus_reach_the_pods_and_count_against_the_tenants_gpu_quota(cluster, shared, claiming_runtime, tmp_path):
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        hard = json.loads(cluster.kubectl("get", "resourcequota", "tenant-quota", "-n", tenant.ns, "-o", "json"))
        assert hard["spec"]["hard"][DEVICES] == "16", hard["spec"]["hard"]
        create(cluster, claim_template("eight-gpus", tenant.ns, 8), as_user=admin(tenant))
        create(cluster, claim_template("other-gpus", tenant.ns, 8, "gpu.example.com"), as_user=admin(tenant))

        # refused at create, each naming the field and the fix
        beyond = create_error(cluster, claiming("beyond", claiming_runtime, tenant.ns, 3), as_user=tenant.user)
        assert DEVICES in beyond and "needs 24" in beyond and "can never start" in beyond, beyond
        missing = create_error(cluster, claiming("missing", claiming_runtime, tenant.ns, 1,
                                                 [{"name": "gpus", "resourceClaimTemplateName": "nope"}]), as_user=tenant.user)
        assert "resourceClaimsPerNode[0].resourceClaimTemplateName" in missing and "'nope' not found" in missing, missing
        uncapped = create_error(cluster, claiming("uncapped", claiming_runtime, tenant.ns, 1,
                                                  [{"name": "gpus", "resourceClaimTemplateName": "other-gpus"}]),
                                as_user=tenant.user)
        assert "DeviceClass 'gpu.example.com', which no ResourceQuota" in uncapped, uncapped
        old_style = new_trainjob("old-style", claiming_runtime, namespace=tenant.ns, nodes=1,
                                 per_node={"claims": [{"name": "gpus"}]})
        refused = create_error(cluster, old_style, as_user=tenant.user)
        assert "request devices with resourceClaimsPerNode" in refused, refused  # the CRD's rule, in the API server

        # admitted: the claims reach both pods, and the API server makes their ResourceClaims from the template
        create(cluster, claiming("claims", claiming_runtime, tenant.ns, 2), as_user=tenant.user)
        built = cluster.wait(lambda: jobset(cluster, "claims", tenant.ns), what="the JobSet")
        pod_spec = built["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert pod_spec["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]
        node = next(c for c in pod_spec["containers"] if c["name"] == "node")
        assert {"name": "gpus"} in node["resources"]["claims"]

        def claims_made() -> list:
            listed = json.loads(cluster.kubectl("get", "resourceclaims", "-n", tenant.ns, "-o", "json"))["items"]
            return listed if len(listed) == 2 else []

        claims = cluster.wait(claims_made, timeout=120, what="one ResourceClaim per trainer pod")
        assert all(c["spec"]["devices"]["requests"][0]["exactly"]["count"] == 8 for c in claims)
        assert cluster.wait(lambda: quota_used(cluster, tenant.ns) == "16", timeout=60, what="the quota counting 16")

        # the quota is the API server's: a claim beyond it is refused whoever makes it
        extra = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "extra", "namespace": tenant.ns},
                 "spec": claim_template("x", tenant.ns, 1)["spec"]["spec"]}
        refused = create_error(cluster, extra)
        assert "exceeded quota" in refused and DEVICES in refused, refused

        # fit counts the claims running jobs hold: one more node waits for the quota, in its own words
        told = fit(cluster, tmp_path, claiming("one-more", claiming_runtime, tenant.ns, 1))
        assert told.stdout.splitlines()[-1].startswith("waits: quota tenant-quota"), \
            (told.stdout + told.stderr, quota_used(cluster, tenant.ns),
             cluster.kubectl("get", "resourcequota,resourceclaims,pods", "-n", tenant.ns, "-o", "wide"))
        assert f"{DEVICES} 16, used 16, this job needs 8" in told.stdout, told.stdout
        assert "claims through DRA: gpu.nvidia.com 8" in told.stdout, told.stdout
    finally:
        remove_tenant(cluster, tenant.spec)
