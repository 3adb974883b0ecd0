"""The admission webhook serves the API server alone (client-certificate authentication of the API server): a
client that reaches its port without the API server's certificate learns nothing, however it presents itself (no
certificate, one from another CA, a tenant's token); the API server's own calls are still answered. And what the
platform's loops write on a TrainJob, no tenant writes."""

from __future__ import annotations

import http.client
import json
import ssl
import uuid

import pytest

from trainyard.cluster import certs, local
from trainyard.cluster.local import ClusterError
from trainyard.k8s import RECLAIMED_FOR_ANNOTATION
from trainyard.controller.webhook_configuration import VALIDATE_PATH

from builders import new_trainjob, tenant_spec
from tenant_helpers import add_tenant, create, create_error, remove_tenant

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


def test_a_tenant_cannot_write_the_reclaim_loops_note(cluster, shared, catalog_runtime):
    """Only the controller (the identity the webhook learns from the API server at start) writes
    trainyard.dev/reclaimed-for: a forged note used to stop reclaim cluster-wide."""
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        noted = new_trainjob("noted", catalog_runtime, namespace=tenant.ns, nodes=1, suspend=True)
        noted["metadata"]["annotations"] = {RECLAIMED_FOR_ANNOTATION: f"{tenant.ns}/ghost 1700000000"}
        refused = create_error(cluster, noted, as_user=tenant.user)
        assert RECLAIMED_FOR_ANNOTATION in refused and "reclaim loop only" in refused, refused
        create(cluster, new_trainjob("plain", catalog_runtime, namespace=tenant.ns, nodes=1, suspend=True),
               as_user=tenant.user)
        with pytest.raises(ClusterError, match="reclaim loop only"):
            cluster.kubectl("annotate", "trainjob", "plain", "-n", tenant.ns, f"{RECLAIMED_FOR_ANNOTATION}=x",
                            f"--as={tenant.user[0]}", f"--as-group={tenant.user[1]}")
        cluster.kubectl("annotate", "trainjob", "plain", "-n", tenant.ns, "team-note=fine",
                        f"--as={tenant.user[0]}", f"--as-group={tenant.user[1]}")  # other annotations stay the user's
    finally:
        remove_tenant(cluster, tenant.spec)
