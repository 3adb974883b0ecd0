"""Every TrainJob in examples/ applied as a tenant user on the deployed local stack runs to completion."""

from __future__ import annotations

import json
import subprocess

import pytest

from trainyard.paths import repo_root

pytestmark = pytest.mark.integration

EXAMPLES = sorted((repo_root() / "examples").glob("*.yaml"))


def kubectl_as_alice(cluster, *args: str) -> subprocess.CompletedProcess:
    from trainyard.cluster.local import ClusterPaths
    from trainyard.toolchain.versions import binary

    return subprocess.run([str(binary("kubectl")), "--kubeconfig", str(ClusterPaths.for_name(cluster.name).kubeconfig),
                           "--as=alice", "--as-group=team-a-users", *args], capture_output=True, text=True)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_to_completion_as_a_tenant_user(platform, cluster, example):
    created = kubectl_as_alice(cluster, "create", "-f", str(example), "-o", "json")
    assert created.returncode == 0, created.stderr
    trainjob = json.loads(created.stdout)
    name, namespace = trainjob["metadata"]["name"], trainjob["metadata"]["namespace"]

    def conditions() -> dict:
        tj = cluster.get_object("trainer.kubeflow.org", "v1alpha1", "trainjobs", name, namespace) or {}
        return {c["type"]: c for c in (tj.get("status") or {}).get("conditions", []) if c["status"] == "True"}

    try:
        done = cluster.wait(lambda: conditions().keys() & {"Complete", "Failed", "ResourcesCreationFailed"} and
                            conditions(), timeout=240, interval=1, what=f"{example.name} to finish")
        assert "Complete" in done, done
        jobset = cluster.get_object("jobset.x-k8s.io", "v1alpha2", "jobsets", name, namespace)
        assert jobset is not None and jobset["metadata"]["ownerReferences"][0]["name"] == name
    finally:
        kubectl_as_alice(cluster, "delete", "trainjob", name, "-n", namespace, "--wait=false")
