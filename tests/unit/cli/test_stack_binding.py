"""A local-controllers stack is bound to one local cluster without rewriting the reviewed stack file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainyard import stack_deploy
from trainyard.cluster.spec import ClusterSpec
from trainyard.paths import repo_root


def _state(name: str, base: int) -> dict:
    spec = ClusterSpec(name=name, port_base=base)
    return {"name": name, "kubeconfig": f"/cache/clusters/{name}/kubeconfig.yaml", "ports": spec.ports.all()}


@pytest.mark.parametrize("name,base", [("trainyard", 26400), ("trainyard-e2e", 27400), ("x", 20000)])
def test_binding_takes_every_cluster_specific_value_from_the_cluster(name, base):
    document = stack_deploy.read_stack_file("local")
    bound = stack_deploy.bind_to_local_cluster(document, _state(name, base), Path(f"/cache/clusters/{name}/certs"))
    config = bound["config"]
    assert config["trainyard:kubeconfig"] == f"/cache/clusters/{name}/kubeconfig.yaml"
    assert config["trainyard:kubeContext"] == f"kwok-{name}"
    assert config["trainyard:controller"]["webhook"] == {
        **document["config"]["trainyard:controller"]["webhook"],
        "url": f"https://127.0.0.1:{base + 31}", "caBundleFile": f"/cache/clusters/{name}/certs/ca.crt"}
    unchanged = {k: v for k, v in config.items() if k not in ("trainyard:kubeconfig", "trainyard:kubeContext",
                                                               "trainyard:controller")}
    assert unchanged == {k: v for k, v in document["config"].items() if k in unchanged}
    assert bound["encryptionsalt"] == document["encryptionsalt"], "the stack's own salt: no new secrets provider"


def test_binding_does_not_modify_the_stack_document():
    document = stack_deploy.read_stack_file("local")
    before = yaml.safe_dump(document)
    stack_deploy.bind_to_local_cluster(document, _state("other", 27000), Path("/c"))
    assert yaml.safe_dump(document) == before


def test_the_default_binding_equals_the_committed_local_stack():
    """stacks/Pulumi.local.yaml names the default cluster's values, so a reader sees what `make up` deploys."""
    document = stack_deploy.read_stack_file("local")
    state = _state("trainyard", ClusterSpec().port_base)
    state["kubeconfig"] = str(Path(document["config"]["trainyard:kubeconfig"]))
    certs = Path(document["config"]["trainyard:controller"]["webhook"]["caBundleFile"]).parent
    assert stack_deploy.bind_to_local_cluster(document, state, certs) == document


@pytest.mark.parametrize("stack,local", [("local", True), ("dev", False), ("prod", False)])
def test_which_stacks_run_their_controllers_locally(stack, local):
    assert stack_deploy.runs_controllers_locally(stack_deploy.read_stack_file(stack)) is local


def test_an_unknown_stack_names_the_known_ones():
    with pytest.raises(stack_deploy.StackError, match=r"no stack file .*Pulumi\.nope\.yaml; known stacks: .*local"):
        stack_deploy.read_stack_file("nope")


def test_pulumi_arguments_name_the_stack_and_its_config_file():
    target = stack_deploy.StackTarget("local", Path("/c/Pulumi.local.yaml"), Path("/c/state"))
    assert target.pulumi_args("up") == ["up", "--yes", "--non-interactive", "--skip-preview", "--parallel=128",
                                        "--stack", "local", "--config-file", "/c/Pulumi.local.yaml"]
    assert target.pulumi_args("preview", ["--diff"])[-1] == "--diff"
    assert repo_root().joinpath("stacks", "Pulumi.local.yaml") == stack_deploy.stack_file("local")


CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
WEBHOOK = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainingRuntime"
SINCE = "2026-11-26T08:17:00Z"


@pytest.mark.parametrize("resource, refreshed", [
    ({"type": CRD, "created": "2026-11-26T08:17:01.380963159Z", "modified": "2026-11-26T08:17:01.380963159Z"}, True),
    ({"type": CRD, "created": "2026-11-26T08:10:00Z", "modified": "2026-11-26T08:17:49.64766473Z"}, True),
    ({"type": WEBHOOK, "created": "2026-11-26T08:17:00Z"}, True),
    ({"type": CRD, "created": "2026-11-26T08:10:00Z", "modified": "2026-11-26T08:16:59.999999999Z"}, False),
    ({"type": CRD}, False),
    ({"type": CRD, "modified": "2026-11-26T08:18:00Z", "delete": True}, False),
    ({"type": RUNTIME, "created": "2026-11-26T08:18:00Z", "modified": "2026-11-26T08:18:00Z"}, False),
], ids=["created by this up", "changed by this up", "created at the instant the up started", "untouched",
        "no timestamps", "pending deletion", "not an adoptable kind"])
def test_the_refresh_after_up_reads_back_only_adoptable_objects_the_up_touched(resource, refreshed):
    import datetime as dt

    urn = f"urn:pulumi:local::trainyard::{resource['type']}::x"
    since = dt.datetime.fromisoformat(SINCE)
    assert stack_deploy.adopted_urns([{**resource, "urn": urn}], since) == ([urn] if refreshed else [])
