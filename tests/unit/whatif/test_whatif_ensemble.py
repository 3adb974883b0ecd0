"""The model's prediction is the mean of an ensemble of replays, each job's start shifted by up to one start latency,
and the cluster engine's compressed time is modelled by scaling the wall-clock latencies, not the jobs."""

import pytest

from trainyard.scheduling.simulator import ModelPolicy
from trainyard.scheduling.trace import TraceJob
from trainyard.whatif.compare import replay_side
from trainyard.whatif.ensemble import ENSEMBLE_MAX, ensemble_size, jittered, mean_side, start_jitter_s
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
