"""Seed manifests (tests/fixtures/seeds) load, and every seed TrainJob renders against its runtime."""

from pathlib import Path

import pytest
import yaml

from trainyard.controller.admission import validate_runtime
from trainyard.controller.build import build_objects
from trainyard.controller.strict import unknown_field_errors

from ctl_builders import by_kind, container, fixed_key, rjob, the_jobset

SEEDS = Path(__file__).parents[2] / "fixtures" / "seeds"
INDEX = yaml.safe_load((SEEDS / "index.yaml").read_text())


def load(name):
    return yaml.safe_load((SEEDS / name).read_text())


@pytest.mark.parametrize("pair", INDEX["pairs"], ids=[p["trainjob"] for p in INDEX["pairs"]])
def test_seed_trainjob_renders(pair):
    objects = build_objects(load(pair["trainjob"]), load(pair["runtime"]), key_generator=fixed_key)
    assert by_kind(objects, "JobSet") and objects[0]["metadata"]["name"].endswith("-runtime-snapshot")


# Upstream's own CEL rule refuses this seed runtime too (numNodes beside torch.elasticPolicy).
UPSTREAM_REFUSES = {"001-tr-pytorch-distributed.yaml": ["numNodes should not be set if torch.elasticPolicy is configured"]}


@pytest.mark.parametrize("name", INDEX["runtimes"])
def test_seed_runtimes_are_admitted_as_written_and_strict_validation_knows_every_field(name):
    runtime = load(name)
    result = validate_runtime(runtime)
    assert [e.message.split(": ")[-1] for e in result.errors] == UPSTREAM_REFUSES.get(name, [])
    assert unknown_field_errors(runtime, runtime=True) == []


def test_seed_001_network_topology_maps_to_volcanos_spelling_with_a_warning():
    runtime = load("001-ctr-torch-distributed.yaml")
    assert validate_runtime(runtime).warnings == [
        "spec.podGroupPolicy.volcano.networkTopology: topologyKey: topology.kubernetes.io/zone, networkPolicy: "
        "Best-effort is the seed-era spelling; upstream Kubeflow Trainer and Volcano spell it mode: soft, "
        "highestTierAllowed: 2 (trainyard maps it; other controllers ignore it)"]
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj", "namespace": "ns"},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}}}
    (pg,) = by_kind(build_objects(trainjob, runtime, key_generator=fixed_key), "PodGroup")
    assert pg["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}


def test_seed_queue_override_reaches_pod_group():
    objects = build_objects(load("000-trainjob-urgent-training.yaml"), load("000-ctr-torch-high-priority.yaml"))
    (pg,) = by_kind(objects, "PodGroup")
    assert pg["spec"]["queue"] == "urgent-queue"


def test_seed_full_trainjob_fields_reach_the_jobset():
    js = the_jobset(build_objects(load("001-trainjob-pytorch-distributed-training.yaml"), load("001-ctr-torch-distributed.yaml")))
    node = container(js, "node")
    assert node["image"] == "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime" and node["args"][0] == "--epochs=10"
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert env["PET_NNODES"] == "4" and env["PET_NPROC_PER_NODE"] == "auto" and env["CUSTOM_ENV"] == "custom-value"
    pod = rjob(js, "node")["template"]["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == "training-sa" and pod["metadata"]["labels"]["custom-label"] == "custom-value"
    assert js["metadata"]["labels"]["team"] == "ml-team" and rjob(js, "node")["template"]["metadata"]["labels"]["team"] == "ml-team"
