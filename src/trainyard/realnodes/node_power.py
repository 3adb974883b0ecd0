"""A node of a local cluster dies and comes back on purpose: the drill that shows what the platform does when a
node is lost with work on it (`trainyard cluster node-down NODE`, `node-up NODE`).

- A real node loses power: its kubelet, its containerd, their shims and every container of its pods are killed
  at once (SIGKILL). Its pods' processes are gone; their API objects stay until the node controller and JobSet
  act. Coming back, containerd and the kubelet start again with their recorded command lines, and the node gets
  its labels and GPU capacity again (a restarting kubelet zeroes extended resources no device plugin of its own
  advertises).
- A simulated node stops being kept alive: kwok manages only nodes labelled `kwok.x-k8s.io/node: fake`, so without
  the label the node's lease is no longer renewed and its pods are no longer run; the label back, kwok takes it
  up again.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Callable

from trainyard.cluster.processes import ProcessTable, pid_alive
from trainyard import k8s as K
from trainyard.cluster.spec import ClusterSpec
from trainyard.cluster.state import ClusterError, ClusterPaths, read_state
from trainyard.cluster.real_node_spec import RealNode
from trainyard.realnodes import host
from trainyard.realnodes.nodes import (DEVICE_PLUGIN_SOCKET, socket_identity, cgroup_empty, containerd_answers,
                                       label_and_wait_ready, process_name, real_nodes, require_root)
from trainyard.toolchain.versions import binary
from trainyard.waiting import wait_for


def _cluster(name: str) -> tuple[ClusterSpec, ClusterPaths]:
    state = read_state(name)
    if not state:
        raise ClusterError(f"cluster {name!r} does not exist; start it with `trainyard cluster up --name {name}`")
    return ClusterSpec(**state["spec"]), ClusterPaths.for_name(name)


def _kubectl(paths: ClusterPaths) -> Callable[..., str]:
    def kc(*args: str, input_text: str | None = None) -> str:
        run = subprocess.run([str(binary("kubectl")), "--kubeconfig", str(paths.kubeconfig), *args],
                             capture_output=True, text=True, input=input_text, timeout=60)
        if run.returncode:
            raise ClusterError(f"kubectl {' '.join(args[:3])}: {run.stderr.strip()}")
        return run.stdout
    return kc


def _real_node(spec: ClusterSpec, paths: ClusterPaths, node: str) -> RealNode | None:
    return next((n for n in real_nodes(spec, paths) if n.name == node), None)


def _simulated_or_refuse(kc: Callable[..., str], node: str, name: str) -> None:
    """A node of the cluster that is not one of its real nodes (those are handled above) must be kwok's."""
    try:
        found = json.loads(kc("get", "node", node, "-o", "json"))
    except ClusterError:
        raise ClusterError(f"cluster {name!r} has no node {node!r} (`kubectl get nodes` lists them)") from None
    if (found["metadata"].get("labels") or {}).get("type") == "real":
        raise ClusterError(f"{node!r} is a real node this cluster did not start; stop its kubelet yourself")


def _target(name: str, node: str, simulated_label: str) -> tuple[ClusterSpec, ClusterPaths, RealNode | None]:
    """The cluster and, for a real node, its processes; a simulated node's label is set (`key=value`) or
    removed (`key-`) here, and None returned for it."""
    spec, paths = _cluster(name)
    real = _real_node(spec, paths, node)
    if real is None:
        kc = _kubectl(paths)
        _simulated_or_refuse(kc, node, name)
        kc("label", "node", node, "--overwrite", simulated_label)
    else:
        require_root()
    return spec, paths, real


def power_off(name: str, node: str, echo: Callable[[str], None] = lambda _: None) -> str:
    """Stop node `node` of cluster `name` as if it died; returns what was done, in words."""
    _, paths, real = _target(name, node, f"{K.KWOK_NODE_LABEL[0]}-")
    if real is None:
        return f"{node}: kwok no longer keeps it alive (its lease expires, its pods stop being run)"
    table = ProcessTable(paths.root)
    for kind in ("kubelet", "containerd"):
        process = process_name(kind, real)
        if pid_alive(table.load().get(process, 0) or 0):
            table.kill(process)
    pids = [*host.processes_matching(str(real.containerd_socket), str(real.run_dir)),
            *host.pids_in_cgroup(real.cgroup_root)]
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, 9)
    wait_for(cgroup_empty(real), 10, f"{real.name}'s processes gone", 0.1, error=None)
    echo(f"killed the kubelet, containerd and {len(pids)} container process(es) of {node}")
    return f"{node}: powered off (kubelet, containerd and its pods' processes killed)"


def power_on(name: str, node: str, echo: Callable[[str], None] = lambda _: None) -> str:
    """Bring node `node` of cluster `name` back; returns what was done, in words, once it is Ready."""
    spec, paths, real = _target(name, node, "=".join(K.KWOK_NODE_LABEL))
    if real is None:
        return f"{node}: kwok keeps it alive again"
    table = ProcessTable(paths.root)
    if pid_alive(table.load().get(process_name("kubelet", real), 0) or 0):
        raise ClusterError(f"{node} is running; `trainyard cluster node-down {node}` first")
    table.restart(process_name("containerd", real))
    if not wait_for(containerd_answers(real), 60, f"containerd of {node}", 0.2, error=None):
        log = table.log_dir / f"{process_name('containerd', real)}.log"
        raise ClusterError(f"containerd of {node} did not start; see {log}")
    before = socket_identity(DEVICE_PLUGIN_SOCKET)
    table.restart(process_name("kubelet", real))
    wait_for(lambda: socket_identity(DEVICE_PLUGIN_SOCKET) not in (None, before), 60,
             f"the kubelet of {node} to bind its device-plugin socket", 0.2, error=None)
    label_and_wait_ready(spec, real, _kubectl(paths), table)
    echo(f"{node} is Ready again with its labels and {spec.gpus_per_node} GPUs")
    return f"{node}: powered on and Ready"
