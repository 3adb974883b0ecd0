"""The model's prediction is the mean of an ensemble of replays, each job's start shifted by up to one start latency,
and the cluster engine's compressed time is modelled by scaling the wall-clock latencies, not the jobs."""

import statistics

import pytest

from trainyard.scheduling.simulator import ModelPolicy
from trainyard.scheduling.trace import TraceJob
from trainyard.whatif.compare import replay_side
from trainyard.whatif.ensemble import (ENSEMBLE_MAX, change_spread, ensemble_size, jittered, mean_side,
                                      start_jitter_s)
from trainyard.whatif.scenario import WALL_CLOCK_FIELDS, at_speedup, scenario
from trainyard.whatif.workload import generated

from stackfiles import config, local_document


@pytest.mark.parametrize("jobs, members", [(1, ENSEMBLE_MAX), (24, ENSEMBLE_MAX), (150, ENSEMBLE_MAX), (300, 13),
                                           (2000, 2), (5000, 1), (0, ENSEMBLE_MAX)])
def test_a_long_trace_gets_fewer_members(jobs, members):
    assert ensemble_size(jobs) == members


def test_member_zero_is_the_trace_and_the_others_shift_each_job_later_by_less_than_the_jitter():
    trace = [TraceJob(f"j{i}", "team-a", 10.0 * i, 60.0, 1, 1, None) for i in range(50)]
    assert jittered(trace, 2.0, seed=7, member=0) == trace
    shifted = jittered(trace, 2.0, seed=7, member=3)
    deltas = [after.arrival - before.arrival for before, after in zip(trace, shifted)]
    assert all(0.0 <= d < 2.0 for d in deltas) and len(set(deltas)) == len(deltas)
    assert shifted == jittered(trace, 2.0, seed=7, member=3)
    assert shifted != jittered(trace, 2.0, seed=7, member=4)
    assert [(a.name, a.duration, a.gpus) for a in shifted] == [(b.name, b.duration, b.gpus) for b in trace]


def test_the_jitter_is_the_submit_latency_and_one_cycle():
    assert start_jitter_s(ModelPolicy(cycle_s=0.5, submit_latency_s=0.2)) == pytest.approx(0.7)


@pytest.mark.parametrize("members, expected", [
    ([1.0, 2.0, 6.0], 3.0),
    ([3, 3, 3], 3),                          # a count all agree on stays an integer
    ([None, 0.5, 0.7], 0.6),                 # over the members that have one
    ([None, None], None),
    (["quota", "capability"], "quota"),      # words: the first member's
    ([[1, 2], [3]], [1, 2]),
    ([{"a": 1.0, "b": {"c": 2.0}}, {"a": 3.0, "b": {"c": 4.0, "d": 1}}], {"a": 2.0, "b": {"c": 3.0, "d": 1}}),
])
def test_members_are_averaged_leaf_by_leaf(members, expected):
    assert mean_side(members) == expected


def test_a_side_is_the_mean_of_its_members(tmp_path):
    current = scenario(config(local_document(), tmp_path))
    trace = generated(current, ["team-a", "team-b"], seed=5, jobs=40)
    side = replay_side(current, trace, seed=5)
    assert side["ensemble"] == {"members": ensemble_size(40), "start_jitter_s": 0.7}
    one = replay_side(current, trace, seed=5, members=1)
    assert one["ensemble"]["members"] == 1
    allocations = []
    for member in range(4):
        shifted = jittered(trace, 0.7, 5, member)
        allocations.append(replay_side(current, shifted, seed=5 + member, members=1)["allocation"])
    assert replay_side(current, trace, seed=5, members=4)["allocation"] == pytest.approx(
        sum(allocations) / 4, abs=1e-3)


def test_compressed_time_scales_the_latencies_and_loops_and_nothing_else(tmp_path):
    current = scenario(config(local_document(), tmp_path))
    fast = at_speedup(current, 4.0)
    for name in WALL_CLOCK_FIELDS:
        before, after = getattr(current.policy, name), getattr(fast.policy, name)
        assert after == (None if before is None else pytest.approx(4 * before)), name
    assert (fast.nodes, fast.tenants, fast.policy.capability) == (current.nodes, current.tenants,
                                                                  current.policy.capability)
    assert at_speedup(current, 1.0) is current


def member(allocation, share_a, wait_8):
    return {"allocation": allocation, "goodput": None, "tenants": {"team-a": {"share": share_a, "wait_p50_s": None}},
            "wait_by_size": {"8 GPU": {"p50_s": wait_8}}}


def test_the_change_varies_as_the_paired_members_changes_do():
    current = [member(0.60, 0.5, 10.0), member(0.62, 0.5, 30.0), member(0.61, 0.5, None)]
    proposed = [member(0.70, 0.5, 20.0), member(0.68, 0.5, 10.0), member(0.71, 0.5, 5.0)]
    spread = change_spread(current, proposed)
    assert spread["allocation"] == pytest.approx(statistics.pstdev([0.10, 0.06, 0.10]), abs=1e-4)
    assert spread["share.team-a"] == 0.0
    assert spread["wait_p50.8 GPU"] == pytest.approx(15.0)  # two pairs with the figure: +10 and -20
    assert "goodput" not in spread and "tenant_wait_p50.team-a" not in spread
    assert change_spread(current[:1], proposed[:1]) == {}  # one pair says nothing about spread


def test_the_table_shows_how_much_a_change_varies(tmp_path):
    from trainyard.whatif.compare import compare, table_rows
    from stackfiles import edited, roomy, tenants

    base = roomy(local_document())
    doubled = edited(base, lambda d: tenants(d)["team-b"]["queue"].update(weight=4))
    trace = generated(scenario(config(base, tmp_path, "a.yaml")), ["team-a", "team-b"], seed=31, jobs=24)
    result = compare(scenario(config(base, tmp_path, "a.yaml")), scenario(config(doubled, tmp_path, "b.yaml")),
                     trace, seed=31)
    assert result["current"]["ensemble"]["members"] == result["proposed"]["ensemble"]["members"] == ENSEMBLE_MAX
    allocation = next(row for row in table_rows(result) if row[0] == "GPU allocation (saturated)")
    spread = result["proposed"]["change_spread"]["allocation"]
    assert 100 * spread >= 0.5 and " ± " in allocation[3], allocation  # a knife-edge: timing moves it


def test_a_job_gets_the_same_draw_whichever_other_jobs_a_side_keeps():
    trace = [TraceJob(f"j{i}", "team-a", 10.0 * i, 60.0, 1, 1, None) for i in range(20)]
    full = {job.name: job.arrival for job in jittered(trace, 3.0, seed=2, member=5)}
    kept = jittered(trace[::3], 3.0, seed=2, member=5)
    assert all(job.arrival == full[job.name] for job in kept)
