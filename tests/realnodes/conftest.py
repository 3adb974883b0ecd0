"""One cluster with two real nodes for tests/realnodes, started as a user starts it (`trainyard up --real-nodes 2`
through the console script, on a name and ports of its own), stopped by the last test (test_real_teardown.py), which
checks that nothing is left on the host."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainyard.cluster import local
from realcluster import NAME, PORT_BASE, REAL_NODES, RealCluster, trainyard

TEARDOWN_MODULE = "test_real_teardown.py"


def pytest_collection_modifyitems(items):
    """The teardown checks run after every other real-node test (they stop the cluster)."""
    items.sort(key=lambda item: item.path.name == TEARDOWN_MODULE and item.path.parent == Path(__file__).parent)


@pytest.fixture(scope="session")
def real_cluster():
    if local.read_state(NAME):
        trainyard("down", "--name", NAME)
    started = time.monotonic()
    result = trainyard("up", "--name", NAME, "--port-base", str(PORT_BASE), "--real-nodes", str(REAL_NODES))
    cluster = RealCluster(NAME, result, time.monotonic() - started)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    print(f"\ntrainyard up --real-nodes {REAL_NODES}: {cluster.seconds:.0f} s")
    yield cluster
    if local.read_state(NAME):  # a failed test must not leave real nodes running
        trainyard("down", "--name", NAME)
