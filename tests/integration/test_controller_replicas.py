"""Two controller replicas: one leads (Lease), the standby takes over when the leader dies."""

from __future__ import annotations

import json
import sys
import uuid

import pytest

from trainyard.cluster import local
from trainyard.cluster.processes import ProcessSpec, ProcessTable

pytestmark = pytest.mark.integration


def _holder(cluster) -> str | None:
    lease = cluster.kubectl("get", "lease", "-n", "trainyard-system", "trainyard-controller", "-o", "json")
    return json.loads(lease)["spec"].get("holderIdentity")


def test_standby_replica_takes_over_when_the_leader_dies(cluster, tmp_path):
    from builders import EIGHT_GPUS, new_trainjob, torch_runtime
    from test_trainjob_controller import _create_retrying, create, jobset

    paths = local.ClusterPaths.for_name(cluster.name)
    ports = cluster.spec.ports
    standby = ProcessTable(tmp_path)  # the second replica is this test's own process
    standby.start(ProcessSpec("standby-controller", [
        sys.executable, "-m", "trainyard.cli.controller", "run", "--kubeconfig", str(paths.kubeconfig),
        "--lease-namespace", "trainyard-system", f"--metrics-address=127.0.0.1:{ports.base + 35}",
        f"--health-address=127.0.0.1:{ports.base + 36}"]))
    main = ProcessTable(paths.root)
    try:
        leader = cluster.wait(lambda: _holder(cluster), what="a lease holder")
        runtime = f"torch-{uuid.uuid4().hex[:6]}"
        create(cluster, torch_runtime(runtime, gpus=8, queue="default"))
        ns = cluster.namespace("ha")
        main.kill("trainjob-controller")  # the leader (it started first); its webhook goes with it
        cluster.wait(lambda: _holder(cluster) not in (None, leader), timeout=60, what="the standby to take the lease")
        main.restart("trainjob-controller")  # back for admission; it now waits as the standby
        _create_retrying(cluster, new_trainjob("after-failover", runtime, namespace=ns, suspend=True, nodes=2,
                                               per_node=EIGHT_GPUS))  # until admission is back
        assert cluster.wait(lambda: jobset(cluster, "after-failover", ns), timeout=60,
                            what="the new leader to reconcile")
    finally:
        standby.stop_all()

