"""The usage figures from a window's record (pure): GPU-hours to the second, the borrowed part against an
entitlement that changes, waits and outcomes counted in the window, every grouping adding up."""

from __future__ import annotations

import pytest

from trainyard.usage.account import GROUPINGS, account, borrowed_seconds, entitled_at
from trainyard.usage.record import NO_TENANT, PodSpan, Tenancy, TrainJobFacts, UsageRecord, pod_end

H = 3600.0


def span(ns="a", pod="p", gpus=8, start=0.0, end=H, trainjob="", klass=""):
    return PodSpan(namespace=ns, pod=pod, gpus=gpus, start=start, end=end, trainjob=trainjob, priority_class=klass)


def record(*pods, trainjobs=(), since=0.0, until=10 * H, entitlement=None, namespaces=None):
    return UsageRecord(since=since, until=until, pods=list(pods), trainjobs=list(trainjobs),
                       namespaces=namespaces or {"a": Tenancy("team-a", "qa", "1.2.0"),
                                                 "b": Tenancy("team-b", "qb", "1.0.0")},
                       entitlement=entitlement if entitlement is not None else {"qa": [(0.0, 16.0)],
                                                                                 "qb": [(0.0, 16.0)]})


def by_group(rows):
    return {row.group: row for row in rows}


@pytest.mark.parametrize("pod, since, until, gpu_seconds", [
    (span(gpus=8, start=100, end=400), 0, 1000, 8 * 300),          # wholly inside
    (span(gpus=8, start=100, end=400), 200, 1000, 8 * 200),        # began before the window
    (span(gpus=8, start=100, end=400), 0, 250, 8 * 150),           # ended after it
    (span(gpus=4, start=100, end=None), 0, 1000, 4 * 900),         # still running: to the window's end
    (span(gpus=8, start=100, end=400), 500, 1000, 0),              # ended before the window
    (span(gpus=2, start=1500, end=None), 0, 1000, 0),              # started after it
])
def test_a_pod_counts_its_gpus_times_the_part_of_its_span_inside_the_window(pod, since, until, gpu_seconds):
    assert pod.held_within(since, until) == gpu_seconds


@pytest.mark.parametrize("completion, deletion, last_seen, present, end", [
    (500.0, None, 600.0, True, 500.0),      # finished, still listed: its own finish time
    (500.0, 520.0, 530.0, False, 500.0),    # finished then deleted: still its finish time
    (None, None, 600.0, True, None),        # running at the window's end
    (None, 580.0, 590.0, False, 580.0),     # deleted while running: when deletion began
    (None, None, 590.0, False, 590.0),      # vanished without a trace: its last sample
])
def test_a_pod_ends_at_its_finish_else_its_deletion_else_its_last_sample(completion, deletion, last_seen, present,
                                                                        end):
    assert pod_end(completion, deletion, last_seen, present) == end


def test_the_entitlement_is_a_step_function_of_its_samples():
    samples = [(100.0, 8.0), (200.0, 16.0)]
    times = [100.0, 200.0]
    assert [entitled_at(samples, times, t) for t in (0, 100, 150, 200, 900)] == [8, 8, 8, 16, 16]
    assert entitled_at([], [], 50) == 0


@pytest.mark.parametrize("spans, samples, expected", [
    # one 16-GPU pod for 1000 s against 8 entitled: half of it borrowed
    ([span(gpus=16, start=0, end=1000)], [(0.0, 8.0)], [8 * 1000]),
    # within the entitlement: nothing borrowed
    ([span(gpus=8, start=0, end=1000)], [(0.0, 8.0)], [0]),
    # two pods: the second one pushes the queue to 16 over 8 for 500 s, shared in proportion to GPUs
    ([span(pod="x", gpus=8, start=0, end=1000), span(pod="y", gpus=8, start=500, end=1000)], [(0.0, 8.0)],
     [4 * 500, 4 * 500]),
    # the entitlement grows at 500 s: borrowing stops then
    ([span(gpus=16, start=0, end=1000)], [(0.0, 8.0), (500.0, 16.0)], [8 * 500]),
    # no entitlement recorded (a namespace of no tenant): everything is borrowed
    ([span(gpus=4, start=0, end=100)], [], [400]),
])
def test_what_a_queue_holds_above_its_entitlement_is_borrowed(spans, samples, expected):
    assert borrowed_seconds(spans, samples, 0.0, 2000.0) == pytest.approx(expected)


