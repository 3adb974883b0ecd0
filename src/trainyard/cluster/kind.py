"""The kind provider, for machines with a container engine: same labels and GPU capacity as kwok.

kind nodes are real kubelets, so GPU capacity is patched onto node status (the kubelet keeps
extended resources it does not manage only until its next status sync; that is enough for the
scheduling tests, which run right after `up`).
"""

from __future__ import annotations

import json
import shutil
import subprocess

from trainyard.cluster import spec as cluster_spec
from trainyard.cluster.local import ClusterError
from trainyard.cluster.spec import ClusterSpec


def _engine_available() -> bool:
    docker = shutil.which("docker")
    if not docker:
        return False
    return subprocess.run([docker, "info"], capture_output=True).returncode == 0


def kind_config(spec: ClusterSpec) -> dict:
    return {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
            "nodes": [{"role": "control-plane"}] + [{"role": "worker"} for _ in range(spec.nodes)]}


def up(spec: ClusterSpec, echo=print) -> None:
    if not _engine_available() or not shutil.which("kind"):
        raise ClusterError("--provider kind needs a running container engine and the `kind` binary; "
                           "use the default --provider kwok on this machine")
    import yaml

    config = yaml.safe_dump(kind_config(spec))
    subprocess.run(["kind", "create", "cluster", "--name", spec.name, "--config", "-"], input=config, text=True,
                   check=True)
    nodes = json.loads(subprocess.run(["kubectl", "get", "nodes", "-l", "!node-role.kubernetes.io/control-plane",
                                       "-o", "json"], capture_output=True, text=True, check=True).stdout)["items"]
    for index, node in enumerate(nodes):
        desired = cluster_spec.gpu_node(index, spec)
        name = node["metadata"]["name"]
        labels = [f"{k}={v}" for k, v in desired["metadata"]["labels"].items() if k != "kubernetes.io/hostname"]
        subprocess.run(["kubectl", "label", "node", name, "--overwrite", *labels], check=True)
        gpu = {cluster_spec.GPU_RESOURCE: str(spec.gpus_per_node)}
        patch = json.dumps({"status": {"capacity": gpu, "allocatable": gpu}})
        subprocess.run(["kubectl", "patch", "node", name, "--subresource=status", "--type=merge", "-p", patch],
                       check=True)
    echo(f"kind cluster {spec.name!r} has {len(nodes)} GPU-labelled workers")
