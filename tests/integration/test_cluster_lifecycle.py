"""`cluster up` is idempotent and `cluster down` leaves nothing behind (its own small cluster)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from trainyard.cli.main import app
from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable, pid_alive, port_in_use

from trainyard.toolchain.build import ensure_built as ensure_tools

pytestmark = pytest.mark.integration

NAME, BASE = "trainyard-lifecycle", 26800


def _all_pids() -> dict[str, int]:
    paths = local.ClusterPaths.for_name(NAME)
    pids = dict(ProcessTable(paths.root).load())
    for component, pid in local.kwok_processes(paths, NAME).items():
        pids[f"kwokctl-{component}"] = pid
    return pids


def test_up_twice_then_down_leaves_no_process_and_no_listener():
    ensure_tools(*local.REQUIRED_TOOLS)
    runner = CliRunner()
    args = ["cluster", "up", "--name", NAME, "--port-base", str(BASE), "--nodes", "1", "--racks", "1"]
    try:
        first = runner.invoke(app, args)
        assert first.exit_code == 0, first.output
        pids = _all_pids()
        assert {"jobset", "vc-scheduler", "vc-controller-manager", "scheduler-conf-sync"} <= set(pids)
        assert len([k for k in pids if k.startswith("kwokctl-")]) >= 4, "etcd, apiserver, kcm, scheduler, kwok"
        assert all(pid_alive(p) for p in pids.values())

        kubeconfig = runner.invoke(app, ["cluster", "kubeconfig", "--name", NAME])
        path = kubeconfig.output.strip()
        assert os.path.isfile(path) and path.startswith(str(local.ClusterPaths.for_name(NAME).root))
        assert os.path.expanduser("~/.kube") not in path

        again = runner.invoke(app, args)
        assert again.exit_code == 0, again.output
        assert "already running" in again.output
        assert _all_pids() == pids, "a second up changes nothing"

        clash = runner.invoke(app, ["cluster", "up", "--name", "trainyard-clash", "--port-base", str(BASE)])
        assert clash.exit_code != 0
        assert "--port-base" in clash.output and "in use" in clash.output
    finally:
        runner.invoke(app, ["cluster", "down", "--name", NAME])
        runner.invoke(app, ["cluster", "down", "--name", "trainyard-clash"])
    assert not any(pid_alive(p) for p in pids.values()), "down stops every process up started"
    assert not any(port_in_use(BASE + off) for off in range(0, 40)), "nothing is left listening"
    status = runner.invoke(app, ["cluster", "status", "--name", NAME])
    assert "not running" in status.output
