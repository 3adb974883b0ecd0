"""What a lost node means for the TrainJobs that ran there, in the words of the NodeLost Event (pure)."""

from __future__ import annotations

import pytest

from trainyard.capacity import node_loss as N


def node(status: str | None, reason: str = "NodeStatusUnknown", message: str = "Kubelet stopped posting node status.",
         since: str = "2026-11-29T01:00:00Z") -> dict:
    conditions = [] if status is None else [{"type": "Ready", "status": status, "reason": reason, "message": message,
                                             "lastTransitionTime": since}]
    return {"metadata": {"name": "gpu-node-3"}, "status": {"conditions": conditions}}


@pytest.mark.parametrize("status, lost", [("True", False), (None, False), ("Unknown", True), ("False", True)])
def test_a_node_is_lost_when_not_ready(status, lost):
    assert (N.lost_node(node(status)) is not None) is lost


def test_the_lost_node_says_since_when_and_why():
    assert N.lost_node(node("Unknown")) == N.LostNode("gpu-node-3", "Unknown", "2026-11-29T01:00:00Z",
                                                      "NodeStatusUnknown Kubelet stopped posting node status.")


def pod(name: str, job: str | None, ns: str = "team-a", phase: str = "Running") -> dict:
    owners = [{"kind": "Job", "name": job, "controller": True}] if job else []
    return {"metadata": {"name": name, "namespace": ns, "ownerReferences": owners}, "status": {"phase": phase}}


def test_a_lost_pod_belongs_to_the_trainjob_whose_jobset_made_its_job():
    pods = [pod("a-node-0-1-x", "a-node-0-1"), pod("ab-node-0-0-y", "ab-node-0-0"), pod("done", "a-node-0-0", phase="Succeeded"),
            pod("loose", None), pod("other-ns", "a-node-0-0", ns="team-b")]
    found = N.stranded(pods, {"team-a": ["a", "ab"], "team-b": []})
    assert {key: [p["metadata"]["name"] for p in found[key]] for key in found} == {
        ("team-a", "a"): ["a-node-0-1-x"], ("team-a", "ab"): ["ab-node-0-0-y"]}


@pytest.mark.parametrize("jobset, words", [
    (None, "its JobSet is gone"),
    ({"spec": {}, "status": {}}, "allows no restart: when a pod of it fails, the TrainJob fails"),
    ({"spec": {"failurePolicy": {"maxRestarts": 3}}, "status": {"restarts": 1}}, "(1 of 3 restarts used, 2 left)"),
    ({"spec": {"failurePolicy": {"maxRestarts": 1}}, "status": {"restarts": 1}},
     "(1 of 1 restarts used, 0 left); the next failure fails the TrainJob"),
])
def test_the_message_says_what_the_failure_policy_leaves(jobset, words):
    text = N.message(N.lost_node(node("Unknown")), [pod("p1", "j"), pod("p0", "j")], jobset)
    assert words in text
    assert text.startswith("node gpu-node-3 is lost (Ready Unknown since 2026-11-29T01:00:00Z: NodeStatusUnknown")
    assert "pod(s) p0, p1 of this TrainJob ran there" in text


def test_one_event_per_trainjob_and_loss():
    first = N.lost_node(node("Unknown"))
    again = N.lost_node(node("Unknown", since="2026-11-29T02:00:00Z"))
    assert N.event_name("tj", "0123456789", first) == N.event_name("tj", "0123456789", first)
    assert N.event_name("tj", "0123456789", first) != N.event_name("tj", "0123456789", again)
    assert N.event_name("x" * 300, "u", first).__len__() <= 253


@pytest.mark.parametrize("deletion, now, after, due", [
    (None, 10_000, 0, False),  # not evicted: its node may come back
    ("2026-11-29T01:00:00Z", N.parse_time("2026-11-29T01:00:59Z").timestamp(), 60, False),
    ("2026-11-29T01:00:00Z", N.parse_time("2026-11-29T01:01:00Z").timestamp(), 60, True),
    ("2026-11-29T01:00:00Z", N.parse_time("2026-11-29T01:00:00Z").timestamp(), 0, True),
])
def test_an_evicted_pod_is_deleted_for_good_once_its_grace_and_the_wait_have_passed(deletion, now, after, due):
    evicted = pod("p", "j")
    if deletion:
        evicted["metadata"]["deletionTimestamp"] = deletion
    assert N.due_for_release(evicted, now, after) is due


def test_the_release_message_names_the_pods_and_what_follows():
    text = N.released_message(N.lost_node(node("Unknown")), [pod("b", "j"), pod("a", "j")])
    assert text.startswith("pod(s) a, b evicted from lost node gpu-node-3 deleted for good")
    assert "JobSet can now recreate the gang" in text
