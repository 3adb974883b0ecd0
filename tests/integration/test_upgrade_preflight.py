"""`trainyard platform preflight` against the real API server and JobSet's webhook: a later version whose render
differs is stood in for by one more plugin in the build registry (as Kubeflow Trainer v2.4 adds PRTE_MCA_*
variables to MPI launchers), and each verdict is then checked against what that version's own reconcile meets."""

from __future__ import annotations

import json
import types
import uuid

import pytest

from trainyard import k8s as K
from trainyard.capacity.live import connect
from trainyard.controller import k8s as ck
from trainyard.controller.plugins import REGISTRY
from trainyard.controller.runtime.apiserver import api_message
from trainyard.controller.runtime.reconciler import reconcile
from trainyard.controller.runtime.transport import ApiError
from trainyard.upgrade import verdicts as V
from trainyard.upgrade.preflight import status_server_of, survey

from builders import EIGHT_GPUS, new_trainjob, torch_runtime

pytestmark = pytest.mark.integration

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
NEXT_ENV = {"name": "TRAINYARD_NEXT_VERSION", "value": "1"}
NEXT_ANNOTATION = "trainyard.dev/next-version"


def next_version(change: str) -> tuple[types.ModuleType, ...]:
    """The registry of a later version: `env` adds a variable to every trainer container (JobSet refuses that on a
    suspended JobSet), `annotation` adds a pod-template annotation (which JobSet allows)."""
    plugin = types.ModuleType("next_version")

    def enforce_ml_policy(info, ctx) -> None:
        for job in ck.replicated_jobs(info.spec):
            if change == "env":
                for container in ck.pod_spec(job).get("containers") or []:
                    ck.upsert_env(container, [dict(NEXT_ENV)])
            else:
                template = job["template"]["spec"]["template"]
                template.setdefault("metadata", {}).setdefault("annotations", {})[NEXT_ANNOTATION] = "1"

    plugin.enforce_ml_policy = enforce_ml_policy  # type: ignore[attr-defined]
    return (*REGISTRY, plugin)


@pytest.fixture
def long_runtime(cluster):
    """A torch runtime whose simulated pods run ten minutes (kwok's pod-complete delay)."""
    name = f"torch-{uuid.uuid4().hex[:6]}"
    runtime = torch_runtime(name, gpus=8, queue="default")
    pod_template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod_template.setdefault("metadata", {})["annotations"] = {K.KWOK_POD_COMPLETE_DELAY_ANNOTATION: "600s"}
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(runtime))
    yield name
    cluster.kubectl("delete", "clustertrainingruntime", name, "--wait=false")


def jobset(cluster, name, ns):
    return cluster.get_object("jobset.x-k8s.io", "v1alpha2", "jobsets", name, ns)


def running_pods(cluster, ns) -> int:
    return sum(1 for p in cluster.core.list_namespaced_pod(ns).items if p.status.phase == "Running")


def test_preflight_verdicts_hold_against_the_next_versions_own_reconcile(cluster, long_runtime):
    ns = cluster.namespace("upgrade")
    for name, suspend in (("paused", True), ("training", False)):
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(
            new_trainjob(name, long_runtime, namespace=ns, suspend=suspend, nodes=1, per_node=EIGHT_GPUS)))
    cluster.wait(lambda: (jobset(cluster, "paused", ns) or {}).get("spec", {}).get("suspend") is True,
                 what="the suspended JobSet")
    cluster.wait(lambda: running_pods(cluster, ns) == 1, timeout=90, what="the running TrainJob's pod")
    api = connect(cluster.kubeconfig)

    same = {f.name: f for f in survey(api, ns)}
    assert {name: f.verdict for name, f in same.items()} == {"paused": V.UNCHANGED, "training": V.UNCHANGED}, same

    refused = {f.name: f for f in survey(api, ns, plugins=next_version("env"))}
    paused, training = refused["paused"], refused["training"]
    assert paused.verdict == V.CANNOT_RESUME, paused
    assert any(d.endswith(f"env[{NEXT_ENV['name']}] added") for d in paused.differences), paused.differences
    assert paused.refusal and "jobset" in paused.refusal.lower(), paused.refusal
    assert training.verdict == V.KEEPS_RUNNING and training.action, training
    # the promise: the next version's reconcile of the suspended TrainJob is refused with the same words, and
    # the running one's pod is left alone
    def new_controller(name: str, change: str):  # configured as the old one was (its status server)
        trainjob = cluster.get_object(GROUP, VERSION, "trainjobs", name, ns)
        server = status_server_of(api, jobset(cluster, name, ns), trainjob)
        return reconcile(api, ns, name, server, plugins=next_version(change))

    with pytest.raises(ApiError) as raised:
        new_controller("paused", "env")
    assert api_message(raised.value) == paused.refusal
    new_controller("training", "env")
    assert running_pods(cluster, ns) == 1

    allowed = {f.name: f for f in survey(api, ns, plugins=next_version("annotation"))}
    assert allowed["paused"].verdict == V.UPDATED_ON_RESUME, allowed["paused"]
    assert not allowed["paused"].action
    outcome = new_controller("paused", "annotation")
    assert outcome is not None and "JobSet/paused" in outcome.applied
    applied = jobset(cluster, "paused", ns)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert applied["metadata"]["annotations"][NEXT_ANNOTATION] == "1"


def test_preflight_command_exits_1_when_a_trainjob_needs_the_operator(cluster):
    """The command as an operator runs it: the same version blocks nothing; a suspended TrainJob left with neither
    its runtime nor its runtime snapshot cannot be built by any version, and the command says so and exits 1."""
    from typer.testing import CliRunner

    from trainyard.cli.main import app
    from trainyard.controller.snapshot import snapshot_name

    ns = cluster.namespace("preflight")
    runtime = f"torch-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(torch_runtime(runtime, gpus=8, queue="default")))
    trainjob = new_trainjob("orphan", runtime, namespace=ns, suspend=True, nodes=1, per_node=EIGHT_GPUS)
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(trainjob))
    cluster.wait(lambda: jobset(cluster, "orphan", ns), what="the JobSet")
    runner = CliRunner()
    args = ["platform", "preflight", "--kubeconfig", cluster.kubeconfig, "-n", ns]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "nothing blocks the upgrade" in result.output

    cluster.kubectl("delete", "clustertrainingruntime", runtime)
    cluster.kubectl("delete", "configmap", snapshot_name(trainjob), "-n", ns)
    result = runner.invoke(app, [*args, "-o", "json"])
    assert result.exit_code == 1, result.output
    found = json.loads(result.output)["trainjobs"][0]
    assert found["verdict"] == V.CANNOT_BUILD and "not found" in found["refusal"], found
    assert json.loads(result.output)["summary"]["blocking"] == 1
