"""`trainyard down` on a cluster whose real nodes still run pods leaves nothing on the host: no process, mount,
network namespace, veth or bridge, cgroup, firewall rule (kube-proxy's included) or log link, and IP forwarding as
it was before `up` (runs last: see conftest). One node goes down properly (its kubelet stops its pods); the other's
containerd and kubelet are killed first, as in a crash, so `down` must clean up by hand what they left."""

from __future__ import annotations

import json

import pytest

from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable
from trainyard.realnodes.host import IP_FORWARD
from trainyard.realnodes.nodes import leftovers
from trainyard.cluster.real_node_spec import REAL_NODE_LABEL, real_node_name
from realcluster import NAME, REAL_NODES, trainyard
from waiting import wait_for

pytestmark = pytest.mark.integration


def test_down_with_pods_running_leaves_nothing_on_the_host(real_cluster):
    paths = local.ClusterPaths.for_name(NAME)
    sleepers = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sleepers", "namespace": "default"},
                "spec": {"replicas": REAL_NODES, "selector": {"matchLabels": {"app": "sleepers"}},
                         "template": {"metadata": {"labels": {"app": "sleepers"}}, "spec": {
                             "nodeSelector": {REAL_NODE_LABEL: "true"},
                             "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists"}],
                             "containers": [{"name": "sleep", "image": "trainyard.local/training:local",
                                             "command": ["sleep", "3600"]}]}}}}
    assert real_cluster.kubectl("apply", "-f", "-", input_text=json.dumps(sleepers)).returncode == 0

    def running() -> bool:
        pods = real_cluster.items("pods", "-n", "default", "-l", "app=sleepers")
        return len(pods) == REAL_NODES and all(p["status"].get("phase") == "Running" for p in pods)

    wait_for(running, 120, "a running pod on each real node", 1)
    during = leftovers(NAME, paths, REAL_NODES)
    assert during["processes"] and during["mounts"] and during["network_namespaces"] and len(during["links"]) > 1, \
        "the check sees what real nodes make (else an empty result would prove nothing)"
    assert any("kube-proxy" in rule for rule in during["iptables_rules"]), "kube-proxy's nftables table is seen"
    assert IP_FORWARD.read_text().strip() == "1", "Services to pods are forwarded while real nodes run"

    table = ProcessTable(paths.root)
    for process in (f"containerd-{real_node_name(1)}", f"kubelet-{real_node_name(1)}"):
        table.kill(process)  # SIGKILL: the shims and containers of real-node-1 stay behind
    # Only the killed node's namespaces are held still: real-node-0's kubelet may still be tearing down pods of
    # earlier tests (a namespace of its own went away here in CI while this ran).
    killed_node = f"/{real_node_name(1)}/"
    of_killed_node = [ns for ns in during["network_namespaces"] if killed_node in ns]
    assert of_killed_node, during["network_namespaces"]
    still_there = leftovers(NAME, paths, REAL_NODES)["network_namespaces"]
    assert set(of_killed_node) <= set(still_there), "a crashed node's pod namespaces stay behind for down to clean"

    down = trainyard("down", "--name", NAME)
    assert down.returncode == 0, down.stdout + down.stderr
    after = leftovers(NAME, paths, REAL_NODES)
    assert after == {key: [] for key in after}, after
    assert IP_FORWARD.read_text().strip() == real_cluster.ip_forward_before, "down restores IP forwarding"
    assert not local.read_state(NAME)
