"""The trace benchmark's figures from pod records (table-driven; times in seconds since the start)."""

import pytest

from trainyard.schedtrace import metrics as M
from trainyard.scheduling.trace import TraceJob


def job(name="g", pods=2, gpus=8, tenant="a", tier=None, arrival=0.0) -> TraceJob:
    return TraceJob(name, tenant, arrival, 10.0, pods, gpus, tier)


def pod(bound=None, ended=None, ok=True, job="g", gpus=8, node=None) -> M.PodRecord:
    return M.PodRecord(job=job, gpus=gpus, node=node, bound=bound, ended=ended, succeeded=ok and ended is not None)


@pytest.mark.parametrize("pods, expected", [
    ([pod(1, 11), pod(1, 11)], []),                                # bound together
    ([pod(1, 11), pod(4, 14)], [(1, 4)]),                          # one pod waited 3 s
    ([pod(1, 11), pod(None)], [(1, 11)]),                          # never bound: partial while the other runs
    ([pod(1), pod(None)], [(1, 20)]),                              # ... until the end of the run
    ([pod(1, 11), pod(1, 12)], []),                                # one finished first: not partial
    ([pod(1, 5, ok=False), pod(1, 11), pod(7, 17)], [(5, 7)]),     # evicted, the replacement waited
    ([pod(None), pod(None)], []),                                  # nothing held
])
def test_partial_intervals(pods, expected):
    assert M.partial_intervals(2, pods, end=20) == expected


def test_partial_gangs_count_only_gangs_partial_for_long_enough():
    trace = [job("quick"), job("slow"), job("single", pods=1)]
    pods = {"quick": [pod(1, 9), pod(1.4, 9)], "slow": [pod(1, 9), pod(3, 9)], "single": [pod(1, 5)]}
    assert M.partial_gangs(trace, pods, min_seconds=1.0, end=20) == [
        {"job": "slow", "size": "2x8", "longest_partial_s": 2.0}]


@pytest.mark.parametrize("pods, placed", [
    ([pod(1, 11), pod(4, 14)], 4),
    ([pod(1, 3), pod(5, 9)], 5),                       # the first finished before the second started
    ([pod(1, 11), pod(None)], None),
    ([pod(1, 2, ok=False), pod(1, 11), pod(6, 16)], 1),   # placed once; an eviction later does not undo it
])
def test_time_when_placed(pods, placed):
    assert M.time_when_placed(job(), pods) == placed


def test_queueing_delays_and_percentiles_by_size():
    trace = [job("g1"), job("g2"), job("s1", pods=1, gpus=4), job("never")]
    pods = {"g1": [pod(5, 15, job="g1"), pod(6, 15, job="g1")], "g2": [pod(2, 9, job="g2")] * 2,
            "s1": [pod(3, 9, job="s1", gpus=4)], "never": [pod(None, job="never")] * 2}
    delays = M.queueing_delays(trace, pods, {"g1": 1, "g2": 1, "s1": 2, "never": 0})
    assert delays == {"g1": 5, "g2": 1, "s1": 1}
    assert M.delays_by_size(trace, delays) == {"2x8": {"jobs": 2, "p50_s": 3.0, "p95_s": pytest.approx(4.8)},
                                               "4 GPU": {"jobs": 1, "p50_s": 1.0, "p95_s": 1.0}}


def test_allocation_is_averaged_only_while_demand_reaches_capacity():
    # capacity 16: job a (16 GPUs) runs 0-10; job b (8 GPUs) arrives at 5 and runs 10-20.
    trace = [job("a", pods=2), job("b", pods=1, arrival=5)]
    pods = {"a": [pod(0, 10, job="a"), pod(0, 10, job="a")], "b": [pod(10, 20, job="b")]}
    line = M.timeline(trace, pods, {"a": 0, "b": 5}, end=20, step=1)
    assert list(line.held[:12]) == [16] * 10 + [8] * 2
    assert list(line.demand[4:7]) == [16, 24, 24]
    allocation, seconds = M.allocation_while_saturated(line, 16)
    assert (allocation, seconds) == (1.0, 10.0)  # saturated 0-10 only, all 16 held; 10-20 is not saturated
    line = M.timeline(trace, {"a": [pod(0, 10, job="a")], "b": [pod(10, 20, job="b")]}, {"a": 0, "b": 5}, 20, 1)
    assert M.allocation_while_saturated(line, 16)[0] == 0.5  # half a gang held: 8 of 16


@pytest.mark.parametrize("a_pods, goodput", [
    ([pod(0, 10, job="a"), pod(0, 10, job="a")], 1.0),                 # all kept
    ([pod(0, 4, ok=False, job="a"), pod(4, 10, job="a"), pod(0, 10, job="a")], 0.8),  # 8 GPUs x 4 s lost of 160
    ([pod(0, 10, ok=False, job="a"), pod(0, 10, ok=False, job="a")], 0.0),  # both evicted at the end
    ([pod(0, None, job="a"), pod(0, None, job="a")], 1.0),             # still running at the end: kept
])
def test_goodput_counts_only_the_work_kept_while_saturated(a_pods, goodput):
    trace = [job("a", pods=2), job("b", pods=1, arrival=0)]
    pods = {"a": a_pods, "b": []}
    line = M.timeline(trace, pods, {"a": 0, "b": 0}, end=10, step=1)
    assert M.allocation_while_saturated(line, 16)[0] == 1.0
    assert M.goodput_while_saturated(line, a_pods, 16) == pytest.approx(goodput)


