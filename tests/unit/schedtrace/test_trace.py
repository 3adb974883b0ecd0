"""The seeded gang trace: deterministic, the documented mix, gangs that fit their tier, the offered load."""

from collections import Counter

import pytest

from trainyard.scheduling import trace as T
from trainyard.scheduling.trace import DEFAULT_TENANTS, Tenant


def test_the_same_seed_gives_the_same_trace_and_another_seed_another():
    assert T.generate(7, 50, 512) == T.generate(7, 50, 512)
    assert T.generate(7, 50, 512) != T.generate(8, 50, 512)


def test_jobs_arrive_in_order_and_offer_the_asked_overload():
    jobs = T.generate(3, 200, 512, overload=1.5)
    arrivals = [j.arrival for j in jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0.0
    offered_rate = T.offered_gpu_seconds(jobs) / arrivals[-1]
    assert offered_rate == pytest.approx(1.5 * 512, rel=0.01)


def test_the_mix_has_every_single_size_gangs_and_every_tenant():
    jobs = T.generate(12, 300, 512)
    singles = {j.gpus for j in jobs if not j.is_gang}
    gangs = {j.pods for j in jobs if j.is_gang}
    assert singles == set(T.SINGLE_GPUS)
    assert gangs == set(T.GANG_PODS)
    assert all(j.gpus_per_pod == T.GANG_GPUS_PER_POD for j in jobs if j.is_gang)
    assert set(Counter(j.tenant for j in jobs)) == {t.name for t in T.DEFAULT_TENANTS}
    assert len({j.name for j in jobs}) == len(jobs)


@pytest.mark.parametrize("rack_nodes, spine_nodes", [(8, 32), (2, 4), (1, 2)])
def test_every_gang_fits_its_allowed_tier(rack_nodes, spine_nodes):
    for job in T.generate(5, 200, 512, rack_nodes=rack_nodes, spine_nodes=spine_nodes):
        if not job.is_gang:
            assert job.tier is None
        elif job.tier == T.RACK_TIER:
            assert job.pods <= min(rack_nodes, T.LARGEST_RACK_GANG)
        else:
            assert job.tier == T.SPINE_TIER and job.pods <= spine_nodes


def test_durations_scale_and_stay_within_bounds():
    base, half = T.generate(4, 100, 512), T.generate(4, 100, 512, duration_scale=0.5)
    assert [j.duration for j in half] == pytest.approx([j.duration / 2 for j in base], abs=0.1)
    assert all(15.0 <= j.duration <= 240.0 for j in base)


@pytest.mark.parametrize("job, size", [
    (T.TraceJob("a", "t", 0, 1, 1, 4, None), "4 GPU"),
    (T.TraceJob("b", "t", 0, 1, 3, 8, 1), "3x8"),
])
def test_size_buckets(job, size):
    assert job.size == size


def test_size_buckets_sort_single_pods_first_then_gangs_by_size():
    assert sorted(["2x8", "8 GPU", "1 GPU", "8x8", "4 GPU"], key=T.size_order) == ["1 GPU", "4 GPU", "8 GPU", "2x8", "8x8"]


@pytest.mark.parametrize("kwargs", [{"jobs": 0}, {"capacity_gpus": 0}, {"overload": 0}])
def test_refuses_an_empty_trace(kwargs):
    with pytest.raises(ValueError):
        T.generate(**{"seed": 1, "jobs": 10, "capacity_gpus": 64, **kwargs})


@pytest.mark.parametrize("weights, capacity, expected", [
    ((4, 2, 1), 512, {"t0": 293, "t1": 146, "t2": 73}),
    ((1, 1, 1), 10, {"t0": 4, "t1": 3, "t2": 3}),
    ((1,), 7, {"t0": 7}),
    ((3, 1), 0, {"t0": 0, "t1": 0}),
])
def test_weighted_deserved_splits_whole_gpus_by_weight(weights, capacity, expected):
    from trainyard.schedtrace.objects import weighted_deserved

    tenants = tuple(Tenant(f"t{i}", w, 1 / len(weights)) for i, w in enumerate(weights))
    out = weighted_deserved(tenants, capacity)
    assert out == expected and sum(out.values()) == capacity


def test_capacity_queues_carry_deserved_and_proportion_queues_do_not():
    from trainyard.schedtrace.objects import tenant_queues_for

    capacity = {q["metadata"]["name"]: q["spec"].get("deserved") for q in tenant_queues_for(DEFAULT_TENANTS, 512, "capacity")}
    proportion = {q["metadata"]["name"]: q["spec"].get("deserved") for q in tenant_queues_for(DEFAULT_TENANTS, 512, "proportion")}
    assert capacity == {"team-a": {"nvidia.com/gpu": "293"}, "team-b": {"nvidia.com/gpu": "146"},
                        "team-c": {"nvidia.com/gpu": "73"}}
    assert proportion == dict.fromkeys(capacity)
