"""A valid stack as a dict, which each test breaks in one place."""

import copy

import pytest

from trainyard.runtimes.model import Catalog, Release

FILE = "stacks/Pulumi.test.yaml"

VALID = {
    "kubeconfig": "/tmp/kubeconfig", "kubeContext": "test",
    "controller": {"webhook": {"certificate": "cert-manager"}},
    "cluster": {"nodes": 4, "gpusPerNode": 8, "cpuPerNode": 96, "memoryPerNode": "1024Gi"},
    "priorityClasses": [{"name": "train-default", "value": 1000}, {"name": "train-high", "value": 10000}],
    "tenants": [
        {"name": "team-a", "namespace": "team-a", "catalogVersion": "1.1.0",
         "queue": {"name": "team-a", "capability": {"nvidia.com/gpu": 16}},
         "defaultPriorityClass": "train-default", "priorityClasses": ["train-high"],
         "quota": {"cpu": 96, "memory": "512Gi", "gpu": 16}},
        {"name": "team-b", "namespace": "team-b", "catalogVersion": "1.0.0",
         "queue": {"name": "team-b"}, "quota": {"cpu": 96, "memory": "512Gi", "gpu": 8}},
    ],
}


@pytest.fixture
def values():
    return copy.deepcopy(VALID)


@pytest.fixture
def catalog():
    return Catalog(releases=(Release("1.1.0", "current", "x"), Release("1.0.0", "deprecated", "x"),
                             Release("0.9.0", "retired", "x"), Release("1.2.0", "draft", "x")))
