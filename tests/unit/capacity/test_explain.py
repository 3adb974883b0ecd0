"""`fit --explain`'s suggestions, table-driven: each one passes fit's own checks on the changed gang or cluster."""

from __future__ import annotations

from fractions import Fraction

import pytest

from trainyard.capacity import explain as X
from trainyard.capacity.fit import FITS, REFUSED, WAITS, Verdict, fit, gang_from_objects
from trainyard.scheduling.cluster_state import nodes_from, queue_uses

from capacity_builders import FOUR, GPU, built, pod, pod_group, queue, quota

RACK1 = {"mode": "hard", "highestTierAllowed": 1}


def words(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def world(pods, groups=(), queues=(queue("team-a"),)):
    return nodes_from(FOUR, pods), queue_uses(list(queues), list(groups), pods)


def test_fewer_nodes_names_the_most_that_fit_now_and_fit_agrees():
    pods = [pod("x", "n0", 8, ns="other"), pod("y", "n1", 8, ns="other")]  # two of four nodes taken
    nodes, queues = world(pods)
    gang = gang_from_objects(built(4, 8))
    assert fit(gang, [], queues, nodes)[-1].outcome != FITS
    line = X.fewer_nodes(gang, [], queues, nodes)
    assert line == "numNodes 2 instead of 4: fits now: n2 1 pod, n3 1 pod"
    assert fit(X.smaller(gang, 2), [], queues, nodes)[-1].outcome == FITS


def test_fewer_nodes_under_a_quota_the_job_exceeds_for_good():
    nodes, queues = world([])
    gang = gang_from_objects(built(3, 8))
    limit = [quota("q", {f"requests.{GPU}": 16}, {f"requests.{GPU}": 0})]
    assert fit(gang, limit, queues, nodes)[-1].check == "quota"
    assert X.fewer_nodes(gang, limit, queues, nodes).startswith("numNodes 2 instead of 3: fits")


def test_a_gang_of_unlike_pods_is_not_shrunk():
    gang = gang_from_objects(built(2, 8))
    gang.pods[1] = {GPU: Fraction(4)}
    assert X.smaller(gang, 1) is None


def test_a_wider_tier_is_suggested_when_only_the_rack_rule_blocks():
    pods = [pod("a", "n0", 4, ns="other"), pod("b", "n2", 4, ns="other")]  # each rack keeps one full node
    nodes, queues = world(pods)
    gang = gang_from_objects(built(2, 8, topology=RACK1))
    assert fit(gang, [], queues, nodes)[-1].check == "topology"
    line = X.wider_topology(gang, [], queues, nodes)
    assert line == ("networkTopology highestTierAllowed 2 (a runtime that allows it): fits in spine spine-0: "
                    "n1 1 pod, n3 1 pod")
    assert X.wider_topology(gang_from_objects(built(2, 8)), [], queues, nodes) is None  # no topology to widen
    # the runtimes a user could switch to are named when known; none known at that tier: who can add one
    spine = {2: ["ClusterTrainingRuntime/torch-spine"], None: ["ClusterTrainingRuntime/torch-distributed"]}
    assert X.wider_topology(gang, [], queues, nodes, spine).startswith(
        "networkTopology highestTierAllowed 2 (runtime ClusterTrainingRuntime/torch-spine): fits in spine spine-0")
    assert X.wider_topology(gang, [], queues, nodes, {None: ["ClusterTrainingRuntime/torch-distributed"]}).startswith(
        "networkTopology highestTierAllowed 2 (no runtime of this framework usable in ns has it: ask the platform team)")


def _runtime(name, kind="ClusterTrainingRuntime", framework="torch", release=None, topology=None, namespace=None):
    labels = {"trainer.kubeflow.org/framework": framework}
    if release:
        labels["trainyard.dev/catalog-version"] = release
    metadata = {"name": name, "labels": labels, **({"namespace": namespace} if namespace else {})}
    policy = {"volcano": {"networkTopology": topology}} if topology else {"volcano": {}}
    return {"kind": kind, "metadata": metadata, "spec": {"podGroupPolicy": policy}}


def test_usable_runtimes_by_tier_follow_the_framework_the_namespace_and_its_catalog_pin():
    runtimes = [
        _runtime("torch-distributed", release="1.2.0"),
        _runtime("torch-distributed-topology", release="1.2.0", topology=RACK1),
        _runtime("torch-soft", topology={"mode": "soft", "highestTierAllowed": 1}),  # soft: no hard tier
        _runtime("torch-old-spine", release="1.1.0", topology={"mode": "hard", "highestTierAllowed": 2}),  # not pinned
        _runtime("mpi", framework="mpi"),
        _runtime("torch-local", kind="TrainingRuntime", namespace="ns", topology={"highestTierAllowed": 2}),
        _runtime("torch-elsewhere", kind="TrainingRuntime", namespace="other"),
    ]
    assert X.usable_runtimes(runtimes, "ns", "1.2.0", "torch") == {
        None: ["ClusterTrainingRuntime/torch-distributed", "ClusterTrainingRuntime/torch-soft"],
        1: ["ClusterTrainingRuntime/torch-distributed-topology"],
        2: ["TrainingRuntime/torch-local"]}
    assert 2 in X.usable_runtimes(runtimes, "ns", None, "torch")  # no pin: every release's cluster runtime
    assert X.usable_runtimes(runtimes, "ns", "1.2.0", None) == {}  # a runtime with no framework label: unknown


def test_after_the_soonest_running_job_that_makes_room():
    """Queue capability 16: a 2 x 8 gang waits behind team-a's running 8-GPU job; another queue's job ending
    sooner makes no room in team-a's queue, so the suggestion names team-a's job and its time left."""
    pods = [pod("h-0", "n0", 8, group="hold"), pod("o-0", "n1", 8, ns="b", group="other")]
    groups = [pod_group("hold", "team-a", 8, phase="Running", running=1),
              pod_group("other", "team-b", 8, ns="b", phase="Running", running=1)]
    nodes, queues = world(pods, groups, (queue("team-a", capability=16), queue("team-b")))
    running = X.holders(pods, {"ns/hold": "team-a", "b/other": "team-b"}, {"ns/hold": 1200.0, "b/other": 60.0})
    assert [h.key for h in running] == ["b/other", "ns/hold"]
    gang = gang_from_objects(built(2, 8))
    assert fit(gang, [], queues, nodes)[-1].check == "queue"
    line = X.after_jobs_end(gang, [], queues, nodes, running, words)
    assert line.startswith("after ns/hold ends (about 20 min left): fits now: ")


def test_after_several_jobs_end_when_no_one_alone_makes_room():
    pods = [pod(f"p{i}", f"n{i}", 8, ns=f"o{i}", group=f"g{i}") for i in range(4)]
    groups = [pod_group(f"g{i}", "team-b", 8, ns=f"o{i}", phase="Running", running=1) for i in range(4)]
    nodes, queues = world(pods, groups, (queue("team-a"), queue("team-b")))
    running = X.holders(pods, {f"o{i}/g{i}": "team-b" for i in range(4)}, {f"o{i}/g{i}": 100.0 * (i + 1) for i in range(4)})
    line = X.after_jobs_end(gang_from_objects(built(2, 8)), [], queues, nodes, running, words)
    assert line.startswith("after o0/g0, o1/g1 end (about 3 min left): fits now: ")


def test_explain_lists_what_passes_and_higher_priorities_rank_above_the_gangs_own():
    pods = [pod("x", "n0", 8, ns="other"), pod("y", "n1", 8, ns="other")]
    nodes, queues = world(pods)
    found = X.explain(gang_from_objects(built(4, 8)), [], queues, nodes, [], words)
    assert found == ["numNodes 2 instead of 4: fits now: n2 1 pod, n3 1 pod"]
    values = {"low": 100, "default": 1000, "high": 10000, "urgent": 20000}
    assert X.higher_priorities("default", ["low", "high", "urgent", "default"], values) == ["urgent", "high"]
    assert X.higher_priorities(None, ["low"], values) == ["low"]


@pytest.mark.parametrize("outcome, check, helps", [(WAITS, "queue", True), (WAITS, "fragmentation", True),
                                                    (WAITS, "topology", True), (WAITS, "cluster", True),
                                                    (WAITS, "quota", False), (REFUSED, "cluster", False),
                                                    (REFUSED, "node size", False), (REFUSED, "quota", False)])
def test_a_priority_is_offered_only_where_queue_order_matters(outcome, check, helps):
    """A quota counts every pod that exists, whatever its priority: offering a class there promised a start the
    quota forbids (seen on a fresh make up: 'training-high: starts now' for a job blocked by team-a's quota)."""
    assert X.priority_can_help(Verdict(outcome, check, "")) is helps
