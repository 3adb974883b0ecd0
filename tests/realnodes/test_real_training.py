"""Real training on real nodes: the example TrainJob a tenant submits runs torch across two kubelets, and what
the platform promises about real nodes (GPU labels and capacity like the simulated nodes, a taint that keeps
simulated workloads off them, logs and exec through the API server) holds."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from trainyard.k8s import GPU_RESOURCE, RACK_LABEL, SPINE_LABEL
from trainyard.paths import repo_root
from trainyard.cluster.real_node_spec import REAL_NODE_LABEL, real_node_name
from trainyard.toolchain.versions import tool
from realcluster import REAL_NODES
from waiting import wait_for

pytestmark = pytest.mark.integration

ALICE = ("alice", "team-a-users")
EXAMPLE = repo_root() / "examples" / "real-torch-team-a.yaml"


def submit(cluster, document: dict | None = None) -> str:
    """Create a TrainJob as alice (the example file unless `document` is given); returns its name."""
    text = yaml.safe_dump(document) if document else EXAMPLE.read_text()
    created = cluster.kubectl("create", "-f", "-", "-o", "name", user=ALICE, input_text=text)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip().split("/")[-1]


def terminal(cluster, name: str) -> dict | None:
    """The TrainJob's terminal condition (Complete or Failed), or None."""
    trainjob = cluster.get("trainjobs.trainer.kubeflow.org", name, "team-a") or {}
    return next((c for c in (trainjob.get("status") or {}).get("conditions", [])
                 if c["type"] in ("Complete", "Failed") and c["status"] == "True"), None)


def finished(cluster, name: str, timeout: float) -> dict:
    """The TrainJob's terminal condition once it has one; on timeout, what the cluster shows of it."""
    condition = wait_for(lambda: terminal(cluster, name), timeout, f"TrainJob {name} to finish", 2, error=None)
    assert condition, f"TrainJob {name} did not finish in {timeout:.0f} s:\n{where_it_stands(cluster, name)}"
    return condition


def where_it_stands(cluster, name: str) -> str:
    """The TrainJob's conditions, its PodGroup's phase and conditions, its pods' phases, nodes and container states,
    and the namespace's last events: what a timeout in CI must leave behind to be understood."""
    trainjob = cluster.get("trainjobs.trainer.kubeflow.org", name, "team-a") or {}
    group = cluster.get("podgroups.scheduling.volcano.sh", name, "team-a") or {}
    lines = [f"trainjob conditions: {json.dumps((trainjob.get('status') or {}).get('conditions'))}",
             f"podgroup: {json.dumps(group.get('status'))}"]
    for pod in pods_of(cluster, name):
        status = pod.get("status") or {}
        lines.append(f"pod {pod['metadata']['name']} on {pod['spec'].get('nodeName')}: {status.get('phase')} "
                     f"{json.dumps([c.get('state') for c in status.get('containerStatuses') or []])}")
    events = sorted(cluster.items("events", "-n", "team-a"), key=lambda e: e.get("lastTimestamp") or "")[-25:]
    lines += [f"event {e.get('lastTimestamp')} {e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')} "
              f"{e.get('reason')}: {e.get('message')}" for e in events]
    return "\n".join(lines)


def pods_of(cluster, name: str) -> list[dict]:
    return cluster.items("pods", "-n", "team-a", "-l", f"jobset.sigs.k8s.io/jobset-name={name}")


