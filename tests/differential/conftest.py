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

# TrainJobStatus off on both sides: upstream's manager cannot run it out of cluster (see
# cluster/controller_configs.py), and with it on trainyard would add the status server's env, token and CA to every
# trainer pod.
DIFF_CLUSTER = ClusterSpec(name=os.environ.get("TRAINYARD_DIFF_CLUSTER", "trainyard-diff"), nodes=2, gpus_per_node=8,
                           racks=1, port_base=int(os.environ.get("TRAINYARD_DIFF_PORT_BASE", "29000")),
                           feature_gates="TrainJobStatus=false", trainjob_controller="upstream", monitoring=False)


def pytest_terminal_summary(terminalreporter):
    from diff_compare import SUMMARY  # figures of this run (tests/differential is on sys.path by now)

    for line in SUMMARY:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def diff_cluster():
    """Started as a user starts the oracle, `trainyard cluster up --trainjob-controller upstream`; stopped with
    `cluster down`, which must leave none of its processes and no listener."""
    from typer.testing import CliRunner

    from trainyard.cli.main import app
    from trainyard.cluster.processes import ProcessTable, pid_alive, port_in_use

    ensure_built(*local.REQUIRED_TOOLS, "kubeflow-trainer")
    if local.read_state(DIFF_CLUSTER.name):  # a previous run died or was kept: start fresh
        local.down(DIFF_CLUSTER.name, echo=lambda *_: None)
    runner = CliRunner()
    up = runner.invoke(app, ["cluster", "up", "--name", DIFF_CLUSTER.name, "--port-base", str(DIFF_CLUSTER.port_base),
                             "--nodes", str(DIFF_CLUSTER.nodes), "--racks", str(DIFF_CLUSTER.racks),
                             "--gpus-per-node", str(DIFF_CLUSTER.gpus_per_node),
                             "--feature-gates", DIFF_CLUSTER.feature_gates, "--trainjob-controller", "upstream",
                             "--no-monitoring"])
    assert up.exit_code == 0, up.output
    assert "trainjob controller: upstream" in up.output
    pids = ProcessTable(local.ClusterPaths.for_name(DIFF_CLUSTER.name).root).load()
    try:
        yield DIFF_CLUSTER
    finally:
        if not os.environ.get("TRAINYARD_KEEP_TEST_CLUSTER"):
            down = runner.invoke(app, ["cluster", "down", "--name", DIFF_CLUSTER.name])
            assert down.exit_code == 0, down.output
            assert not [name for name, pid in pids.items() if pid_alive(pid)], "down stops every process up started"
            assert not [port for port in DIFF_CLUSTER.ports.all().values() if port_in_use(port)], "nothing listens"
