"""The admission webhook registration: URL mode on the local cluster, Service mode in real clusters."""

import pytest

from trainyard.controller.webhook_configuration import VALIDATE_PATH, webhook_configuration


def test_local_cluster_registration_uses_a_loopback_url():
    cfg = webhook_configuration("Q0E=", url="https://127.0.0.1:26431/")
    (hook,) = cfg["webhooks"]
    assert hook["clientConfig"] == {"caBundle": "Q0E=", "url": "https://127.0.0.1:26431" + VALIDATE_PATH}
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    (rule,) = hook["rules"]
    assert rule["apiGroups"] == ["trainer.kubeflow.org"]
    assert set(rule["resources"]) == {"trainjobs", "trainingruntimes", "clustertrainingruntimes"}
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}


def test_in_cluster_registration_goes_through_the_service():
    cfg = webhook_configuration("Q0E=", service={"name": "trainyard-controller", "namespace": "trainyard-system"})
    assert cfg["webhooks"][0]["clientConfig"]["service"] == {
        "name": "trainyard-controller", "namespace": "trainyard-system", "path": VALIDATE_PATH}


@pytest.mark.parametrize("kwargs", [{}, {"url": "https://x", "service": {"name": "s", "namespace": "n"}}])
def test_exactly_one_destination(kwargs):
    with pytest.raises(ValueError, match="exactly one"):
        webhook_configuration("Q0E=", **kwargs)
