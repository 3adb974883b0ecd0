"""A node whose kubelet stopped reporting (Ready Unknown) or reports not ready (False) is lost: its pods' objects
still say Running, but fit, the report and queue use count nothing they hold, and a gang with a member there is
not running (JobSet's failure policy acts on it)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from trainyard.capacity.live import Snapshot
from trainyard.capacity.report import build_report, render_text
from trainyard.scheduling.cluster_state import lost_nodes, node_lost, nodes_from, queue_uses

from capacity_builders import GPU, node, pod, pod_group, queue


def with_ready(status: str | None) -> dict:
    n = node("n", "r")
    n["status"]["conditions"] = [] if status is None else [{"type": "Ready", "status": status}]
    return n


@pytest.mark.parametrize("status, lost", [("True", False), ("False", True), ("Unknown", True), (None, False)])
def test_a_node_is_lost_when_its_ready_condition_is_not_true(status, lost):
    assert node_lost(with_ready(status)) is lost


def test_a_cordoned_node_is_not_lost_its_pods_still_hold_their_gpus():
    cordoned = node("c", "r", cordoned=True)
    assert not node_lost(cordoned)
    (only,) = nodes_from([cordoned], [pod("p", "c", 8)])
    assert only.used[GPU] == 8 and not only.lost and only.free() == 0


def cluster_with_one_lost_node():
    nodes = [node("n0", "r0"), node("n1", "r0", ready=False), node("n2", "r1")]
    nodes[1]["status"]["conditions"][0]["status"] = "Unknown"
    pods = [pod("g-0", "n0", 8, group="g"), pod("g-1", "n1", 8, group="g"),  # a gang split by the loss
            pod("h-0", "n2", 4, group="h")]
    groups = [pod_group("g", "team", 16, members=2, phase="Running", running=2),
              pod_group("h", "team", 4, members=1, phase="Running", running=1)]
    return nodes, pods, groups


def test_pods_on_a_lost_node_hold_nothing_and_its_gang_is_not_running():
    nodes, pods, groups = cluster_with_one_lost_node()
    assert lost_nodes(nodes) == frozenset({"n1"})
    by_name = {n.name: n for n in nodes_from(nodes, pods)}
    assert by_name["n1"].lost and by_name["n1"].used == {} and by_name["n1"].free() == 0
    assert by_name["n0"].used[GPU] == 8, "the gang's member on a live node still holds its GPUs until it ends"
    use = queue_uses([queue("team", capability=32)], groups, pods, lost=lost_nodes(nodes))["team"]
    assert use.allocated[GPU] == 12 and use.running_gangs == 1 and use.pending_gangs == []
    unaware = queue_uses([queue("team", capability=32)], groups, pods)["team"]
    assert unaware.allocated[GPU] == 20 and unaware.running_gangs == 2, "what the objects alone say"


def test_the_report_counts_nothing_on_a_lost_node_and_names_it():
    nodes, pods, groups = cluster_with_one_lost_node()
    report = build_report(Snapshot(nodes=nodes, pods=pods, queues=[queue("team", capability=32)], pod_groups=groups))
    assert report.totals["allocated"] == 12 and report.totals["free"] == 4
    row = next(r for r in report.nodes if r["node"] == "n1")
    assert row["lost"] is True and row["allocated"] == 0 and row["free"] == 0
    assert "Lost nodes (not ready: their pods hold nothing, their GPUs are not offered): n1" in render_text(report)
    assert Fraction(report.queues[0]["allocated"]) == 12
