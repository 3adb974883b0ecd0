"""A waiting Volcano gang's verdict reaches the TrainJob as one deduplicated Event `TrainJobGangPending`."""

from __future__ import annotations

import pytest

from trainyard.controller import gang_pending
from trainyard.controller.gang_pending import GangPending
from trainyard.controller.runtime.reconciler import reconcile

from ctl_builders import runtime, trainjob
from fake_apiserver import FakeApiServer

VOLCANO = "scheduling.volcano.sh/v1beta1"
OWNER = [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj", "uid": "uid-1",
          "controller": True, "blockOwnerDeletion": True}]
SUMMARY = "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable"
QUOTA = "queue resource quota insufficient: insufficient nvidia.com/gpu"
T0 = "2026-01-01T00:00:00Z"
NOT_ADMITTED = "no pod is created until Volcano admits the whole gang into its queue"


def unschedulable(message=SUMMARY, status="True", when=T0, reason="NotEnoughResources"):
    return {"type": "Unschedulable", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": when, "transitionID": "x"}


def pod_group(phase="Pending", conditions=(), running=0, min_member=2, queue="team-a", api_version=VOLCANO,
              name="tj"):
    status = {"phase": phase, "conditions": list(conditions)}
    if running:
        status["running"] = running
    return {"apiVersion": api_version, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": "pg-uid", "ownerReferences": OWNER,
                         "creationTimestamp": T0},
            "spec": {"minMember": min_member, "queue": queue}, "status": status}


def pg_event(message, reason="Unschedulable", name="tj", when=T0, uid="pg-uid"):
    return {"involvedObject": {"kind": "PodGroup", "name": name, "uid": uid}, "reason": reason, "message": message,
            "lastTimestamp": when}


@pytest.mark.parametrize("groups,events,expected", [
    ([], [], None),
    ([pod_group(phase="", conditions=[])], [], None),  # Volcano has not seen it yet
    ([pod_group(phase="Inqueue", conditions=[])], [], None),
    # Pending without pods (a tenant gang's JobSet waits suspended): no condition, Volcano says why only in events
    ([pod_group(conditions=[])], [pg_event(QUOTA)],
     GangPending("tj", "team-a", "Pending", "NotAdmitted", NOT_ADMITTED, QUOTA, T0)),
    ([pod_group(conditions=[unschedulable(status="False")])], [], None),
    ([pod_group(phase="Running", conditions=[unschedulable()])], [], None),
    ([pod_group(phase="Completed", conditions=[unschedulable()])], [], None),
    ([pod_group(phase="Inqueue", conditions=[unschedulable()], running=2)], [], None),
    ([pod_group(conditions=[unschedulable()], api_version="scheduling.x-k8s.io/v1alpha1")], [], None),
    # phase Pending: Volcano kept the gang out of its queue; the cause is only in its events
    ([pod_group(conditions=[unschedulable()])], [pg_event(SUMMARY), pg_event(QUOTA)],
     GangPending("tj", "team-a", "Pending", "NotEnoughResources", SUMMARY, QUOTA, T0)),
    ([pod_group(conditions=[unschedulable()])],
     [pg_event("resource in cluster is overused: overused nvidia.com/gpu", when="2026-01-01T00:00:09Z"),
      pg_event(QUOTA, when="2026-01-01T00:00:01Z"), pg_event("other", name="other-pg"),
      pg_event("old verdict", when="2025-12-31T23:59:00Z"),
      pg_event("stale", uid="older-pg-uid", when="2026-01-01T00:01:00Z")],
     GangPending("tj", "team-a", "Pending", "NotEnoughResources", SUMMARY,
                 f"{QUOTA}; resource in cluster is overused: overused nvidia.com/gpu", T0)),
    ([pod_group(conditions=[unschedulable()])], [],
     GangPending("tj", "team-a", "Pending", "NotEnoughResources", SUMMARY, "", T0)),
    # Inqueue: admitted, allocation failed; the condition says why (events are not consulted)
    ([pod_group(phase="Inqueue", conditions=[unschedulable("old", when=T0),
                                             unschedulable("newer", when="2026-01-01T00:00:05Z")])],
     [pg_event(QUOTA)], GangPending("tj", "team-a", "Inqueue", "NotEnoughResources", "newer", "",
                                    "2026-01-01T00:00:05Z")),
], ids=["none", "unseen", "inqueue-no-condition", "pending-no-pods", "condition-false", "running", "completed", "all-running", "coscheduling",
        "pending-quota", "pending-recent-events", "pending-no-event", "inqueue"])
