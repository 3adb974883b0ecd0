"""The fast model of vc-scheduler: deterministic, gang and topology rules kept, and the behaviours the trace
bench measured on the real scheduler (proportion's cap idles GPUs that elastic queues use; reclaim evicts whole
jobs so a starving gang starts)."""

import pytest

from trainyard.schedtrace import metrics as M
from trainyard.scheduling.simulator import ModelNode, ModelPolicy, proportion_overused, proportion_share, simulate
from trainyard.scheduling.trace import TraceJob, generate

WEIGHTS = {"a": 1, "b": 1}


def nodes(count: int, per_rack: int, per_spine: int = 32) -> list[ModelNode]:
    return [ModelNode(f"n{i}", f"rack-{i // per_rack}", f"spine-{i // per_spine}", 8) for i in range(count)]


TENANTS = {"team-a": 4, "team-b": 2, "team-c": 1}
# The bench's shape (64 nodes x 8 GPUs, racks of 8 under spines of 32): every gang fits its queue's share, as on
# the bench; a cluster smaller than the biggest gang over its lightest queue's share deadlocks `proportion`.


def held_at(pods: list[M.PodRecord], t: float) -> int:
    return sum(p.gpus for p in pods if M.held(p, t))


def test_the_same_seed_replays_the_same_records():
    trace = generate(3, 40, 512)
    first = simulate(trace, nodes(64, 8), TENANTS, seed=5)
    assert simulate(trace, nodes(64, 8), TENANTS, seed=5) == first
    submitted, pods, end = first
    grouped = M.by_job(pods)
    assert all(M.job_finished(job, grouped[job.name]) is not None for job in trace)
    assert end >= max(p.ended for p in pods)


