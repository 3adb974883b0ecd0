"""Fixtures the tenant integration tests share (tenant_helpers has the builders)."""

from __future__ import annotations

import uuid

import pytest

from builders import torch_runtime
from tenant_helpers import create, delete_cluster_object, prepare, unprepare


@pytest.fixture(scope="module")
def shared(cluster):
    created = prepare(cluster)
    yield
    unprepare(cluster, created)


@pytest.fixture
def catalog_runtime(cluster):
    name = f"catalog-{uuid.uuid4().hex[:6]}"
    create(cluster, torch_runtime(name, gpus=8))
    yield name
    delete_cluster_object(cluster, "clustertrainingruntime", name)
