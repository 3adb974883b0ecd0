"""Smoke checks of a deployed trainyard environment, from outside, through its kube context (testinfra)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

CRDS = [
    "trainjobs.trainer.kubeflow.org", "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org", "jobsets.jobset.x-k8s.io",
    "queues.scheduling.volcano.sh", "podgroups.scheduling.volcano.sh", "hypernodes.topology.volcano.sh",
]


def get_json(host, environment, *args: str) -> dict:
    out = host.check_output(f"{environment.kubectl()} {' '.join(args)} -o json")
    return json.loads(out)


@pytest.mark.parametrize("crd", CRDS)
def test_crd_is_established_and_served(host, environment, crd):
    obj = get_json(host, environment, "get", "crd", crd)
    conditions = {c["type"]: c["status"] for c in obj["status"]["conditions"]}
    assert conditions.get("Established") == "True"
    assert any(v["served"] for v in obj["spec"]["versions"])
    plural = obj["spec"]["names"]["plural"]
    host.check_output(f"{environment.kubectl()} get {plural}.{obj['spec']['group']} -A -o name")


def test_controllers_are_ready(host, environment):
    """Either Deployments (real clusters) or the local processes (local stack) must be serving."""
    deployments = get_json(host, environment, "get", "deployments", "-A")["items"]
    ours = [d for d in deployments if any(k in d["metadata"]["name"] for k in ("jobset", "volcano", "trainyard"))]
    for dep in ours:
        assert dep["status"].get("readyReplicas", 0) >= 1, dep["metadata"]["name"]
    if not ours:  # local stack: the default queue opened and a probe TrainJob is admitted by our webhook
        webhooks = get_json(host, environment, "get", "validatingwebhookconfigurations")["items"]
        assert any("trainyard" in w["metadata"]["name"] for w in webhooks)
    assert get_json(host, environment, "get", "queue", "default")["status"]["state"] == "Open", "Volcano queue controller"


def test_each_tenant_has_quota_open_queue_and_runtimes(host, environment):
    assert environment.tenants, "the stack declares tenants"
    for tenant in environment.tenants:
        ns, queue = tenant.namespace, tenant.queue.name
        quotas = get_json(host, environment, "get", "resourcequota", "-n", ns)["items"]
        assert any("requests.nvidia.com/gpu" in q["spec"]["hard"] for q in quotas), ns
        q = get_json(host, environment, "get", "queue", queue)
        assert q["status"]["state"] == "Open", queue
        runtimes = get_json(host, environment, "get", "trainingruntimes", "-n", ns)["items"]
        assert runtimes and all(r["metadata"]["labels"]["trainyard.dev/catalog-version"] == tenant.catalog_version
                                for r in runtimes)
        rolebindings = get_json(host, environment, "get", "rolebindings", "-n", ns)["items"]
        assert rolebindings, f"{ns} has RBAC for its groups"
