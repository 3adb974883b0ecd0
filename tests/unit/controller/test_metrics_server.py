"""The controller's /metrics filter (Kubeflow Trainer v2.4, kubeflow/trainer#3912): who is answered, and the options
that serve it."""

import pytest

from trainyard.controller.runtime.metrics_server import authorize
from trainyard.controller.runtime.run_command import RunOptions, UsageError, check_options

ALICE = {"username": "system:serviceaccount:monitoring:prometheus", "groups": ["system:serviceaccounts"]}


def review(token: str) -> dict:
    return {"authenticated": True, "user": ALICE} if token in ("good", "nosy") else {"authenticated": False}


def access(user: dict) -> bool:
    return user is ALICE and allowed[0]


allowed = [True]


@pytest.mark.parametrize("header, may, status", [
    (None, True, 401),
    ("", True, 401),
    ("Basic Zm9vOmJhcg==", True, 401),
    ("Bearer ", True, 401),
    ("Bearer forged", True, 401),       # the API server does not accept the token
    ("Bearer good", False, 403),         # authenticated, not allowed to get /metrics
    ("Bearer good", True, 200),
    ("bearer good", True, 200),          # the scheme is case-insensitive
])
def test_only_callers_the_api_server_authenticates_and_authorizes_are_answered(header, may, status):
    allowed[0] = may
    verdict = authorize(header, review, access)
    assert verdict.status == status
    if status == 403:
        assert ALICE["username"] in verdict.message and "/metrics" in verdict.message


@pytest.mark.parametrize("options, message", [
    (RunOptions(metrics_secure=True), "--metrics-secure needs --cert-dir"),
    (RunOptions(metrics_auth=True, cert_dir="/certs"), "--metrics-auth needs --metrics-secure"),
])
def test_metrics_options_that_cannot_run_together_are_refused(options, message):
    with pytest.raises(UsageError, match=message):
        check_options(options)


def test_secure_metrics_with_auth_pass_the_option_checks():
    check_options(RunOptions(metrics_secure=True, metrics_auth=True, cert_dir="/certs"))
