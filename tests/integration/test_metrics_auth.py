"""The controller's /metrics over HTTPS with authentication and authorization (Kubeflow Trainer v2.4,
kubeflow/trainer#3912), decided by the real API server: a TokenReview of the caller's ServiceAccount token and a
SubjectAccessReview against the ClusterRole the platform renders for scrapers."""

from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.request

import pytest

from trainyard.cluster.local import ClusterPaths
from trainyard.controller.runtime.apiserver import ApiServer
from trainyard.controller.runtime.manager import Manager, Settings
from trainyard.platform.controller_objects import METRICS_READER, render_controller_rbac
from trainyard.platform.stack_model import ControllerSpec, MetricsSpec

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(url: str, cafile: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=cafile), timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_metrics_answer_only_scrapers_the_api_server_lets_get_them(cluster):
    ns = cluster.namespace("scrape")
    reader = next(obj for obj in render_controller_rbac(ControllerSpec(metrics=MetricsSpec(auth=True)))
                  if obj["metadata"]["name"] == METRICS_READER)
    cluster.apply(reader)
    for account in ("prometheus", "nosy"):
        cluster.kubectl("create", "serviceaccount", account, "-n", ns)
    cluster.kubectl("create", "clusterrolebinding", f"{ns}-prometheus", f"--clusterrole={METRICS_READER}",
                    f"--serviceaccount={ns}:prometheus")
    token = {account: cluster.kubectl("create", "token", account, "-n", ns).strip() for account in ("prometheus", "nosy")}

    certs = ClusterPaths.for_name(cluster.name).certs
    address = f"127.0.0.1:{free_port()}"
    manager = Manager(ApiServer.from_kubeconfig(cluster.kubeconfig),
                      Settings(leader_elect=False, metrics_address=address, health_address=f"127.0.0.1:{free_port()}",
                               metrics_cert_dir=str(certs), metrics_auth=True))
    manager._start_servers()
    url, ca = f"https://{address}/metrics", str(certs / "ca.crt")

    assert scrape(url, ca)[0] == 401
    assert scrape(url, ca, "not-a-token")[0] == 401
    status, body = scrape(url, ca, token["nosy"])
    assert status == 403 and f"system:serviceaccount:{ns}:nosy" in body, body
    status, body = scrape(url, ca, token["prometheus"])
    assert status == 200 and "# TYPE trainyard_" in body, body[:300]
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # no plain HTTP beside it
        urllib.request.urlopen(f"http://{address}/metrics", timeout=5)
