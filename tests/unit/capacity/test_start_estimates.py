"""Start estimates from listed objects: running gangs and what they have left, waiting gangs in Volcano's order,
the queues' rules; then the model's answer for the simplest live case."""

import pytest

from trainyard.capacity import estimates as E
from trainyard.scheduling.cluster_state import nodes_from
from trainyard.scheduling.estimate import DEFAULT_RUN_S

from capacity_builders import FOUR, pod, pod_group, queue

NOW = 1_800_000_000.0


def started(obj: dict, seconds_ago: float) -> dict:
    from datetime import datetime, timezone

    obj["status"]["startTime"] = datetime.fromtimestamp(NOW - seconds_ago, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return obj


def created(obj: dict, stamp: str) -> dict:
    obj["metadata"]["creationTimestamp"] = stamp
    return obj


def trainjob(name: str, ns: str = "ns", remaining: int | None = None) -> dict:
    status = {"trainerStatus": {"estimatedRemainingSeconds": remaining, "lastUpdatedTime": "2027-01-15T08:00:00Z"}} \
        if remaining is not None else {}
    return {"metadata": {"name": name, "namespace": ns}, "status": status}


def test_running_gangs_group_bound_pods_and_take_the_trainers_estimate_else_the_default():
    pods = [started(pod("a-0", "n0", 8, group="a"), 600), started(pod("a-1", "n1", 8, group="a"), 590),
            started(pod("b-0", "n2", 4, group="b"), 100), pod("free", None, 8, group="c"),
            started(pod("plain", "n3", 2), 50), pod("done", "n3", 2, phase="Succeeded", group="d")]
    running = E.running_gangs(pods, E.trainer_remaining([trainjob("a", remaining=300)]), NOW,
                              queue_of={"ns/a": "team-a", "ns/b": "team-b"})
    assert [(g.key, g.queue, g.pods, g.remaining_s, g.guessed) for g in running] == [
        ("ns/a", "team-a", (("n0", 8), ("n1", 8)), 300.0, False),
        ("ns/b", "team-b", (("n2", 4),), DEFAULT_RUN_S - 100, True),
        ("pod:ns/plain", "", (("n3", 2),), DEFAULT_RUN_S - 50, True)]


def test_pending_gangs_are_the_waiting_groups_oldest_first_with_shape_tier_and_priority():
    groups = [created(pod_group("late", "team-a", 16, members=2, phase="Pending"), "2027-01-15T08:00:05Z"),
              created(pod_group("early", "team-b", 8, phase="Inqueue"), "2027-01-15T08:00:01Z"),
              created(pod_group("runs", "team-a", 8, phase="Running", running=1), "2027-01-15T07:00:00Z"),
              created(pod_group("cpu", "team-a", 0, phase="Pending"), "2027-01-15T07:00:00Z")]
    groups[0]["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    groups[0]["spec"]["priorityClassName"] = "training-high"
    pending = E.pending_gangs(groups, {"training-high": 10000}, default_run_s=900)
    assert [(g.key, g.queue, g.pods, g.gpus_per_pod, g.tier, g.priority, g.run_s) for g in pending] == [
        ("ns/early", "team-b", 1, 8, None, 0, 900), ("ns/late", "team-a", 2, 8, 1, 10000, 900)]
    assert all(g.guessed for g in pending)  # a waiting job's run time is never known


def test_queue_rules_follow_the_scheduler_configuration():
    queues = [queue("root"), queue("team-a", capability=16, weight=2), queue("team-b", deserved=8)]
    weights, policy = E.queue_policy(queues, "proportion")
    assert weights == {"team-a": 2.0, "team-b": 1.0}
    assert (policy.queue_plugin, dict(policy.capability)) == ("proportion", {"team-a": 16})
    _, elastic = E.queue_policy(queues, "capacity")
    assert (elastic.queue_plugin, dict(elastic.deserved)) == ("capacity", {"team-b": 8})


@pytest.mark.parametrize("conf, plugin", [
    ("actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: capacity\n", "capacity"),
    ("actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: proportion\n", "proportion"),
    ("", "proportion"), (": not yaml [", "proportion")])
def test_queue_plugin_of(conf, plugin):
    assert E.queue_plugin_of(conf) == plugin


def test_a_job_behind_a_full_queue_starts_when_the_running_job_ends():
    """team-a may hold 16 GPUs and holds them in a job with 20 min left: a new 2 x 8 gang of team-a starts then."""
    pods = [started(pod("a-0", "n0", 8, group="run"), 60), started(pod("a-1", "n1", 8, group="run"), 60)]
    groups = [pod_group("run", "team-a", 16, members=2, phase="Running", running=2)]
    given = E.inputs(nodes_from(FOUR, pods), pods, groups, [queue("team-a", capability=16)],
                     [trainjob("run", remaining=1200)], {}, "proportion", NOW)
    extra = E.gang_to_estimate("ns", "new", "team-a", [{"nvidia.com/gpu": 8}] * 2, None, 0)
    found = E.estimates(given, extra)["ns/new"]
    assert found.position == 1 and 1200 <= found.start_in_s <= 1200.5 and not found.guessed


@pytest.mark.parametrize("waiting, words", [
    (0, None), (E.MOST_PENDING, None),
    (E.MOST_PENDING + 1, f"none: {E.MOST_PENDING + 1} gangs wait, more than the {E.MOST_PENDING} the model replays in time"),
])
def test_no_estimate_above_the_gangs_the_model_replays_in_time(waiting, words):
    assert E.too_many_to_estimate(waiting) == words


def test_a_tenants_estimate_never_reads_another_tenants_trainer_report():
    """team-b's running job reports 20 min left; team-a's waiting gang must not learn it from its own estimate."""
    from trainyard.capacity.start_estimator import told_to_their_tenants

    pods = [started(pod(f"b-{i}", f"n{i}", 8, ns="team-b", group="run"), 60) for i in range(4)]
    groups = [pod_group("run", "team-b", 32, members=4, phase="Running", running=4, ns="team-b"),
              created(pod_group("wait-a", "team-a", 8, phase="Pending", ns="team-a"), "2027-01-15T08:00:01Z"),
              created(pod_group("wait-b", "team-b", 8, phase="Pending", ns="team-b"), "2027-01-15T08:00:02Z")]
    reports = [trainjob("run", ns="team-b", remaining=1200)]
    per_namespace = {ns: E.inputs(nodes_from(FOUR, pods), pods, groups, [queue("team-a"), queue("team-b")],
                                  E.reports_one_tenant_may_see(reports, ns), {}, "proportion", NOW)
                     for ns in ("team-a", "team-b")}
    told = dict(told_to_their_tenants(per_namespace))
    assert set(told) == {"team-a/wait-a", "team-b/wait-b"}
    assert 1200 <= told["team-b/wait-b"].start_in_s <= 1200.5  # its own tenant's report
    assert not told["team-b/wait-b"].guessed
    # team-a's start is the stated default's (team-b's report is not its to read), so it is given no time
    assert told["team-a/wait-a"].start_in_s == pytest.approx(DEFAULT_RUN_S - 60, abs=1)
    assert told["team-a/wait-a"].guessed
