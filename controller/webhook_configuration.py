"""The ValidatingWebhookConfiguration that routes trainer.kubeflow.org writes to the controller's webhook server.

Pure: the platform program (in-cluster Service) and the local cluster (a URL on 127.0.0.1, the API server
runs on the host) render it; `runtime/webhook_server.py` serves `VALIDATE_PATH`.
"""

from __future__ import annotations

from trainyard import k8s as K

VALIDATE_PATH = f"/validate-{K.TRAINER_GROUP.replace('.', '-')}-{K.TRAINER_VERSION}"
RESOURCES_VALIDATED = (K.TRAINJOBS, K.TRAININGRUNTIMES, K.CLUSTERTRAININGRUNTIMES)
CONFIGURATION_NAME = "trainyard-trainer-validator"


def webhook_configuration(ca_bundle_b64: str, url: str | None = None, service: dict | None = None) -> dict:
    """The ValidatingWebhookConfiguration that routes trainer.kubeflow.org writes to this server."""
    if bool(url) == bool(service):
        raise ValueError("give exactly one of url (local cluster) or service (in-cluster)")
    client_config: dict = {"caBundle": ca_bundle_b64}
    if url:
        client_config["url"] = url.rstrip("/") + VALIDATE_PATH
    elif service:
        client_config["service"] = {**service, "path": VALIDATE_PATH}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION_NAME},
        "webhooks": [{
            "name": "validator.trainer.trainyard.dev",
            "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "timeoutSeconds": 10, "clientConfig": client_config,
            "rules": [{"apiGroups": [K.TRAINER_GROUP], "apiVersions": ["*"],
                       "operations": ["CREATE", "UPDATE"], "resources": list(RESOURCES_VALIDATED),
                       "scope": "*"}],
        }],
    }