def test_every_grouping_adds_up_to_the_same_gpu_hours_and_borrowing():
    pods = [span("a", "a1", 16, 0, 2 * H, trainjob="j1", klass="high"),
            span("a", "a2", 8, H, 3 * H, trainjob="j2", klass="low"),
            span("b", "b1", 8, 0, None, trainjob="j3", klass="low"),
            span("kube-system", "x", 1, 0, H)]
    jobs = [TrainJobFacts("a", "j1", runtime="torch"), TrainJobFacts("a", "j2", runtime="deepspeed"),
            TrainJobFacts("b", "j3", runtime="torch")]
    totals = set()
    for by in GROUPINGS:
        rows = account(record(*pods, trainjobs=jobs), by)
        totals.add((round(sum(r.gpu_hours for r in rows), 6), round(sum(r.gpu_hours_borrowed for r in rows), 6)))
    # 32 + 16 + 80 + 1 GPU-hours; team-a holds 24 over 16 for an hour (8), kube-system's 1 is all borrowed
    assert totals == {(129.0, 9.0)}
    tenants = by_group(account(record(*pods, trainjobs=jobs), "tenant"))
    assert (tenants["team-a"].gpu_hours, tenants["team-a"].gpu_hours_borrowed) == (48.0, pytest.approx(8.0))
    assert tenants[NO_TENANT].gpu_hours_borrowed == pytest.approx(1.0)
    runtimes = by_group(account(record(*pods, trainjobs=jobs), "runtime"))
    assert runtimes["torch"].gpu_hours == 32 + 80 and runtimes["(none)"].gpu_hours == 1


def test_waits_run_from_creation_to_the_first_pod_and_count_only_trainjobs_created_in_the_window():
    pods = [span("a", "j1-0", 8, 100, 200, trainjob="j1"), span("a", "j1-1", 8, 130, 200, trainjob="j1"),
            span("a", "j2-0", 8, 1000, 1100, trainjob="j2")]
    jobs = [TrainJobFacts("a", "j1", created=90.0), TrainJobFacts("a", "j2", created=400.0),
            TrainJobFacts("a", "j3", created=500.0, last_seen=1990.0),     # no pod yet: waiting
            TrainJobFacts("a", "j4", created=500.0, last_seen=900.0),      # deleted before it started
            TrainJobFacts("a", "old", created=-50.0)]                      # created before the window
    (team,) = account(record(*pods, trainjobs=jobs, since=0.0, until=2000.0), "tenant")
    assert (team.started, team.waiting) == (2, 1)
    assert team.wait_p50_s == pytest.approx((10 + 600) / 2)
    assert team.wait_p95_s == pytest.approx(10 + 0.95 * 590)


def test_outcomes_count_where_the_condition_turned_true_in_the_window():
    jobs = [TrainJobFacts("a", "ok", outcome="Complete", finished=500.0),
            TrainJobFacts("a", "bad", outcome="Failed", finished=700.0),
            TrainJobFacts("a", "earlier", outcome="Complete", finished=-10.0),
            TrainJobFacts("b", "running")]
    rows = by_group(account(record(trainjobs=jobs, since=0.0, until=1000.0), "tenant"))
    assert (rows["team-a"].completed, rows["team-a"].failed) == (1, 1)
    assert (rows["team-b"].completed, rows["team-b"].failed, rows["team-b"].gpu_hours) == (0, 0, 0)


def test_priority_groups_by_the_pods_class_then_the_trainjobs():
    pods = [span("a", "p0", 8, 0, H, trainjob="j1", klass=""), span("a", "p1", 8, 0, H, trainjob="j2", klass="hi")]
    jobs = [TrainJobFacts("a", "j1", priority_class="team-a-default"), TrainJobFacts("a", "j2")]
    rows = by_group(account(record(*pods, trainjobs=jobs), "priority"))
    assert {group: row.gpu_hours for group, row in rows.items()} == {"team-a-default": 8.0, "hi": 8.0}


def test_an_unknown_grouping_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="--by 'team': use one of tenant, queue, runtime, priority"):
        account(record(), "team")
