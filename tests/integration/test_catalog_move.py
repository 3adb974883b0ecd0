"""A tenant moved to another catalog release with TrainJobs in flight, on the real API server and controllers: the
preflight says what happens to each, then the move is applied as the platform applies it (the new release's
TrainingRuntimes, the old ones it no longer has deleted) and each case is checked against what it said.

The move is from 1.2.0 back to 1.0.0: torch-distributed-volcano changes (an older PyTorch image) and
torch-distributed-topology, which 1.0.0 does not have, goes away: a TrainJob suspended on it can no longer be resumed
(the preflight counts it as needing the operator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from trainyard import k8s as K
from trainyard.cluster.local import ClusterError
from trainyard.paths import repo_root
from trainyard.capacity.live import connect
from trainyard.runtimes import CatalogTenant, load_catalog, render_tenant_runtimes
from trainyard.upgrade import catalog_moves as M
from trainyard.upgrade.preflight import catalog_preview, catalog_survey, survey

from builders import new_trainjob

pytestmark = pytest.mark.integration

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
CHANGED, REMOVED = "torch-distributed-volcano", "torch-distributed-topology"
EIGHT = {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}


def long_running() -> list[dict]:
    """A runtime patch that keeps the simulated pods running ten minutes (kwok's pod-complete delay)."""
    return [{"manager": "example.com/test", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"metadata": {"annotations": {
            K.KWOK_POD_COMPLETE_DELAY_ANNOTATION: "600s"}}}}}}]}}}}]


def trainjob(name: str, runtime: str, ns: str, suspend: bool) -> dict:
    return new_trainjob(name, runtime, "TrainingRuntime", namespace=ns, suspend=suspend, nodes=1, per_node=EIGHT,
                        runtimePatches=long_running())


def node_image(obj: dict) -> str:
    job = next(j for j in obj["spec"]["replicatedJobs"] if j["name"] == "node")
    return next(c["image"] for c in job["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node")


def runtimes_of(version: str, tenant: CatalogTenant) -> dict[str, dict]:
    from dataclasses import replace

    return {r["metadata"]["name"]: r for r in render_tenant_runtimes(load_catalog(), replace(tenant, catalog_version=version))}


def stack_moving(directory: Path, ns: str, kubeconfig: str) -> Path:
    """The local stack with team-b living in `ns`, pinned to 1.0.0, on the test cluster."""
    document = yaml.safe_load((repo_root() / "stacks" / "Pulumi.local.yaml").read_text())
    document["config"]["trainyard:kubeconfig"] = kubeconfig
    team = next(t for t in document["config"]["trainyard:tenants"] if t["name"] == "team-b")
    team.update(namespace=ns, catalogVersion="1.0.0")
    path = directory / "Pulumi.moving.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def get(cluster, plural: str, name: str, ns: str, group: str = GROUP, version: str = VERSION):
    return cluster.get_object(group, version, plural, name, ns)


def resumed(cluster, ns: str, name: str) -> None:
    cluster.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "trainjobs", name, {"spec": {"suspend": False}})
    cluster.wait(lambda: (get(cluster, "jobsets", name, ns, "jobset.x-k8s.io", "v1alpha2") or {})
                 .get("spec", {}).get("suspend") is False, timeout=60, what=f"{name}'s JobSet resumed")


def test_a_move_keeps_each_trainjob_on_the_runtime_it_was_built_from(cluster, tmp_path):
    ns = cluster.namespace("move")
    tenant = CatalogTenant(name=ns, namespace=ns, catalog_version="1.2.0", queue="default")
    old, new = runtimes_of("1.2.0", tenant), runtimes_of("1.0.0", tenant)
    cluster.apply(*old.values())
    for name, runtime, suspend in (("training", CHANGED, False), ("paused", CHANGED, True),
                                   ("paused-topology", REMOVED, True), ("going-topology", REMOVED, False)):
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(trainjob(name, runtime, ns, suspend)))
    running = cluster.wait(lambda: [p for p in cluster.core.list_namespaced_pod(ns).items if p.status.phase == "Running"],
                           timeout=90, what="the running TrainJob's pod")
    for name in ("paused", "paused-topology"):
        cluster.wait(lambda: get(cluster, "jobsets", name, ns, "jobset.x-k8s.io", "v1alpha2"), what=f"{name}'s JobSet")

    api = connect(cluster.kubeconfig)
    moving = CatalogTenant(name=ns, namespace=ns, catalog_version="1.0.0", queue="default")
    [move], jobs = catalog_survey(api, [moving], load_catalog(), survey(api, ns))
    assert (move.from_version, move.to_version) == ("1.2.0", "1.0.0")
    assert move.runtimes[CHANGED] == "changed" and move.runtimes[REMOVED] == "removed", move.runtimes
    said = {job.name: job for job in jobs}
    assert said["training"].outcome.endswith("it keeps running"), said
    assert said["paused"].outcome.endswith("it resumes on it, not on the new one"), said
    assert said["paused-topology"].outcome == M.RESUME_REFUSED, said
    assert said["going-topology"].outcome.startswith(M.FROZEN), said
    assert M.blocking(jobs) == 1
    # `trainyard platform preview` of a stack that makes this move prints the same, before anything is applied
    text = catalog_preview(stack_moving(tmp_path, ns, cluster.kubeconfig), cluster.kubeconfig)
    assert f"catalog: team-b ({ns}) 1.2.0 -> 1.0.0" in text, text
    assert any(line.startswith("  removed: ") and REMOVED in line for line in text.splitlines()), text
    assert f"{ns}/paused-topology (suspended, {REMOVED} removed): {M.RESUME_REFUSED}" in text, text

    # the move, as `pulumi up` makes it: the new release's runtimes, the ones it does not have deleted
    cluster.apply(*new.values())
    for name in set(old) - set(new):
        cluster.kubectl("delete", "trainingruntime", name, "-n", ns)

    # kept running: the same pod, still running, on the image it started with
    pod = cluster.core.read_namespaced_pod(running[0].metadata.name, ns)
    assert pod.metadata.uid == running[0].metadata.uid and pod.status.phase == "Running"
    # resumed on the runtime it was built from, not the new release's
    resumed(cluster, ns, "paused")
    jobset = get(cluster, "jobsets", "paused", ns, "jobset.x-k8s.io", "v1alpha2")
    assert node_image(jobset) == node_image(old[CHANGED]["spec"]["template"]) != node_image(new[CHANGED]["spec"]["template"])
    # its runtime gone, a suspended TrainJob cannot be resumed: the TrainJob webhook refuses the change
    with pytest.raises(ApiException) as refusal:
        resumed(cluster, ns, "paused-topology")
    assert refusal.value.status == 403 and REMOVED in refusal.value.body
    # one not suspended goes on, but can no longer be suspended (as reclaim, stall and budget would)
    with pytest.raises(ApiException) as refusal:
        cluster.custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "trainjobs", "going-topology",
                                                      {"spec": {"suspend": True}})
    assert refusal.value.status == 403 and REMOVED in refusal.value.body
    # and a TrainJob naming the runtime the release no longer has cannot be created again
    with pytest.raises(ClusterError) as refused:
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(trainjob("again", REMOVED, ns, True)))
    assert REMOVED in str(refused.value), refused.value
