"""Services on real nodes, as in any cluster: a pod reaches another pod through a ClusterIP Service by its DNS
name (CoreDNS, kube-proxy), and the API server through the `kubernetes` Service with its service-account token,
verifying the serving certificate against the cluster CA it was given."""

from __future__ import annotations

import ipaddress
import json

import pytest

from trainyard.cluster.real_node_spec import REAL_NODE_LABEL, SERVICE_CIDR, real_node_name
from trainyard.toolchain.versions import tool
from waiting import wait_for

pytestmark = pytest.mark.integration

NAMESPACE = "real-services"
IMAGE = "trainyard.local/training:local"
CLIENT = """
import json, os, ssl, time, urllib.request
for attempt in range(60):  # the server pod may still be starting
    try:
        print("service says", urllib.request.urlopen("http://echo/index.html", timeout=5).read().decode().strip())
        break
    except OSError as exc:
        time.sleep(1)
account = "/var/run/secrets/kubernetes.io/serviceaccount"
request = urllib.request.Request(
    f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}/version",
    headers={"Authorization": "Bearer " + open(account + "/token").read()})
context = ssl.create_default_context(cafile=account + "/ca.crt")
print("apiserver", json.load(urllib.request.urlopen(request, context=context, timeout=10))["gitVersion"])
"""


def pod(name: str, node: str, command: list[str], labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                     "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": IMAGE, "command": command}]}}


@pytest.fixture
def services_namespace(real_cluster):
    real_cluster.kubectl("create", "namespace", NAMESPACE)
    yield
    real_cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false")


def test_pods_reach_a_service_and_the_api_server_by_clusterip(real_cluster, services_namespace):
    server = pod("echo", real_node_name(0), ["sh", "-c", "echo hello-from-$(hostname) > /tmp/index.html && "
                                             "cd /tmp && exec python3 -m http.server 8080"], {"app": "echo"})
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": NAMESPACE},
               "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    client = pod("client", real_node_name(1), ["python3", "-c", CLIENT])
    for document in (server, service, client):
        created = real_cluster.kubectl("create", "-f", "-", input_text=json.dumps(document))
        assert created.returncode == 0, created.stderr

    def finished() -> str | None:
        phase = (real_cluster.get("pod", "client", NAMESPACE) or {}).get("status", {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = wait_for(finished, 120, "the client pod finished", 1)
    output = real_cluster.kubectl("logs", "-n", NAMESPACE, "client").stdout
    assert phase == "Succeeded", output
    cluster_ip = real_cluster.get("service", "echo", NAMESPACE)["spec"]["clusterIP"]
    assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network(SERVICE_CIDR), cluster_ip
    assert "service says hello-from-echo" in output, output
    assert f"apiserver {tool('kubernetes').version}" in output, output