def test_gangs_bind_whole_and_within_their_hard_tier():
    trace = generate(8, 60, 512)
    _, pods, _ = simulate(trace, nodes(64, 8), TENANTS, seed=1)
    grouped = M.by_job(pods)
    assert any(job.tier == 1 for job in trace) and any(job.tier == 2 for job in trace)
    for job in trace:
        mine = grouped[job.name]
        assert len(mine) == job.pods and len({p.bound for p in mine}) == 1  # whole, in one cycle
        if job.tier:
            per_domain = 8 if job.tier == 1 else 32
            assert len({int(p.node[1:]) // per_domain for p in mine}) == 1, job


def test_proportion_idles_gpus_an_elastic_queue_would_use():
    """Queue b's gang asks more than its water-filled share: `proportion` keeps both at 16 GPUs and 16 idle;
    `capacity` (deserved 16 each, capability the cluster) lets the gang in and fills the cluster."""
    trace = [TraceJob(f"a{i}", "a", 0.0, 10.0, 1, 8, None) for i in range(4)] + [TraceJob("g", "b", 0.0, 10.0, 3, 8, None)]
    _, proportional, _ = simulate(trace, nodes(4, 4), WEIGHTS, ModelPolicy(), seed=0)
    _, elastic, _ = simulate(trace, nodes(4, 4), WEIGHTS,
                             ModelPolicy(queue_plugin="capacity", deserved={"a": 16, "b": 16}), seed=0)
    assert held_at(proportional, 5.0) == 16
    assert held_at(elastic, 5.0) == 32


def test_reclaim_evicts_whole_jobs_of_the_lender_so_the_starving_gang_starts():
    lender = [TraceJob(f"a{i}", "a", 0.0, 100.0, 1, 8, None) for i in range(4)]
    starving = TraceJob("g", "b", 1.0, 10.0, 2, 8, 1)
    policy = ModelPolicy(queue_plugin="capacity", deserved={"a": 16, "b": 16})
    _, waited, _ = simulate(lender + [starving], nodes(4, 4), WEIGHTS, policy, seed=0)
    _, reclaimed, _ = simulate(lender + [starving], nodes(4, 4), WEIGHTS,
                               ModelPolicy(queue_plugin="capacity", deserved={"a": 16, "b": 16}, reclaim_after_s=2.0),
                               seed=0)
    start = {run: min(p.bound for p in pods if p.job == "g") for run, pods in (("waited", waited), ("reclaimed", reclaimed))}
    assert start["waited"] >= 100.0 and start["reclaimed"] <= 5.0, start
    evicted = [p for p in reclaimed if not p.succeeded]
    assert len(evicted) == 2 and len({p.job for p in evicted}) == 2  # two whole one-pod jobs
    assert all(p.ended <= start["reclaimed"] for p in evicted)
    grouped = M.by_job(reclaimed)
    for job in lender:  # each evicted job ran again from the start and finished
        assert M.job_finished(job, grouped[job.name]) is not None
        assert sum(1 for p in grouped[job.name] if p.succeeded) == 1


@pytest.mark.parametrize("plugin", ["proportion", "capacity"])
def test_a_lone_queue_gets_the_whole_cluster(plugin):
    trace = [TraceJob(f"a{i}", "a", 0.0, 10.0, 1, 8, None) for i in range(4)]
    _, pods, _ = simulate(trace, nodes(4, 2), WEIGHTS, ModelPolicy(queue_plugin=plugin, deserved={"a": 16, "b": 16}), seed=0)
    assert held_at(pods, 5.0) == 32


def test_final_share_reclaims_for_a_gang_bigger_than_its_queues_share():
    """b deserves 16 GPUs and waits for a 3x8 gang: the deserved rule never evicts for it (16 < 24); under the
    final-share rule a (48 held, 8 deserved) keeps a share above b's with the gang, so three of its jobs go."""
    lender = [TraceJob(f"a{i}", "a", 0.0, 100.0, 1, 8, None) for i in range(6)]
    trace = lender + [TraceJob("g", "b", 1.0, 10.0, 3, 8, 1)]
    start = {}
    for rule in ("deserved", "final-share"):
        policy = ModelPolicy(queue_plugin="capacity", deserved={"a": 8, "b": 16}, reclaim_after_s=2.0, reclaim_rule=rule)
        _, pods, _ = simulate(trace, nodes(6, 6), WEIGHTS, policy, seed=0)
        start[rule] = min(p.bound for p in pods if p.job == "g")
        if rule == "final-share":
            assert len({p.job for p in pods if not p.succeeded}) == 3
    assert start["deserved"] >= 100.0 and start["final-share"] <= 5.0, start


def test_several_evictions_in_flight_serve_several_gangs_at_once():
    lender = [TraceJob(f"a{i}", "a", 0.0, 100.0, 1, 8, None) for i in range(8)]
    gangs = [TraceJob("g1", "b", 1.0, 50.0, 2, 8, 1), TraceJob("g2", "b", 1.0, 50.0, 2, 8, 1)]
    starts = {}
    for inflight in (1, 2):
        policy = ModelPolicy(queue_plugin="capacity", deserved={"a": 32, "b": 32}, reclaim_after_s=2.0,
                             reclaim_inflight=inflight, resume_after_s=30.0)
        _, pods, _ = simulate(lender + gangs, nodes(8, 4), WEIGHTS, policy, seed=0)
        starts[inflight] = sorted(min(p.bound for p in pods if p.job == g.name) for g in gangs)
    assert starts[2][1] < starts[1][1], starts


def test_held_nodes_wait_for_their_gang_while_the_victims_go():
    """The eviction counts on a node that is already free; while the victim's pods go (2 s), another queue's job
    arrives. Without holds it takes that node and the gang still does not fit; held, the gang starts when the
    victim is gone."""
    weights = {"a": 1, "b": 1, "c": 1}
    trace = [TraceJob(f"a{i}", "a", 0.0, 100.0, 1, 8, None) for i in range(3)]
    trace += [TraceJob("g", "b", 1.0, 10.0, 2, 8, 1), TraceJob("c0", "c", 3.6, 100.0, 1, 8, None)]
    start = {}
    for holds in (False, True):
        policy = ModelPolicy(queue_plugin="capacity", deserved={"a": 8, "b": 16, "c": 8}, reclaim_after_s=2.0,
                             evict_latency_s=2.0, reclaim_holds=holds)
        _, pods, _ = simulate(trace, nodes(4, 4), weights, policy, seed=0)
        start[holds] = min(p.bound for p in pods if p.job == "g")
    assert start[True] <= 6.0 < start[False], start


def test_a_queue_serves_its_higher_priority_job_first():
    blocker = TraceJob("run", "a", 0.0, 50.0, 1, 8, None)
    low = TraceJob("low", "a", 1.0, 10.0, 1, 8, None, priority=100)
    high = TraceJob("high", "a", 2.0, 10.0, 1, 8, None, priority=10000)
    _, pods, _ = simulate([blocker, low, high], nodes(1, 1), {"a": 1}, seed=0)
    bound = {p.job: p.bound for p in pods}
    assert bound["high"] < bound["low"], bound  # both waited for the one node; the later, higher one goes first
    assert bound["high"] == pytest.approx(50.0 + 0.5, abs=0.6)


def test_proportion_passes_what_a_capped_queue_cannot_use_to_the_others():
    """proportion.go: a queue's deserved stops at its capability, and the rest is water-filled to the other
    queues; with weights 3:1 and a's capability at 16 GPUs, b may use the other 16 of 32 (not only its 8)."""
    trace = [TraceJob(f"{q}{i}", q, 0.0, 100.0, 1, 8, None) for q in "ab" for i in range(4)]
    policy = ModelPolicy(capability={"a": 16})
    _, pods, _ = simulate(trace, nodes(4, 4), {"a": 3, "b": 1}, policy, seed=0)
    at_start = [p for p in pods if M.held(p, 1.0)]
    assert sum(p.gpus for p in at_start if p.job.startswith("a")) == 16
    assert sum(p.gpus for p in at_start if p.job.startswith("b")) == 16


def test_idle_stretches_are_skipped_not_stepped_through():
    """Nothing placed and nothing arriving or ending: the replay jumps to the next event (a day-long gap costs
    no more than a short one) and a job arriving after it starts on the next cycle as before."""
    trace = [TraceJob("early", "a", 0.0, 10.0, 1, 8, None), TraceJob("late", "a", 86_000.0, 10.0, 1, 8, None)]
    _, pods, end = simulate(trace, nodes(1, 1), {"a": 1}, seed=0)
    late = next(p for p in pods if p.job == "late")
    assert late.bound == pytest.approx(86_000.0 + 0.5 + 0.05, abs=1e-6)  # ready at +0.2 s, next cycle at +0.5 s
    assert end == pytest.approx(late.bound + 10.0)


@pytest.mark.parametrize("weight_b, refused", [(1, True), (4, False)])
def test_the_model_says_how_long_proportion_held_a_queue_back(weight_b, refused):
    """team-a asks for the whole cluster, team-b holds 4 GPUs and asks for 8 more: at weights 2:1 its deserved share
    is 10.7 of 32 GPUs, so its 8-GPU job is refused until its 4-GPU job ends (what vc-scheduler logs as "overused
    when considering task"); at 2:4 its share covers both and it is never held back."""
    trace = ([TraceJob(f"a{i}", "a", 0.0, 100.0, 1, 8, None) for i in range(5)]
             + [TraceJob("b0", "b", 0.0, 60.0, 1, 4, None), TraceJob("b1", "b", 1.0, 30.0, 1, 8, None)])
    held_back: dict = {}
    simulate(trace, nodes(4, 4), {"a": 2, "b": weight_b}, ModelPolicy(), seed=0, held_back=held_back)
    refused_s = held_back.get("b", {}).get("refused_s", 0.0)
    assert (refused_s > 30.0) is refused, held_back
    if not refused:
        assert refused_s == 0.0


def test_proportion_orders_queues_by_their_dominant_share_pods_included():
    """Every pod asks for one `pods`, and vc-scheduler's share is the largest allocated/deserved over all the
    dimensions (its log: `deserved <cpu ..., nvidia.com/gpu ..., pods ...>`). a holds 7 GPUs in 7 pods of the 8 it
    asks for (pod share 7/8), b 8 GPUs in 1 of 2 pods (1/2): b goes first for the one free 8-GPU node, though a's
    GPU share (7/15) is below b's (8/16)."""
    held = [(TraceJob(f"a-small{i}", "a", 0.0, 100.0, 1, 1, None), ["n0"]) for i in range(7)]
    held += [(TraceJob("b-big", "b", 0.0, 100.0, 1, 8, None), ["n1"])]
    held += [(TraceJob(f"c{i}", "c", 0.0, 100.0, 1, 8, None), [f"n{i + 2}"]) for i in range(3)]
    trace = [TraceJob("a-next", "a", 0.0, 10.0, 1, 8, None), TraceJob("b-next", "b", 0.0, 10.0, 1, 8, None)]
    _, pods, _ = simulate(trace, nodes(6, 6), {"a": 1, "b": 1, "c": 1}, seed=0, already_running=held)
    bound = {p.job: p.bound for p in pods if p.job.endswith("-next")}
    assert bound["b-next"] < 1.0 < bound["a-next"], bound


@pytest.mark.parametrize("gpus, deserved, pods, requested, share, overused", [
    (7, 15, 7, 8, 7 / 8, False),     # the pod share dominates
    (8, 16, 1, 2, 1 / 2, False),     # equal
    (12, 8, 3, 4, 12 / 8, False),    # beyond its GPUs, but a pod still waits: refused per task, not overused
    (8, 8, 2, 2, 1.0, True),         # nothing of it waits
    (0, 0, 0, 0, 0.0, True),
    (4, 0, 1, 1, 1.0, True),         # a zero deserved counts as 1 once something is allocated
])
def test_proportion_share_and_overused_follow_every_dimension(gpus, deserved, pods, requested, share, overused):
    assert proportion_share(gpus, deserved, pods, requested) == pytest.approx(share)
    assert proportion_overused(gpus, deserved, pods, requested) is overused
