"""The gang reservation plan: which gang, which nodes, and the taint edits (pure, table-driven)."""

from fractions import Fraction

import pytest

from trainyard import k8s as K
from trainyard.scheduling.cluster_state import GPU, Node
from trainyard.scheduling.reservation import (Reservation, WaitingGang, cheapest_nodes, plan, taint_changes,
                                            taint_value, toleration, waiting_gangs, waiting_gpus)


def node(name: str, rack: str, used: int, spine: str = "spine-0", gpus: int = 8, schedulable: bool = True) -> Node:
    return Node(name=name, rack=rack, spine=spine, allocatable={GPU: Fraction(gpus)},
                used={GPU: Fraction(used)}, schedulable=schedulable)


def gang(name: str, queue: str, pods: int, tier: int | None = 1, waiting: float = 60.0, gpus: int = 8) -> WaitingGang:
    return WaitingGang(key=("ns", name), queue=queue, pods=pods, gpus_per_pod=Fraction(gpus), tier=tier,
                       waiting_s=waiting)


# rack-0: two busy nodes and one half-used; rack-1: lightly used; rack-2 (other spine): one free node only
NODES = [node("a0", "rack-0", 8), node("a1", "rack-0", 8), node("a2", "rack-0", 4),
         node("b0", "rack-1", 2), node("b1", "rack-1", 1), node("b2", "rack-1", 8),
         node("c0", "rack-2", 0, spine="spine-1")]


@pytest.mark.parametrize("wanted, expected", [
    (gang("g", "q", 2, tier=1), ("b0", "b1")),          # rack-1 holds 3 GPUs on its two lightest nodes
    (gang("g", "q", 3, tier=1), ("b0", "b1", "b2")),    # rack-1 costs 11, rack-0 costs 20
    (gang("g", "q", 4, tier=1), None),                  # no rack has 4 nodes
    (gang("g", "q", 4, tier=2), ("a0", "a2", "b0", "b1")),  # spine-0: 1+2+4, then the first 8-GPU node by name
    (gang("g", "q", 2, tier=None), ("b1", "c0")),       # anywhere: the free node and the 1-GPU node
    (gang("g", "q", 2, tier=1, gpus=16), None),         # no node is big enough for one pod
])
def test_cheapest_nodes_in_one_allowed_domain(wanted, expected):
    assert cheapest_nodes(NODES, wanted) == expected


def test_unschedulable_nodes_are_never_held():
    nodes = [node("x0", "r", 0, schedulable=False), node("x1", "r", 0), node("x2", "r", 8)]
    assert cheapest_nodes(nodes, gang("g", "q", 2)) == ("x1", "x2")


ALLOCATED = {"under": Fraction(10), "lower": Fraction(5), "over": Fraction(300), "none": Fraction(0)}
DESERVED = {"under": Fraction(100), "lower": Fraction(100), "over": Fraction(200)}


@pytest.mark.parametrize("gangs, current, expected_gang", [
    ([gang("g1", "under", 2, waiting=30)], None, "g1"),
    ([gang("g1", "under", 2, waiting=10)], None, None),                     # not waited long enough
    ([gang("g1", "over", 2, waiting=300)], None, None),                     # its queue is above its share
    ([gang("g1", "none", 2, waiting=300)], None, None),                     # a queue with no deserved share
    ([gang("g1", "under", 2, waiting=30), gang("g2", "lower", 2, waiting=25)], None, "g2"),  # lowest share first
    ([gang("g1", "under", 2, waiting=30), gang("g2", "under", 2, waiting=90)], None, "g2"),  # then longest wait
    ([gang("g1", "under", 4, waiting=90), gang("g2", "under", 2, waiting=30)], None, "g2"),  # g1 fits no rack
    ([gang("g1", "under", 2, waiting=30), gang("g2", "lower", 2, waiting=90)],
     Reservation(("ns", "g1"), ("a0", "a1")), "g1"),                       # the current one is kept
    ([gang("g2", "lower", 2, waiting=90)], Reservation(("ns", "g1"), ("a0", "a1")), "g2"),  # g1 placed or gone
    ([gang("g1", "under", 2, waiting=30)], Reservation(("ns", "g1"), ("gone", "a1")), "g1"),  # node vanished: replan
])
def test_plan_picks_the_gang_of_the_queue_furthest_below_its_share(gangs, current, expected_gang):
    chosen = plan(NODES, gangs, ALLOCATED, DESERVED, current, after_s=20)
    assert (chosen.gang[1] if chosen else None) == expected_gang
    if chosen is not None and current is not None and chosen.gang == current.gang and set(current.nodes) <= {n.name for n in NODES}:
        assert chosen == current


