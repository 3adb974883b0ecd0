"""Gang-aware reclaim: which gang, which whole jobs to evict, and when victims are resumed (pure, table-driven)."""

from fractions import Fraction

import pytest

from trainyard.scheduling.cluster_state import GPU, Node
from trainyard.scheduling import reclaim as R
from trainyard.scheduling.reclaim import (FINAL_SHARE, Eviction, RunningJob, cheapest_eviction, evictable,
                                        parse_reclaimed_note, plan, reclaimed_note, running_jobs, starving_gangs,
                                        to_resume)
from trainyard.scheduling.reservation import WaitingGang

F = Fraction


def node(name, rack, used, spine="s0"):
    return Node(name=name, rack=rack, spine=spine, allocatable={GPU: F(8)}, used={GPU: F(used)})


def gang(name, queue, pods, tier=1, waiting=60.0):
    return WaitingGang(("ns", name), queue, pods, F(8), tier, waiting)


def job(name, queue, gpus, *nodes):
    return RunningJob(("ns", name), queue, F(gpus), frozenset(nodes))


# queue "lender" holds 40 GPUs with 16 deserved: it may lose up to 24; "poor" holds 0 of 32 deserved
ALLOCATED = {"lender": F(40), "poor": F(0), "even": F(16), "free": F(8)}
DESERVED = {"lender": F(16), "poor": F(32), "even": F(16)}
NODES = [node("a0", "r0", 8), node("a1", "r0", 8), node("a2", "r0", 0),
         node("b0", "r1", 8), node("b1", "r1", 8), node("b2", "r1", 8)]
RUNNING = [job("big", "lender", 16, "a0", "a1"), job("small", "lender", 8, "b0"), job("mine", "even", 16, "b1", "b2")]


@pytest.mark.parametrize("victim, expected", [
    (job("x", "lender", 24), True),    # 40 - 24 = 16: still at its share
    (job("x", "lender", 32), False),   # would fall below
    (job("x", "even", 8), False),      # at its share: never a victim
    (job("x", "free", 8), True),       # a queue with no deserved share lends everything
])
def test_a_victim_keeps_its_queue_at_or_above_its_share(victim, expected):
    assert evictable(victim, ALLOCATED, DESERVED) is expected


def test_starving_gangs_wait_long_enough_and_fit_their_queues_share():
    gangs = [gang("late", "poor", 2, waiting=5), gang("huge", "poor", 5), gang("ok", "poor", 2, waiting=30),
             gang("older", "poor", 3, waiting=90), gang("rich", "lender", 2)]
    assert [g.key[1] for g in starving_gangs(gangs, ALLOCATED, DESERVED, after_s=10)] == ["older", "ok"]


@pytest.mark.parametrize("wanted, expected", [
    # rack r0: a2 is free, evicting "big" frees a0+a1 (16 GPUs); rack r1 would need "mine" (not evictable)
    (gang("g", "poor", 2), Eviction(("ns", "g"), (("ns", "big"),), ("a0", "a2"))),
    (gang("g", "poor", 3), Eviction(("ns", "g"), (("ns", "big"),), ("a0", "a1", "a2"))),
    (gang("g", "poor", 4), None),                               # no rack has 4 nodes
    (gang("g", "poor", 4, tier=2), Eviction(("ns", "g"), (("ns", "big"), ("ns", "small")), ("a0", "a1", "a2", "b0"))),
    (gang("g", "poor", 1, tier=1), Eviction(("ns", "g"), (), ("a2",))),  # it fits already: nothing to evict
])
def test_cheapest_eviction_frees_one_allowed_domain_by_whole_jobs(wanted, expected):
    assert cheapest_eviction(NODES, wanted, RUNNING, ALLOCATED, DESERVED) == expected


def test_plan_evicts_only_when_needed():
    assert plan(NODES, [gang("g", "poor", 2, waiting=30)], RUNNING, ALLOCATED, DESERVED, after_s=10) == \
        Eviction(("ns", "g"), (("ns", "big"),), ("a0", "a2"))
    assert plan(NODES, [gang("g", "poor", 2, waiting=5)], RUNNING, ALLOCATED, DESERVED, after_s=10) is None
    free = [node(f"n{i}", "r0", 0) for i in range(3)]
    assert plan(free, [gang("g", "poor", 2, waiting=30)], [], ALLOCATED, DESERVED, after_s=10) is None


