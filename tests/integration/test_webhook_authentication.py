"""The admission webhook serves the API server alone (client-certificate authentication of the API server): a
client that reaches its port without the API server's certificate learns nothing, however it presents itself (no
certificate, one from another CA, a tenant's token); the API server's own calls are still answered."""

from __future__ import annotations

import http.client
import json
import ssl
import uuid

import pytest

from trainyard.cluster import certs, local
from trainyard.controller.webhook_configuration import VALIDATE_PATH

from builders import new_trainjob
from tenant_helpers import create_error

pytestmark = pytest.mark.integration


def review(namespace: str) -> bytes:
    """A TrainJob AdmissionReview whose answer would say whether runtime `secret-runtime` exists."""
    tj = new_trainjob("probe", "secret-runtime", "TrainingRuntime", namespace=namespace, nodes=1)
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1",
                                                                   "kind": "TrainJob"}, "object": tj}}).encode()


def post(cluster, body: bytes, cert: tuple | None = None, token: str | None = None) -> int:
    """The HTTP status of a POST to the webhook (raises when the TLS handshake is refused)."""
    paths = local.ClusterPaths.for_name(cluster.name)
    context = ssl.create_default_context(cafile=str(paths.certs / "ca.crt"))
    if cert:
        context.load_cert_chain(*map(str, cert))
    connection = http.client.HTTPSConnection("127.0.0.1", cluster.spec.ports.port("controller_webhook"),
                                             context=context, timeout=10)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        connection.request("POST", VALIDATE_PATH, body=body, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


REFUSED = (ssl.SSLError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)


def test_only_the_api_servers_client_certificate_is_answered(cluster, tmp_path):
    ns = cluster.namespace("hook")
    body = review(ns)
    with pytest.raises(REFUSED):
        post(cluster, body)  # no client certificate
    _, other_cert, other_key = certs.write_client_pair(tmp_path / "other", "kube-apiserver-webhook-client", ())
    with pytest.raises(REFUSED):
        post(cluster, body, cert=(other_cert, other_key))  # the right name, another CA
    cluster.kubectl("create", "serviceaccount", "tenant", "-n", ns)
    token = cluster.kubectl("create", "token", "tenant", "-n", ns).strip()
    with pytest.raises(REFUSED):
        post(cluster, body, token=token)  # a tenant's token is no client certificate
    client = local.ClusterPaths.for_name(cluster.name).certs / "webhook-client"
    assert post(cluster, body, cert=(client / "client.crt", client / "client.key")) == 200
    # and the API server's calls go through: a TrainJob on a runtime that does not exist is refused by the webhook
    refused = create_error(cluster, new_trainjob("probe", "secret-runtime", "TrainingRuntime", namespace=ns, nodes=1))
    assert "denied the request" in refused and "secret-runtime" in refused, refused