def logs(cluster, pod: str, namespace: str = "team-a", missing_ok: bool = False) -> str | None:
    """The pod's log; None if it is gone, or its container has not started yet, and `missing_ok`."""
    out = cluster.kubectl("logs", "-n", namespace, pod)
    if missing_ok and out.returncode and ("NotFound" in out.stderr or "is waiting to start" in out.stderr):
        return None
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_real_nodes_join_with_the_simulated_nodes_gpu_shape(real_cluster):
    nodes = {n["metadata"]["name"]: n for n in real_cluster.items("nodes")}
    simulated = nodes["gpu-node-0"]
    for index in range(REAL_NODES):
        node = nodes[real_node_name(index)]
        labels, status = node["metadata"]["labels"], node["status"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True" and ready["reason"] == "KubeletReady", "a real kubelet, not kwok"
        assert status["nodeInfo"]["kubeletVersion"] == tool("kube-node").version
        assert status["nodeInfo"]["containerRuntimeVersion"] == f"containerd://{tool('containerd').version.lstrip('v')}"
        assert status["capacity"][GPU_RESOURCE] == simulated["status"]["capacity"][GPU_RESOURCE]
        for key in ("nvidia.com/gpu.product", "nvidia.com/gpu.present", "topology.kubernetes.io/zone"):
            assert labels[key] == simulated["metadata"]["labels"][key], key
        assert labels[RACK_LABEL].startswith("rack-") and labels[SPINE_LABEL].startswith("spine-")
        assert {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
        address = next(a["address"] for a in status["addresses"] if a["type"] == "InternalIP")
        assert address.startswith("10.244."), "the kubelet serves on its bridge address"
    # node allocatable is reserved: the real nodes' pods together get their share of the host, not each all of it
    from trainyard.k8s import parse_quantity
    from trainyard.realnodes.nodes import host_memory_bytes
    from trainyard.cluster.real_node_spec import POD_MEMORY_SHARE

    offered = sum(parse_quantity(nodes[real_node_name(i)]["status"]["allocatable"]["memory"]) for i in range(REAL_NODES))
    assert offered <= POD_MEMORY_SHARE * host_memory_bytes(), (offered, host_memory_bytes())


def test_the_real_torch_example_trains_across_two_real_nodes(real_cluster):
    """examples/real-torch-team-a.yaml as alice: a Volcano gang in team-a's queue, one pod per real node,
    torchrun rendezvous at the controller's PET_MASTER_ADDR, the all-reduce right, the loss going down."""
    name = submit(real_cluster)
    condition = finished(real_cluster, name, 300)
    pods = pods_of(real_cluster, name)
    assert condition["type"] == "Complete", (condition, [p["status"].get("containerStatuses") for p in pods])
    podgroup = real_cluster.get("podgroups.scheduling.volcano.sh", name, "team-a")
    assert podgroup["spec"]["queue"] == "team-a" and podgroup["spec"]["minMember"] == 2
    assert sorted(p["spec"]["nodeName"] for p in pods) == [real_node_name(i) for i in range(REAL_NODES)]
    for pod in pods:
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["PET_MASTER_ADDR"] == f"{name}-node-0-0.{name}", "JobSet's headless-service name of node 0"
        assert pod["spec"]["schedulerName"] == "volcano"
        text = logs(real_cluster, pod["metadata"]["name"])
        assert re.findall(r"^allreduce ok world_size=(\d+)$", text, re.M) == ["4"], text[-2000:]
        losses = [float(x) for x in re.findall(r"^step \d+ loss ([\d.]+)$", text, re.M)]
        final = float(re.search(r"^final loss ([\d.]+)$", text, re.M).group(1))
        assert len(losses) >= 5 and final == losses[-1] and final < losses[0] / 10, text[-2000:]
    print(f"\nreal torch example: {condition['lastTransitionTime']} "
          f"({json.dumps([p['spec']['nodeName'] for p in pods])})")


def test_logs_and_exec_reach_real_pods_through_the_api_server(real_cluster):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "default"},
           "spec": {"nodeSelector": {REAL_NODE_LABEL: "true"},
                    "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "probe", "image": "trainyard.local/training:local",
                                    "command": ["sh", "-c", "echo hello from $(hostname); sleep 300"],
                                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                                  "limits": {"cpu": "100m", "memory": "128Mi"}}}]}}
    created = real_cluster.kubectl("create", "-f", "-", input_text=json.dumps(pod))  # tenants create no bare pods
    assert created.returncode == 0, created.stderr
    try:
        wait_for(lambda: (real_cluster.get("pod", "probe", "default") or {}).get("status", {}).get("phase") == "Running",
                 120, "the probe pod running", 1)
        assert "hello from probe" in logs(real_cluster, "probe", "default")
        out = real_cluster.kubectl("exec", "-n", "default", "probe", "--", "getent", "hosts",
                                   "kubernetes.default.svc.cluster.local")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split()[0] == "10.0.0.1", "cluster DNS answers for Services"
        outside = real_cluster.kubectl("exec", "-n", "default", "probe", "--", "getent", "hosts", "example.com")
        assert outside.returncode != 0, "no upstream DNS: names outside the cluster do not resolve"
    finally:
        real_cluster.kubectl("delete", "pod", "probe", "-n", "default", "--wait=false")