def test_a_replanned_reservation_takes_fresh_nodes():
    chosen = plan(NODES, [gang("g1", "under", 2, waiting=30)], ALLOCATED, DESERVED,
                  Reservation(("ns", "g1"), ("gone", "a1")), after_s=20)
    assert chosen == Reservation(("ns", "g1"), ("b0", "b1"))


OTHER = {"key": "dedicated", "value": "x", "effect": "NoExecute"}


@pytest.mark.parametrize("taints, wanted, expected", [
    ({"n1": [], "n2": [OTHER]}, Reservation(("ns", "g"), ("n2",)),
     {"n2": [OTHER, {"key": K.RESERVATION_TAINT, "value": "ns.g", "effect": "NoSchedule"}]}),
    ({"n1": [{"key": K.RESERVATION_TAINT, "value": "ns.g", "effect": "NoSchedule"}]},
     Reservation(("ns", "g"), ("n1",)), {}),                                 # already held: no edit
    ({"n1": [{"key": K.RESERVATION_TAINT, "value": "ns.old", "effect": "NoSchedule"}, OTHER]},
     Reservation(("ns", "g"), ("n1",)),
     {"n1": [OTHER, {"key": K.RESERVATION_TAINT, "value": "ns.g", "effect": "NoSchedule"}]}),
    ({"n1": [{"key": K.RESERVATION_TAINT, "value": "ns.g", "effect": "NoSchedule"}, OTHER], "n2": []},
     None, {"n1": [OTHER]}),                                                 # released: only ours removed
])
def test_taint_changes_touch_only_the_reservation_taint(taints, wanted, expected):
    assert taint_changes(taints, wanted) == expected


def test_taint_value_fits_a_label_value_and_tolerates_only_its_gang():
    long = ("n" * 60, "trainjob-" + "x" * 50)
    assert len(taint_value(long)) <= 63 and taint_value(long) != taint_value((long[0], long[1] + "y"))
    assert toleration(("ns", "g")) == {"key": K.RESERVATION_TAINT, "operator": "Equal", "value": "ns.g",
                                       "effect": "NoSchedule"}


def pod_group(name, phase, min_member, gpus, tier=None, mode="hard", running=0, created="2026-11-26T12:00:00Z"):
    spec = {"minMember": min_member, "minResources": {GPU: str(gpus)}, "queue": "q"}
    if tier:
        spec["networkTopology"] = {"mode": mode, "highestTierAllowed": tier}
    return {"metadata": {"namespace": "ns", "name": name, "creationTimestamp": created}, "spec": spec,
            "status": {"phase": phase, "running": running}}


def test_waiting_gangs_are_pending_multi_pod_groups_with_gpus():
    now = 1795694400.0 + 90  # 2026-11-26T12:01:30Z
    groups = [pod_group("wait", "Inqueue", 4, 32, tier=1), pod_group("single", "Pending", 1, 8),
              pod_group("running", "Running", 2, 16, running=2), pod_group("cpu", "Pending", 2, 0),
              pod_group("soft", "Pending", 2, 16, tier=1, mode="soft")]
    out = {g.key[1]: g for g in waiting_gangs(groups, now)}
    assert set(out) == {"wait", "soft"}
    assert out["wait"] == WaitingGang(("ns", "wait"), "q", 4, Fraction(8), 1, 90.0)
    assert out["soft"].tier is None


def test_waiting_gpus_sum_what_waiting_pod_groups_ask_per_queue():
    groups = [pod_group("wait", "Inqueue", 4, 32, tier=1), pod_group("single", "Pending", 1, 8),
              pod_group("running", "Running", 2, 16, running=2), pod_group("cpu", "Pending", 2, 0)]
    assert waiting_gpus(groups) == {"q": Fraction(40)}
