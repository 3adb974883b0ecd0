"""NetworkPolicy on real nodes: the platform's default deny keeps another namespace's pods out, its own pods in,
and a policy that opens one port from one namespace opens that port only (the local enforcer,
`realnodes.network_policy`, compiles them to nftables); without a policy, everything passes."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from trainyard.platform.tenant_objects import render_default_deny
from trainyard.cluster.real_node_spec import REAL_NODE_LABEL, real_node_name
from waiting import wait_for

from builders import tenant_spec

pytestmark = pytest.mark.integration

SERVER_NS, CLIENT_NS = "np-server", "np-client"
IMAGE = "trainyard.local/training:local"
SERVE = "cd /tmp && (python3 -m http.server 8080 & exec python3 -m http.server 8081)"
PROBE = """
import socket, sys, time
for attempt in range(3):
    results = []
    for port in (8080, 8081):
        try:
            socket.create_connection((sys.argv[1], port), timeout=3).close()
            results.append(f"{port}:open")
        except OSError:
            results.append(f"{port}:closed")
    print(" ".join(results), flush=True)
    time.sleep(1)
"""


def pod(name: str, namespace: str, node: str, command: list[str], labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                     "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": IMAGE, "command": command}]}}


def create(real_cluster, document: dict) -> None:
    created = real_cluster.kubectl("create", "-f", "-", input_text=json.dumps(document))
    assert created.returncode == 0, created.stderr


@pytest.fixture
def server(real_cluster):
    for namespace in (SERVER_NS, CLIENT_NS):
        real_cluster.kubectl("create", "namespace", namespace)
    create(real_cluster, pod("server", SERVER_NS, real_node_name(0), ["sh", "-c", SERVE], {"app": "server"}))
    ip = wait_for(lambda: (real_cluster.get("pod", "server", SERVER_NS) or {}).get("status", {}).get("podIP"), 120,
                  "the server pod's address", 1)
    yield ip
    for namespace in (SERVER_NS, CLIENT_NS):
        real_cluster.kubectl("delete", "namespace", namespace, "--wait=false")


def probe(real_cluster, name: str, namespace: str, ip: str) -> str:
    """The last line the probe printed: which of the server's ports it could connect to."""
    create(real_cluster, pod(name, namespace, real_node_name(1), ["python3", "-c", PROBE, ip]))

    def finished() -> str | None:
        phase = (real_cluster.get("pod", name, namespace) or {}).get("status", {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    assert wait_for(finished, 120, f"probe {name} finished", 1) == "Succeeded"
    return real_cluster.kubectl("logs", "-n", namespace, name).stdout.strip().splitlines()[-1]


def test_default_deny_keeps_other_namespaces_out_and_an_opened_port_lets_one_in(real_cluster, server):
    assert probe(real_cluster, "before", CLIENT_NS, server) == "8080:open 8081:open"  # no policy: all pass
    deny = render_default_deny(replace(tenant_spec(), namespace=SERVER_NS))
    create(real_cluster, deny)
    wait_for(lambda: probe(real_cluster, f"denied-{uuid.uuid4().hex[:4]}", CLIENT_NS, server)
             == "8080:closed 8081:closed", 60, "the default deny enforced", 1)
    assert probe(real_cluster, "inside", SERVER_NS, server) == "8080:open 8081:open"  # its own namespace: in
    create(real_cluster, {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                          "metadata": {"name": "open-8081", "namespace": SERVER_NS},
                          "spec": {"podSelector": {"matchLabels": {"app": "server"}}, "ingress": [{
                              "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": CLIENT_NS}}}],
                              "ports": [{"port": 8081}]}]}})
    wait_for(lambda: probe(real_cluster, f"opened-{uuid.uuid4().hex[:4]}", CLIENT_NS, server)
             == "8080:closed 8081:open", 60, "port 8081 opened to the client namespace", 1)
