"""Session-scoped local cluster (kwok provider) shared by integration and smoke tests.

Tools that are missing are built, never skipped: the toolchain is part of the product.
The test cluster uses its own name and ports so it coexists with a `make up` cluster.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
import yaml

from trainyard.cluster import local
from trainyard.cluster.spec import ClusterSpec
from trainyard.toolchain.build import ensure_built

TEST_CLUSTER = ClusterSpec(name="trainyard-test", nodes=4, gpus_per_node=8, racks=2, port_base=36600)


class Cluster:
    """Handle on the running test cluster: kubectl and the Python client, both on its kubeconfig."""

    def __init__(self, spec: ClusterSpec):
        from kubernetes import client, config

        self.spec = spec
        self.name = spec.name
        self.kubeconfig = str(local.ClusterPaths.for_name(spec.name).kubeconfig)
        self.api_client = config.new_client_from_config(config_file=self.kubeconfig)
        self.core = client.CoreV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)

    def kubectl(self, *args: str, input_text: str | None = None) -> str:
        return local.kubectl(self.name, *args, input_text=input_text)

    def apply(self, *objects: dict) -> None:
        self.kubectl("apply", "--server-side", "-f", "-", input_text=yaml.safe_dump_all(list(objects)))

    def namespace(self, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        return name

    def wait(self, predicate, timeout: float = 60, interval: float = 0.5, what: str = "condition"):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value {last!r}")


@pytest.fixture(scope="session")
def cluster():
    ensure_built(*local.REQUIRED_TOOLS)
    if local.is_running(TEST_CLUSTER.name):  # a previous run died: start fresh
        local.down(TEST_CLUSTER.name, echo=lambda *_: None)
    local.up(TEST_CLUSTER, echo=lambda *_: None)
    try:
        yield Cluster(TEST_CLUSTER)
    finally:
        if not os.environ.get("TRAINYARD_KEEP_TEST_CLUSTER"):
            local.down(TEST_CLUSTER.name, echo=lambda *_: None)