def pod(name, group, node, gpus, phase="Running"):
    return {"metadata": {"namespace": "ns", "name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]},
            "status": {"phase": phase}}


def test_running_jobs_group_bound_gpu_pods_of_evictable_trainjobs():
    groups = [{"metadata": {"namespace": "ns", "name": n}, "spec": {"queue": "q"}} for n in ("a", "b", "c")]
    pods = [pod("a-0", "a", "n1", 8), pod("a-1", "a", "n2", 8), pod("b-0", "b", "n1", 2, phase="Succeeded"),
            pod("c-0", "c", "n3", 4), pod("x-0", "x", "n3", 4), pod("p-0", "a", "", 8)]
    pods[-1]["spec"]["nodeName"] = None
    out = running_jobs(pods, groups, {("ns", "a"), ("ns", "b"), ("ns", "x")})
    assert out == [RunningJob(("ns", "a"), "q", F(16), frozenset({"n1", "n2"}))]
    pods[0]["status"]["startTime"], pods[1]["status"]["startTime"] = "2026-11-26T12:00:30Z", "2026-11-26T12:00:10Z"
    now = 1795694400.0 + 100  # 2026-11-26T12:01:40Z: the job has run since its first pod started, 90 s
    ran = running_jobs(pods, groups, {("ns", "a")}, now)
    assert ran == [RunningJob(("ns", "a"), "q", F(16), frozenset({"n1", "n2"}), 90.0)] and ran[0].lost_work == 1440.0


@pytest.mark.parametrize("notes, placed, now, expected", [
    ({("ns", "v1"): reclaimed_note(("ns", "g"), 100)}, set(), 150, []),                 # the gang still waits
    ({("ns", "v1"): reclaimed_note(("ns", "g"), 100)}, {("ns", "g")}, 150, [("ns", "v1")]),  # placed or gone
    ({("ns", "v1"): reclaimed_note(("ns", "g"), 100)}, set(), 220, [("ns", "v1")]),     # waited too long
    ({("ns", "v1"): "garbage"}, set(), 150, [("ns", "v1")]),                            # unreadable: resume
])
def test_victims_are_resumed_once_their_gang_is_placed_or_after_a_timeout(notes, placed, now, expected):
    assert to_resume(notes, placed, now, timeout_s=120) == expected


def test_reclaimed_note_round_trips():
    assert parse_reclaimed_note(reclaimed_note(("team-a", "job-1"), 1795694400.4)) == (("team-a", "job-1"), 1795694400.0)


# final-share (Kueue's LessThanOrEqualToFinalShare): "poor" holds 8 of 24 deserved and waits for a 3x8 gang, more
# than its share leaves room for; "lender" holds 40 of 16 deserved on n0-n3 (and elsewhere), "mid" 16 of 16.
FS_NODES = [node(f"n{i}", "r0", 8) for i in range(6)]
FS_DESERVED = {"lender": F(16), "mid": F(16), "poor": F(24)}
FS_RUNNING = [RunningJob(("ns", f"l{i}"), "lender", F(8), frozenset({f"n{i}"}), ran_s) for i, ran_s in
              enumerate((100.0, 10.0, 50.0, 5.0))] + [job("m", "mid", 16, "n4", "n5")]


@pytest.mark.parametrize("rule, lender_holds, expected", [
    # the deserved rule: 8 + 24 > 24, the gang never starves
    (R.DESERVED, 48, None),
    # final share of poor with its gang: 32/24; lender keeps 48 - 24 = 24 (share 1.5): the three jobs that ran least go
    (FINAL_SHARE, 48, Eviction(("ns", "g"), (("ns", "l1"), ("ns", "l2"), ("ns", "l3")), ("n1", "n2", "n3"))),
    # lender would keep 40 - 24 = 16 (share 1 < 4/3): each victim alone would do, the three together not
    (FINAL_SHARE, 40, None),
    # fair-sharing: final share first (48: the same three)...
    (R.FAIR_SHARING, 48, Eviction(("ns", "g"), (("ns", "l1"), ("ns", "l2"), ("ns", "l3")), ("n1", "n2", "n3"))),
    # ...then Kueue's LessThanInitialShare: lender holds 40 - 16 = 24 (share 1.5 > 4/3) until its last victim goes
    (R.FAIR_SHARING, 40, Eviction(("ns", "g"), (("ns", "l1"), ("ns", "l2"), ("ns", "l3")), ("n1", "n2", "n3"))),
    # 32 - 16 = 16 before the last one goes: share 1, not above 4/3
    (R.FAIR_SHARING, 32, None),
])
def test_final_share_lets_a_big_gang_reclaim_while_its_victims_keep_at_least_its_share(rule, lender_holds, expected):
    allocated = {"lender": F(lender_holds), "mid": F(16), "poor": F(8)}
    wanted = [gang("g", "poor", 3, waiting=30)]
    assert plan(FS_NODES, wanted, FS_RUNNING, allocated, FS_DESERVED, after_s=10, rule=rule) == expected


def test_protected_jobs_are_never_victims():
    allocated = {"lender": F(48), "mid": F(16), "poor": F(8)}
    eviction = plan(FS_NODES, [gang("g", "poor", 3, waiting=30)], FS_RUNNING, allocated, FS_DESERVED, after_s=10,
                    protected=frozenset({("ns", "l3")}), rule=FINAL_SHARE)
    assert eviction is not None and ("ns", "l3") not in eviction.victims and len(eviction.victims) == 3


def test_starving_under_final_share_needs_only_a_queue_below_its_share():
    allocated = {"poor": F(8), "lender": F(48)}
    gangs = [gang("big", "poor", 3), gang("rich", "lender", 1)]
    assert [g.key[1] for g in starving_gangs(gangs, allocated, FS_DESERVED, 10, rule=FINAL_SHARE)] == ["big"]
    assert starving_gangs(gangs, allocated, FS_DESERVED, 10, rule=R.DESERVED) == []
