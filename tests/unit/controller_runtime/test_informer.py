"""The informer's reflector logic: resume watches from the last version, relist only on 410 or resync.

The API layer here is a script of list/watch answers (the real one is exercised in tests/reliability).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from trainyard import k8s as K
from trainyard.controller.runtime.apiserver import RESOURCES
from trainyard.controller.runtime.informer import Informer
from trainyard.controller.runtime.transport import ApiError


def obj(name: str, rv: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class ScriptedApi:
    """Answers list/watch calls from a script; records the versions watches asked for."""

    def __init__(self, lists, watches, stop: threading.Event):
        self.lists, self.watches, self.stop = list(lists), list(watches), stop
        self.watch_versions: list[str | None] = []

    def list(self, _resource):
        return self.lists.pop(0)

    def watch(self, _resource, version, _timeout):
        self.watch_versions.append(version)
        if not self.watches:
            self.stop.set()
            return iter(())
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        return iter(step)


def run(lists, watches, resync=300, clock=lambda: 0.0):
    stop = threading.Event()
    api = ScriptedApi(lists, watches, stop)
    events, relists = [], []
    informer = Informer(api, RESOURCES["TrainJob"], lambda t, o: events.append((t, o["metadata"]["name"])), resync,
                        lambda resource, cause: relists.append(cause), clock=clock)
    informer.run(stop)
    return api.watch_versions, events, relists


LIST_1 = {"metadata": {"resourceVersion": "10"}, "items": [obj("a", "9")]}
LIST_2 = {"metadata": {"resourceVersion": "50"}, "items": [obj("a", "9"), obj("b", "40")]}

CASES = [
    ("a watch that ends resumes from the last event's version",
     [LIST_1], [[("ADDED", obj("b", "11"))], []],
     ["10", "11", "11"], [("LISTED", "a"), ("ADDED", "b")], []),
    ("bookmarks advance the version without an event",
     [LIST_1], [[("BOOKMARK", obj("", "20"))]],
     ["10", "20"], [("LISTED", "a")], []),
    ("410 Gone as a watch ERROR relists: unchanged objects LISTED, new ones ADDED",
     [LIST_1, LIST_2], [[("ERROR", {"code": 410, "reason": "Expired"})], []],
     ["10", "50", "50"], [("LISTED", "a"), ("LISTED", "a"), ("ADDED", "b")], ["expired"]),
    ("410 Gone as an HTTP error relists too",
     [LIST_1, LIST_2], [ApiError(status=410, reason="Gone"), []],
     ["10", "50", "50"], [("LISTED", "a"), ("LISTED", "a"), ("ADDED", "b")], ["expired"]),
    ("a relist reports what changed or vanished during the gap",
     [LIST_2, {"metadata": {"resourceVersion": "60"}, "items": [obj("a", "55")]}],
     [[("ERROR", {"code": 410, "reason": "Expired"})], []],
     ["50", "60", "60"], [("LISTED", "a"), ("LISTED", "b"), ("MODIFIED", "a"), ("DELETED", "b")], ["expired"]),
    ("a dropped connection resumes from the same version, no relist",
     [LIST_1], [ConnectionResetError("API server restarted"), [("MODIFIED", obj("a", "12"))]],
     ["10", "10", "12"], [("LISTED", "a"), ("MODIFIED", "a")], []),
]


@pytest.mark.parametrize("lists,watches,versions,events,relists", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_reflector(lists, watches, versions, events, relists, monkeypatch):
    monkeypatch.setattr(threading.Event, "wait", lambda self, timeout=None: self.is_set())  # no real sleeps
    got_versions, got_events, got_relists = run(lists, watches)
    assert (got_versions, got_events, got_relists) == (versions, events, relists)


def test_the_periodic_resync_relists(monkeypatch):
    monkeypatch.setattr(threading.Event, "wait", lambda self, timeout=None: self.is_set())
    ticks = iter([0.0, 301.0, 301.0, 301.0])
    versions, events, relists = run([LIST_1, LIST_2], [[], []], resync=300, clock=lambda: next(ticks))
    assert relists == ["resync"] and versions == ["10", "50", "50"]


def test_a_trainjob_created_now_is_reconciled_before_the_backlog_a_restart_lists():
    """After a restart every TrainJob and child is LISTED; a TrainJob created meanwhile (ADDED) and the
    children events of fresh work go first, as with controller-runtime's priority queue upstream runs."""
    from trainyard.controller.runtime.informer import LISTED
    from trainyard.controller.runtime.manager import Manager, Settings

    manager = Manager(api=SimpleNamespace(), settings=Settings(leader_elect=False))
    for name in ("old-1", "old-2"):
        manager._on_trainjob(LISTED, obj(name, "1"))
    manager._on_trainjob("ADDED", obj("new", "2"))
    jobset = {"metadata": {"name": "old-2", "namespace": "ns", "ownerReferences": [
        {"apiVersion": f"{K.TRAINER_GROUP}/{K.TRAINER_VERSION}", "kind": "TrainJob", "name": "old-2", "controller": True}]}}
    manager._on_owned("MODIFIED", jobset)
    assert [manager.queue.get(0.1) for _ in range(3)] == [("ns", "new"), ("ns", "old-2"), ("ns", "old-1")]


def owned(kind: str, api_version: str, name: str, **fields) -> dict:
    return {"apiVersion": api_version, "kind": kind, **fields, "metadata": {
        "name": name, "namespace": "ns", "ownerReferences": [{"apiVersion": f"{K.TRAINER_GROUP}/{K.TRAINER_VERSION}",
                                                              "kind": "TrainJob", "name": name, "controller": True}]}}


@pytest.mark.parametrize("phase, jobset_suspended, trainjob_suspended, first", [
    ("Inqueue", True, False, True),    # admitted, its JobSet waits suspended: resumed before the backlog
    ("Pending", True, False, False),   # not admitted yet
    ("Running", False, False, False),  # already resumed: a status change like any other
    ("Inqueue", True, True, False),    # the user suspended the TrainJob: nothing to resume
])
def test_a_gang_volcano_admits_is_resumed_before_new_trainjobs(phase, jobset_suspended, trainjob_suspended, first):
    """A burst queues thousands of new TrainJobs; an admitted gang's GPUs are set aside for it and idle until the
    controller resumes its JobSet, so that reconcile goes first, and its delay is measured."""
    from trainyard.controller.runtime.apiserver import RESOURCES
    from trainyard.controller.runtime.manager import Manager, Settings

    manager = Manager(api=SimpleNamespace(), settings=Settings(leader_elect=False))
    manager.stores[RESOURCES["TrainJob"]].replace([
        {**obj("admitted", "1"), "spec": {"suspend": trainjob_suspended}}])
    manager.stores[RESOURCES["JobSet"]].replace([
        owned("JobSet", K.JOBSET_API_VERSION, "admitted", spec={"suspend": jobset_suspended})])
    for name in ("new-1", "new-2"):
        manager._on_trainjob("ADDED", obj(name, "2"))
    manager._on_owned("MODIFIED", owned("PodGroup", K.VOLCANO_API_VERSION, "admitted", status={"phase": phase}))
    order = [manager.queue.get(0.1) for _ in range(3)]
    assert (order[0] == ("ns", "admitted")) is first, order
    assert (("ns", "admitted") in manager.admitted_at) is first