def test_gang_pending_verdict(groups, events, expected):
    assert gang_pending.gang_pending(groups, events) == expected


@pytest.mark.parametrize("pending,expected", [
    (GangPending("tj", "team-a", "Pending", "NotEnoughResources", SUMMARY, QUOTA),
     f"gang waits to enter queue team-a: {QUOTA} (PodGroup tj Unschedulable/NotEnoughResources: {SUMMARY})"),
    (GangPending("tj", None, "Pending", "NotEnoughResources", "", ""),
     "gang waits to enter (PodGroup tj Unschedulable/NotEnoughResources)"),
    (GangPending("tj", "team-a", "Inqueue", "NotEnoughResources", "1/2 tasks in gang unschedulable: x"),
     "gang admitted in queue team-a but cannot be placed on nodes "
     "(PodGroup tj Unschedulable/NotEnoughResources: 1/2 tasks in gang unschedulable: x)"),
])
def test_event_message_in_the_users_words(pending, expected):
    assert gang_pending.event_message(pending) == expected


def test_event_name_is_stable_per_verdict_and_trainjob():
    tj = {"metadata": {"name": "tj", "uid": "u1"}}
    a = GangPending("tj", "q", "Pending", "NotEnoughResources", SUMMARY, QUOTA)
    assert gang_pending.event_name(tj, a) == gang_pending.event_name(tj, GangPending(*a.__dict__.values()))
    assert gang_pending.event_name(tj, a).startswith("tj.gangpending.")
    others = {gang_pending.event_name(tj, GangPending("tj", "q", "Pending", "NotEnoughResources", SUMMARY, "")),
              gang_pending.event_name(tj, GangPending("tj", "q", "Inqueue", "NotEnoughResources", SUMMARY, "")),
              gang_pending.event_name({"metadata": {"name": "tj", "uid": "u2"}}, a)}
    assert gang_pending.event_name(tj, a) not in others and len(others) == 3


@pytest.mark.parametrize("pending,now,expected", [
    (None, T0, None),
    (GangPending("tj", "q", "Pending", "R", "m", "", T0), "2026-01-01T00:00:10Z", 5.0),
    (GangPending("tj", "q", "Pending", "R", "m", "", T0), "2026-01-01T00:02:00Z", None),  # gave up waiting
    (GangPending("tj", "q", "Pending", "R", "m", QUOTA, T0), "2026-01-01T00:00:10Z", None),  # cause known
    (GangPending("tj", "q", "Inqueue", "R", "m", "", T0), "2026-01-01T00:00:10Z", None),
])
def test_recheck_while_the_enqueue_verdict_may_still_be_on_its_way(pending, now, expected):
    assert gang_pending.recheck_after(pending, now) == expected


def test_reconcile_posts_the_verdict_with_a_deterministic_name():
    tj = trainjob()
    tj["metadata"]["uid"] = "uid-1"
    rt = runtime(ml={"torch": {}}, pod_group={"volcano": {}})
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "tj.1", "namespace": "ns"}, **pg_event(QUOTA)}
    api = FakeApiServer(tj, rt, pod_group(conditions=[unschedulable()], queue=None), event)
    names = []
    api.event = lambda involved, reason, message, **kw: names.append((reason, message, kw.get("name")))
    reconcile(api, "ns", "tj")
    reconcile(api, "ns", "tj")
    assert len(set(names)) == 1 and len(names) == 2  # same name twice: the API server refuses the duplicate
    reason, message, name = names[0]
    assert reason == "TrainJobGangPending" and QUOTA in message and name.startswith("tj.gangpending.")


def test_reconcile_of_a_scheduled_gang_lists_no_events_and_posts_nothing():
    tj = trainjob()
    rt = runtime(ml={"torch": {}}, pod_group={"volcano": {}})
    api = FakeApiServer(tj, rt, pod_group(phase="Running", running=2, conditions=[unschedulable()]))
    reconcile(api, "ns", "tj")
    assert api.events == [] and "Event" not in api.verbs("list")


def test_a_suspended_trainjob_waits_on_purpose_and_gets_no_event():
    tj = trainjob(suspend=True)
    rt = runtime(ml={"torch": {}}, pod_group={"volcano": {}})
    api = FakeApiServer(tj, rt, pod_group(conditions=[unschedulable()]))
    reconcile(api, "ns", "tj")
    assert api.events == [] and "Event" not in api.verbs("list")
