"""TrainJobStatus (feature gate): pod wiring, the CA ConfigMap, the status server's pure parts, gates."""

import json

import pytest

from trainyard.controller.build import build_objects
from trainyard.controller.feature_gates import parse_feature_gates
from trainyard.controller.plugins.framework import StatusServerConfig
from trainyard.controller.plugins.trainjobstatus import status_path, token_audience
from trainyard.controller.runtime.status_server import (
    InvalidPayload,
    bearer_token,
    failure,
    parse_update,
    review_allows,
    route,
    status_apply_body,
)

from ctl_builders import by_kind, container, env_of, fixed_key, job, rjob, runtime, the_jobset, trainjob

SERVER = StatusServerConfig(base_url="https://status.example:10443", ca_pem="-----BEGIN CERTIFICATE-----\nX\n")
URL = "https://status.example:10443/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status"


def two_container_runtime():
    return runtime(jobs=[job("init", "dataset-initializer", containers=[{"name": "dataset-initializer"}]),
                         job("node", "trainer", containers=[{"name": "node"}, {"name": "sidecar"}])], ml={"torch": {}})


def test_gate_off_changes_nothing():
    off = build_objects(trainjob(), two_container_runtime(), key_generator=fixed_key)
    assert all(o["metadata"]["name"] != "tj-tls-config" for o in off)
    assert "KUBEFLOW_TRAINER_SERVER_URL" not in dict(env_of(container(the_jobset(off), "node")))


def test_every_trainer_container_gets_url_ca_and_token():
    objects = build_objects(trainjob(), two_container_runtime(), key_generator=fixed_key, status_server=SERVER)
    js = the_jobset(objects)
    for name in ("node", "sidecar"):
        c = container(js, "node", name)
        env = dict(env_of(c))
        assert env["KUBEFLOW_TRAINER_SERVER_URL"] == URL
        assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
        assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
        assert {"name": "kubeflow-trainer-token", "mountPath": "/var/run/secrets/kubeflow/trainer", "readOnly": True} in c["volumeMounts"]
    pod = rjob(js, "node")["template"]["spec"]["template"]["spec"]
    (volume,) = pod["volumes"]
    assert volume == {"name": "kubeflow-trainer-token", "projected": {"sources": [
        {"serviceAccountToken": {"audience": "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status",
                                 "expirationSeconds": 3600, "path": "token"}},
        {"configMap": {"name": "tj-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}
    assert "volumes" not in rjob(js, "init")["template"]["spec"]["template"]["spec"]  # only the trainer pod set
    (config_map,) = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"] == "tj-tls-config"]
    assert config_map["data"] == {"ca.crt": SERVER.ca_pem}
    assert config_map["metadata"]["ownerReferences"][0]["controller"] is True


def test_paths_and_audience_match_upstream():
    assert status_path("a", "b") == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs/b/status"
    assert token_audience("a", "b") == "trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs/b/status"


@pytest.mark.parametrize("method,path,expected", [
    ("POST", status_path("ns", "tj"), ("ns", "tj")),
    ("POST", status_path("ns", "tj") + "?x=1", ("ns", "tj")),
    ("GET", status_path("ns", "tj"), "method"),
    ("POST", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj", None),
    ("POST", "/healthz", None),
])
def test_route(method, path, expected):
    assert route(method, path) == expected


@pytest.mark.parametrize("header,token", [("Bearer abc", "abc"), ("bearer abc", "abc"), ("Basic abc", ""),
                                          ("Bearer", ""), (None, ""), ("Bearer a b", "")])
def test_bearer_token(header, token):
    assert bearer_token(header) == token


@pytest.mark.parametrize("body,expected", [
    (b'{"trainerStatus": {"progressPercentage": 42, "metrics": [{"name": "loss", "value": "0.5"}], '
     b'"lastUpdatedTime": "2026-01-01T00:00:00Z", "unknown": 1}}',
     {"trainerStatus": {"progressPercentage": 42, "metrics": [{"name": "loss", "value": "0.5"}],
                        "lastUpdatedTime": "2026-01-01T00:00:00Z"}}),
    (b'{"trainerStatus": null}', {}),
    (b'{}', {}),
    (b'{"trainerStatus": {"estimatedRemainingSeconds": 7}}', {"trainerStatus": {"estimatedRemainingSeconds": 7}}),
])
def test_parse_update_keeps_known_fields(body, expected):
    assert parse_update(body) == expected


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"trainerStatus": 1}', b'{"trainerStatus": {"progressPercentage": "42"}}',
                                  b'{"trainerStatus": {"progressPercentage": 4294967296}}',
                                  b'{"trainerStatus": {"metrics": {"loss": 1}}}',
                                  b'{"trainerStatus": {"metrics": [{"name": "loss", "value": 0.5}]}}',
                                  b'{"trainerStatus": {"lastUpdatedTime": "yesterday"}}'])
def test_parse_update_refuses_what_upstreams_decoder_refuses(body):
    with pytest.raises(InvalidPayload):
        parse_update(body)


AUD = token_audience("ns", "tj")


@pytest.mark.parametrize("status,allowed", [
    ({"authenticated": True, "audiences": [AUD], "user": {"username": "system:serviceaccount:ns:default"}}, True),
    ({"authenticated": True, "audiences": [AUD], "user": {"username": "system:serviceaccount:other:default"}}, False),
    ({"authenticated": True, "audiences": ["https://kubernetes.default.svc"], "user": {"username": "system:serviceaccount:ns:default"}}, False),
    ({"authenticated": True, "audiences": [AUD], "user": {"username": "alice"}}, False),
    ({"authenticated": False, "error": "invalid bearer token"}, False),
])
def test_review_allows_only_the_trainjobs_namespace_and_audience(status, allowed):
    assert review_allows(status, "ns", AUD) is allowed


def test_failure_and_apply_body_shapes():
    assert json.dumps(failure("Forbidden", "Forbidden", 403)) == \
        '{"metadata": {}, "status": "Failure", "message": "Forbidden", "reason": "Forbidden", "code": 403}'
    body = status_apply_body("ns", "tj", {"trainerStatus": {"progressPercentage": 1}})
    assert body == {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                    "metadata": {"name": "tj", "namespace": "ns"}, "status": {"trainerStatus": {"progressPercentage": 1}}}


@pytest.mark.parametrize("text,expected", [
    ("", {"TrainJobStatus": False}),
    ("TrainJobStatus=true", {"TrainJobStatus": True}),
    (" TrainJobStatus=False ,", {"TrainJobStatus": False}),
])
def test_feature_gates(text, expected):
    assert parse_feature_gates(text) == expected


@pytest.mark.parametrize("text,message", [("Flux=true", "unknown feature gate 'Flux'"),
                                          ("TrainJobStatus", "use TrainJobStatus=true"),
                                          ("TrainJobStatus=yes", "use TrainJobStatus=true")])
def test_bad_feature_gates_name_the_fix(text, message):
    with pytest.raises(ValueError, match=message):
        parse_feature_gates(text)
