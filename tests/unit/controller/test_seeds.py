"""Seed manifests (tests/fixtures/seeds) load, and every seed TrainJob renders against its runtime."""

from pathlib import Path

import pytest
import yaml

from trainyard.controller.admission import validate_runtime
from trainyard.controller.build import build_objects

from ctl_builders import by_kind, container, fixed_key, rjob, the_jobset

SEEDS = Path(__file__).parents[2] / "fixtures" / "seeds"
INDEX = yaml.safe_load((SEEDS / "index.yaml").read_text())


def load(name):
    return yaml.safe_load((SEEDS / name).read_text())


@pytest.mark.parametrize("pair", INDEX["pairs"], ids=[p["trainjob"] for p in INDEX["pairs"]])
def test_seed_trainjob_renders(pair):
    objects = build_objects(load(pair["trainjob"]), load(pair["runtime"]), key_generator=fixed_key)
    assert by_kind(objects, "JobSet") and objects[0]["metadata"]["name"].endswith("-runtime-snapshot")


@pytest.mark.parametrize("name", INDEX["runtimes"])
def test_seed_runtimes_load(name):
    validate_runtime(load(name))  # never raises, whatever it reports


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
