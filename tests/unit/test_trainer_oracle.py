"""Kubeflow Trainer's own controller as an oracle: its build recipe, out-of-cluster config and webhooks."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainyard.cli.main import app
from trainyard.cluster import controller_configs as configs, spec as s
from trainyard.toolchain import recipes
from trainyard.toolchain.versions import tool


def test_the_recipe_builds_the_controller_and_keeps_the_flux_templates():
    trainer = tool("kubeflow-trainer")
    steps = recipes.steps_for(trainer)
    builds = [step for step in steps if isinstance(step, recipes.GoStep)]
    assert [b.args[-1] for b in builds] == ["github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"]
    assert "-trimpath" in builds[0].args and str(trainer.bin_dir / "trainer-controller-manager") in builds[0].args
    copies = [step.describe() for step in steps if isinstance(step, recipes.PyStep)]
    assert len(copies) == 3 and all(recipes.FLUX_TEMPLATES in c for c in copies)


@pytest.mark.parametrize("value,ok", [("trainyard", True), ("upstream", True), ("kubeflow", False), ("", False)])
def test_trainjob_controller_is_one_of_the_two(value, ok):
    if ok:
        assert s.ClusterSpec(trainjob_controller=value).trainjob_controller == value
    else:
        with pytest.raises(ValueError, match=r"--trainjob-controller .*trainyard, upstream"):
            s.ClusterSpec(trainjob_controller=value)


@pytest.mark.parametrize("base", [26400, 28600, 20000])
def test_trainer_config_listens_on_the_controller_ports_of_the_loopback(base):
    spec = s.ClusterSpec(port_base=base)
    cfg = configs.trainer_config(spec)
    assert cfg["webhook"] == {"port": base + 31, "host": "127.0.0.1"}
    assert cfg["metrics"]["bindAddress"] == f"127.0.0.1:{base + 30}"
    assert cfg["health"]["healthProbeBindAddress"] == f"127.0.0.1:{base + 32}"
    assert cfg["statusServer"] == {"port": base + 33}
    assert {cfg["webhook"]["port"], cfg["statusServer"]["port"]} <= set(spec.ports.all().values())


@pytest.mark.parametrize("field,expected", [
    ("apiVersion", "config.trainer.kubeflow.org/v1alpha1"),
    ("kind", "Configuration"),
    ("leaderElection", {"leaderElect": False}),
    ("certManagement", {"enable": False}),
])
def test_trainer_config_runs_out_of_cluster(field, expected):
    assert configs.trainer_config(s.ClusterSpec())[field] == expected


@pytest.mark.parametrize("gates,expected", [
    ("TrainJobStatus=true", {"TrainJobStatus": False}),
    ("TrainJobStatus=false", {"TrainJobStatus": False}),
    ("", {"TrainJobStatus": False}),
])
def test_trainer_config_turns_off_what_needs_the_in_cluster_token(gates, expected):
    """TrainJobStatus's status server reads the pod's service-account token; out of cluster the manager exits."""
    assert configs.trainer_config(s.ClusterSpec(feature_gates=gates))["featureGates"] == expected


def test_trainer_config_has_only_fields_upstream_decodes():
    """Upstream decodes the file strictly: an unknown field (certDir) would stop the manager."""
    known = {"apiVersion", "kind", "webhook", "leaderElection", "metrics", "health", "controller", "certManagement",
             "clientConnection", "statusServer", "featureGates", "tls"}
    cfg = configs.trainer_config(s.ClusterSpec())
    assert set(cfg) <= known
    assert set(cfg["webhook"]) <= {"port", "host"}


def test_cert_dir_is_controller_runtimes_default_under_tmpdir():
    assert configs.trainer_cert_dir(Path("/c/tmp")) == Path("/c/tmp/k8s-webhook-server/serving-certs")


@pytest.mark.parametrize("doc,ops,expected", [
    ({"a": {"b": 1}}, [{"op": "replace", "path": "/a/b", "value": 2}], {"a": {"b": 2}}),
    ({"w": [{"n": 1}, {"n": 2}]}, [{"op": "add", "path": "/w/1/sel", "value": "x"}],
     {"w": [{"n": 1}, {"n": 2, "sel": "x"}]}),
    ({"l": [1, 2]}, [{"op": "add", "path": "/l/-", "value": 3}], {"l": [1, 2, 3]}),
    ({"l": [1, 2]}, [{"op": "add", "path": "/l/0", "value": 0}], {"l": [0, 1, 2]}),
    ({"m": {"a/b": 1}}, [{"op": "replace", "path": "/m/a~1b", "value": 2}], {"m": {"a/b": 2}}),
])
def test_json_patch(doc, ops, expected):
    before = repr(doc)
    assert configs.json_patch(doc, ops) == expected
    assert repr(doc) == before, "input is not mutated"


def test_json_patch_refuses_what_it_does_not_implement():
    with pytest.raises(ValueError, match="remove"):
        configs.json_patch({"a": 1}, [{"op": "remove", "path": "/a"}])


def _hook(name: str, path: str) -> dict:
    return {"name": name, "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
            "failurePolicy": "Fail"}


def test_upstream_webhooks_are_renamed_selected_and_pointed_at_the_local_manager():
    manifests = [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "mutating-webhook-configuration"}, "webhooks": [_hook("d", "/mutate-x")]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "validating-webhook-configuration"},
         "webhooks": [_hook("v0", "/validate-a"), _hook("v1", "/validate-b")]},
    ]
    selector = {"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["disabled"]}]}
    patches = {
        "MutatingWebhookConfiguration": [{"op": "replace", "path": "/metadata/name", "value": "defaulter.x"}],
        "ValidatingWebhookConfiguration": [{"op": "replace", "path": "/metadata/name", "value": "validator.x"},
                                           {"op": "add", "path": "/webhooks/0/objectSelector", "value": selector}],
    }
    out = configs.trainer_webhook_configurations(manifests, patches, "https://127.0.0.1:9", "Q0E=")
    assert [o["metadata"]["name"] for o in out] == ["defaulter.x", "validator.x"]
    assert out[1]["webhooks"][0]["objectSelector"] == selector and "objectSelector" not in out[1]["webhooks"][1]
    assert [h["clientConfig"] for o in out for h in o["webhooks"]] == [
        {"url": f"https://127.0.0.1:9{p}", "caBundle": "Q0E="} for p in ("/mutate-x", "/validate-a", "/validate-b")]


@pytest.mark.parametrize("args,message", [
    (["--trainjob-controller", "kubeflow"], "--trainjob-controller"),
    (["--trainjob-controller", "upstream", "--bare"], "--trainjob-controller upstream"),
    (["--trainjob-controller", "upstream", "--provider", "kind"], "--trainjob-controller upstream"),
])
def test_cluster_up_refuses_a_bad_trainjob_controller_before_starting(args, message):
    result = CliRunner().invoke(app, ["cluster", "up", "--name", "never-started", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())

