"""One cluster with two real nodes for tests/realnodes, started as a user starts it (`trainyard up --real-nodes 2`
through the console script, on a name and ports of its own), stopped by the last test (test_real_teardown.py), which
checks that nothing is left on the host."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainyard.cluster import local
from trainyard.realnodes.host import IP_FORWARD
from realcluster import NAME, PORT_BASE, REAL_NODES, RealCluster, trainyard

LAST_MODULES = ("test_real_upgrade.py", "test_real_incluster_controller.py", "test_real_teardown.py")
"""Run in this order after every other real-node test: the upgrade and the in-cluster controller replace the
cluster's local controller, and the teardown stops the cluster."""


def pytest_collection_modifyitems(items):
    def order(item) -> int:
        here = item.path.parent == Path(__file__).parent
        return LAST_MODULES.index(item.path.name) + 1 if here and item.path.name in LAST_MODULES else 0

    items.sort(key=order)


@pytest.fixture(scope="session")
def real_cluster():
    if local.read_state(NAME):
        trainyard("down", "--name", NAME)
    forwarding = IP_FORWARD.read_text().strip()
    started = time.monotonic()
    result = trainyard("up", "--name", NAME, "--port-base", str(PORT_BASE), "--real-nodes", str(REAL_NODES))
    cluster = RealCluster(NAME, result, time.monotonic() - started, forwarding)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    print(f"\ntrainyard up --real-nodes {REAL_NODES}: {cluster.seconds:.0f} s")
    yield cluster
    if local.read_state(NAME):  # a failed test must not leave real nodes running
        trainyard("down", "--name", NAME)
