"""The differential suite's own cluster: upstream's TrainJob controller first, trainyard's after the switch.

TRAINYARD_DIFF_CLUSTER / TRAINYARD_DIFF_PORT_BASE move it (default trainyard-diff on 29000), so it coexists with
the session test cluster and `make up`; TRAINYARD_KEEP_TEST_CLUSTER keeps it after the run.
"""

from __future__ import annotations

import os

import pytest

from trainyard.cluster import local
from trainyard.cluster.spec import ClusterSpec
from trainyard.toolchain.build import ensure_built

# TrainJobStatus off on both sides: upstream's manager cannot run it out of cluster (see cluster/spec.py), and
# with it on trainyard would add the status server's env, token and CA to every trainer pod.
DIFF_CLUSTER = ClusterSpec(name=os.environ.get("TRAINYARD_DIFF_CLUSTER", "trainyard-diff"), nodes=2, gpus_per_node=8,
                           racks=1, port_base=int(os.environ.get("TRAINYARD_DIFF_PORT_BASE", "29000")),
                           feature_gates="TrainJobStatus=false", trainjob_controller="upstream")


def pytest_terminal_summary(terminalreporter):
    from diff_compare import SUMMARY  # figures of this run (tests/differential is on sys.path by now)

    for line in SUMMARY:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def diff_cluster():
    ensure_built(*local.REQUIRED_TOOLS, "kubeflow-trainer")
    if local.read_state(DIFF_CLUSTER.name):  # a previous run died or was kept: start fresh
        local.down(DIFF_CLUSTER.name, echo=lambda *_: None)
    local.up(DIFF_CLUSTER, echo=lambda *_: None)
    try:
        yield DIFF_CLUSTER
    finally:
        if not os.environ.get("TRAINYARD_KEEP_TEST_CLUSTER"):
            local.down(DIFF_CLUSTER.name, echo=lambda *_: None)
