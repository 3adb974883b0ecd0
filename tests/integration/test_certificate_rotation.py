"""The webhook server reloads its certificate when the files change (cert-manager renewing a Secret):
rotate the files under a running controller process, move the CA bundle as cert-manager's injector
would, and a TrainJob create still succeeds through it."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import sys
import uuid

import pytest

from trainyard.cluster import certs, local
from trainyard.cluster.processes import ProcessSpec, ProcessTable, wait_for_port
from trainyard.controller.webhook_configuration import webhook_configuration

from builders import new_trainjob, torch_runtime

pytestmark = pytest.mark.integration

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"


def served_certificate(port: int) -> str:
    return ssl.get_server_certificate(("127.0.0.1", port))


def registration(name: str, port: int, ca_pem: bytes, namespace: str) -> dict:
    """This controller's webhook, for one namespace only, so the rest of the cluster is unaffected."""
    config = webhook_configuration(certs.ca_bundle(ca_pem), url=f"https://127.0.0.1:{port}")
    config["metadata"]["name"] = name
    hook = config["webhooks"][0]
    hook["name"] = f"{name}.trainyard.dev"
    hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return config


def test_a_renewed_certificate_is_served_without_a_restart(cluster, tmp_path):
    ns, name = cluster.namespace("certs"), f"rotation-{uuid.uuid4().hex[:6]}"
    port = cluster.spec.ports.base + 37
    cert_dir, renewed = tmp_path / "certs", tmp_path / "renewed"
    first_ca = certs.write_serving_pair(cert_dir, "first")
    runtime = f"rot-{uuid.uuid4().hex[:6]}"
    cluster.apply(torch_runtime(runtime, volcano=False, image="pytorch/pytorch:2.7.1", command=("torchrun", "t.py")))
    table = ProcessTable(tmp_path / "proc")  # a standby replica: it serves admission, the leader reconciles
    table.start(ProcessSpec("rotating-controller", [
        sys.executable, "-m", "trainyard.cli.controller", "run",
        "--kubeconfig", str(local.ClusterPaths.for_name(cluster.name).kubeconfig),
        "--lease-namespace", "trainyard-system", f"--webhook-address=127.0.0.1:{port}", "--cert-dir", str(cert_dir),
        f"--metrics-address=127.0.0.1:{cluster.spec.ports.base + 38}",
        f"--health-address=127.0.0.1:{cluster.spec.ports.base + 39}"]))
    try:
        assert wait_for_port(port, 60), "the second replica's webhook listens"
        cluster.apply(registration(name, port, first_ca, ns))
        cluster.kubectl("create", "-n", ns, "-f", "-",
                        input_text=json.dumps(new_trainjob("before", runtime, suspend=True)))
        before = served_certificate(port)

        new_ca = certs.write_serving_pair(renewed, "second")
        for file in ("tls.key", "tls.crt", "ca.crt"):  # as the kubelet updates a mounted Secret: file by file
            shutil.copy(renewed / file, cert_dir / f".{file}.new")
            (cert_dir / f".{file}.new").replace(cert_dir / file)
        cluster.apply(registration(name, port, new_ca, ns))  # cert-manager's CA injector
        hook = json.loads(cluster.kubectl("get", "validatingwebhookconfiguration", name, "-o", "json"))
        assert base64.b64decode(hook["webhooks"][0]["clientConfig"]["caBundle"]) == new_ca

        after = cluster.wait(lambda: (lambda pem: pem if pem != before else None)(served_certificate(port)),
                             timeout=30, what="the renewed certificate to be served")
        assert ssl.PEM_cert_to_DER_cert(after) == ssl.PEM_cert_to_DER_cert((renewed / "tls.crt").read_text()), \
            "the server presents exactly the renewed certificate"
        # Only a reloaded server passes: the API server now trusts the new CA alone.
        cluster.kubectl("create", "-n", ns, "-f", "-",
                        input_text=json.dumps(new_trainjob("after", runtime, suspend=True)))
        assert cluster.get_object(GROUP, VERSION, "trainjobs", "after", ns) is not None
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found")
        table.stop_all()
