"""Kubeflow Trainer's own trainer-controller-manager as the oracle: `cluster up --trainjob-controller upstream`
runs it out of cluster (its own small cluster), and it builds a TrainJob's JobSet and Volcano PodGroup."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trainyard.cli.main import app
from trainyard.cluster import local
from trainyard.cluster.local import ClusterError
from trainyard.cluster.processes import ProcessTable, pid_alive, port_in_use
from trainyard.toolchain.build import ensure_built
from builders import EIGHT_GPUS, new_trainjob, torch_runtime
from waiting import wait_for

pytestmark = pytest.mark.integration

NAME, BASE = "trainyard-upstream", 28600
RUNTIME = torch_runtime("oracle-torch-volcano", queue="default")


def kubectl(*args: str, input_text: str | None = None) -> str:
    return local.kubectl(NAME, *args, input_text=input_text)


def owned_by(kind_plural: str, trainjob_name: str) -> dict | None:
    """The object of `kind_plural` in the test namespace whose controller is the TrainJob."""
    items = json.loads(kubectl("get", kind_plural, "-n", "oracle", "-o", "json"))["items"]
    for item in items:
        refs = item["metadata"].get("ownerReferences") or []
        if any(r["kind"] == "TrainJob" and r["name"] == trainjob_name and r.get("controller") for r in refs):
            return item
    return None


def test_upstream_controller_builds_jobset_and_podgroup_and_its_webhook_refuses_unknown_runtimes():
    ensure_built(*local.REQUIRED_TOOLS, "kubeflow-trainer")
    runner = CliRunner()
    pids: dict[str, int] = {}
    try:
        result = runner.invoke(app, ["cluster", "up", "--name", NAME, "--port-base", str(BASE), "--nodes", "2",
                                     "--racks", "1", "--trainjob-controller", "upstream"])
        assert result.exit_code == 0, result.output
        assert "trainjob controller: upstream" in result.output
        assert local.read_state(NAME)["trainjob_controller"] == "upstream"
        pids = ProcessTable(local.ClusterPaths.for_name(NAME).root).load()
        argv = open(f"/proc/{pids['trainjob-controller']}/cmdline").read()
        assert "trainer-controller-manager" in argv, "the upstream binary runs, not trainyard's controller"
        crd = json.loads(kubectl("get", "crd", "trainjobs.trainer.kubeflow.org", "-o", "json"))
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"], "upstream's CRD, not trainyard's"

        kubectl("create", "namespace", "oracle")
        kubectl("create", "-f", "-", input_text=json.dumps(RUNTIME))
        kubectl("create", "-f", "-", input_text=json.dumps(new_trainjob(
            "mnist", RUNTIME["metadata"]["name"], "ClusterTrainingRuntime", namespace="oracle", nodes=2,
            per_node=EIGHT_GPUS)))
        jobset = wait_for(lambda: owned_by("jobsets.jobset.x-k8s.io", "mnist"), 90, "upstream's JobSet")
        podgroup = wait_for(lambda: owned_by("podgroups.scheduling.volcano.sh", "mnist"), 90, "upstream's PodGroup")
        assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2
        assert podgroup["spec"]["minMember"] == 2

        with pytest.raises(ClusterError) as refused:
            kubectl("create", "-f", "-", input_text=json.dumps(new_trainjob(
                "bogus", RUNTIME["metadata"]["name"], "BogusRuntime", namespace="oracle", nodes=2,
                per_node=EIGHT_GPUS)))
        message = str(refused.value)
        assert "validator.trainjob.trainer.kubeflow.org" in message
        assert "unsupported runtime: BogusRuntime.trainer.kubeflow.org" in message
    finally:
        down = runner.invoke(app, ["cluster", "down", "--name", NAME])
    assert down.exit_code == 0, down.output
    assert pids and not any(pid_alive(p) for p in pids.values()), "down stops every process up started"
    assert not any(port_in_use(BASE + offset) for offset in range(0, 40)), "nothing is left listening"