def test_no_contention_gives_no_allocation_figure():
    line = M.timeline([job("a", pods=1)], {"a": [pod(0, 5, job="a")]}, {"a": 0}, end=10, step=1)
    assert M.allocation_while_saturated(line, 16) == (None, 0.0)
    assert M.goodput_while_saturated(line, [pod(0, 5, job="a")], 16) is None


def test_queue_shares_compare_held_share_with_the_weighted_fair_share_while_saturated():
    # capacity 16, weights 3:1, both demand 16 all along; a holds 8, b holds 8 -> a is 25 points under.
    trace = [job("a1", tenant="a"), job("a2", tenant="a"), job("b1", tenant="b"), job("b2", tenant="b")]
    pods = {"a1": [pod(0, 10, job="a1")], "b1": [pod(0, 10, job="b1")], "a2": [], "b2": []}
    line = M.timeline(trace, pods, {name: 0 for name in pods}, end=10, step=1)
    shares = M.queue_shares(line, 16, {"a": 3, "b": 1})
    assert shares["a"] == {"weight": 3, "weight_share": 0.75, "fair_share": 0.75, "share": 0.5,
                           "deviation_points": -25.0}
    assert shares["b"]["deviation_points"] == 25.0


@pytest.mark.parametrize("tier, nodes, split, beyond", [
    (1, ["n1", "n2"], 0, 0),          # one rack
    (1, ["n1", "n3"], 1, 1),          # two racks, one spine: beyond a rack gang's tier
    (2, ["n1", "n3"], 1, 0),          # allowed: same spine
    (2, ["n1", "n5"], 1, 1),          # two spines
    (None, ["n1", "n5"], 1, 0),       # unconstrained gang: split, but allowed
])
def test_topology_splits(tier, nodes, split, beyond):
    rack_of = {"n1": "r0", "n2": "r0", "n3": "r1", "n5": "r2"}
    spine_of = {"n1": "s0", "n2": "s0", "n3": "s0", "n5": "s1"}
    found = M.topology_splits([job(tier=tier)], {"g": [pod(0, 1, node=n) for n in nodes]}, rack_of, spine_of)
    assert found["gangs_split_across_racks"] == split
    assert len(found["beyond_allowed_tier"]) == beyond


def test_a_gang_restarted_in_another_rack_is_not_split():
    rack_of, spine_of = {"n1": "r0", "n2": "r0", "n3": "r1", "n4": "r1"}, {n: "s0" for n in ("n1", "n2", "n3", "n4")}
    restarted = [pod(0, 5, ok=False, node="n1"), pod(0, 5, ok=False, node="n2"), pod(6, 16, node="n3"), pod(6, 16, node="n4")]
    replaced = [pod(0, 5, ok=False, node="n1"), pod(0, 16, node="n2"), pod(6, 16, node="n3")]  # one pod, elsewhere
    for pods, split in ((restarted, 0), (replaced, 1)):
        found = M.topology_splits([job(tier=1)], {"g": pods}, rack_of, spine_of)
        assert found["gangs_split_across_racks"] == split
        assert len(found["beyond_allowed_tier"]) == split


def test_bind_rate_mean_and_busiest_window():
    pods = [pod(t) for t in (0, 1, 2, 3, 20)]
    assert M.bind_rate(pods, window=10) == {"pods_bound": 5, "mean_per_s": 0.25, "peak_per_s": 0.4}
    assert M.bind_rate([pod(1)]) == {"pods_bound": 1, "mean_per_s": None, "peak_per_s": None}


@pytest.mark.parametrize("waiting, held_by_a, expected", [
    # capacity 16; a gang of 16 waits while 8 GPUs are free: only a larger gang waits
    (job("w", pods=2, tenant="b"), 8, "only_larger_gangs_waiting"),
    # a single 8-GPU pod of b (under its share) waits: placement held it back
    (job("w", pods=1, tenant="b"), 8, "fitting_job_of_a_queue_under_its_share"),
    # a single 8-GPU pod of a waits, and a already holds more than its fair share (weights 1:3, 4 of 16
    # GPUs): the queue plugin held it back
    (job("w", pods=1, tenant="a"), 8, "fitting_job_of_a_queue_at_its_share"),
])
def test_idle_breakdown_names_why_gpus_stayed_free(waiting, held_by_a, expected):
    running = job("r", pods=1, tenant="a")
    demand_b = job("d", pods=2, tenant="b", arrival=0)  # keeps b's demand, never placed
    trace = [running, waiting, demand_b]
    pods = {"r": [pod(0, 10, job="r")], "w": [], "d": []}
    submitted = {"r": 0, "w": 0, "d": 0}
    line = M.timeline(trace, pods, submitted, end=10, step=1)
    breakdown = M.idle_breakdown(trace, pods, submitted, line, 16, {"a": 1, "b": 3})
    assert breakdown[expected] == 50.0  # 8 of 16 GPUs idle all along
    assert sum(breakdown.values()) == 50.0
