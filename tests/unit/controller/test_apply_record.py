"""Skipping applies that would change nothing: the same configuration over an object untouched since."""

from __future__ import annotations

import copy

import pytest

from trainyard.controller.runtime.apiserver import RESOURCES
from trainyard.controller.runtime.apply_record import AppliedAs, digest, still_as_applied
from trainyard.controller.runtime.reconciler import reconcile

from ctl_builders import runtime, trainjob
from fake_apiserver import FakeApiServer
from test_informer_cache import cached

OWNER = {"apiVersion": "t.example/v1", "kind": "TrainJob", "name": "tj", "uid": "u-tj",
         "controller": True}
DESIRED = {"apiVersion": "v1", "kind": "X", "metadata": {"name": "x", "namespace": "ns", "labels": {"a": "1"},
                                                        "annotations": {"b": "2"}, "ownerReferences": [OWNER]},
           "spec": {"n": 2}}
LIVE = {"metadata": {"name": "x", "namespace": "ns", "uid": "u1", "generation": 3, "resourceVersion": "70",
                     "labels": {"a": "1", "added-by-someone": "y"}, "annotations": {"b": "2"},
                     "ownerReferences": [OWNER]}, "spec": {"n": 2}, "status": {"phase": "Pending"}}
RECORD = AppliedAs(digest(DESIRED), "u1", 3, "60")


def live_with(**meta) -> dict:
    out = copy.deepcopy(LIVE)
    for key, value in meta.items():
        if value is None:
            out["metadata"].pop(key, None)
        else:
            out["metadata"][key] = value
    return out


CASES = [
    ("same config, same uid and generation: skip", LIVE, RECORD, True),
    ("status or resourceVersion moved on, generation did not: skip", live_with(resourceVersion="99"), RECORD, True),
    ("never applied by this process: apply", LIVE, None, False),
    ("gone from the store: apply", None, RECORD, False),
    ("another configuration than last time: apply", LIVE, AppliedAs("other", "u1", 3, "60"), False),
    ("deleted and recreated (new uid): apply", live_with(uid="u2"), RECORD, False),
    ("someone edited the spec (generation bumped): apply", dict(live_with(generation=4), spec={"n": 1}), RECORD,
     False),
    ("generation bumped, every applied field still holds (a whole-object update): skip",
     dict(live_with(generation=4), spec={"n": 2, "defaulted": True}), RECORD, True),
    ("generation bumped and a field it applied is gone: apply", dict(live_with(generation=4), spec={}), RECORD, False),
    ("no generation (ConfigMap), same resourceVersion: skip", live_with(generation=None, resourceVersion="60"),
     AppliedAs(digest(DESIRED), "u1", None, "60"), True),
    ("no generation, resourceVersion moved, data edited: apply",
     dict(live_with(generation=None, resourceVersion="61"), spec={"n": 3}), AppliedAs(digest(DESIRED), "u1", None, "60"),
     False),
    ("a label it applied was removed: apply", live_with(labels={"added-by-someone": "y"}), RECORD, False),
    ("a label it applied was changed: apply", live_with(labels={"a": "9"}), RECORD, False),
    ("an annotation it applied was removed: apply", live_with(annotations={}), RECORD, False),
    ("its ownerReference was removed: apply", live_with(ownerReferences=[]), RECORD, False),
]


@pytest.mark.parametrize("live,record,skip", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_still_as_applied(live, record, skip):
    assert still_as_applied(DESIRED, digest(DESIRED), live, record) is skip


def suspended_trainjob_api() -> FakeApiServer:
    tj = trainjob(runtime_name="rt", kind="TrainingRuntime")
    tj["spec"]["suspend"] = True
    return FakeApiServer(tj, runtime(ml={"torch": {}}, pod_group={"volcano": {}}, name="rt", kind="TrainingRuntime"),
                         {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}})


def test_reconciles_triggered_by_child_events_send_no_apply_until_a_child_changes():
    api = suspended_trainjob_api()
    reads = cached(api)
    reconcile(reads, "ns", "tj")
    assert {"JobSet/tj", "PodGroup/tj"} <= set(api.verbs("apply"))
    api.calls.clear()
    outcome = reconcile(reads, "ns", "tj")  # e.g. the JobSet controller wrote the JobSet's status
    assert api.verbs("apply") == [], "a suspended TrainJob's children are rebuilt identically: nothing to send"
    assert outcome.applied == [], "nothing changed: nothing reported as applied"

    store = reads.stores[RESOURCES["PodGroup"]]
    edited = store.get("tj", "ns")
    edited["metadata"].update(generation=7, resourceVersion="999")  # someone edited the PodGroup's spec
    edited["spec"]["minMember"] = 5
    store.put(edited)
    assert reconcile(reads, "ns", "tj").applied == ["PodGroup/tj"]
    assert api.verbs("apply") == ["PodGroup/tj"]


def test_a_deleted_child_loses_its_record_and_is_applied_again():
    api = suspended_trainjob_api()
    reads = cached(api)
    reconcile(reads, "ns", "tj")
    store = reads.stores[RESOURCES["JobSet"]]
    store.remove(store.get("tj", "ns"))
    assert not store.applied
    api.calls.clear()
    reconcile(reads, "ns", "tj")
    assert api.verbs("apply") == ["JobSet/tj"]


@pytest.mark.parametrize("edit,resent", [
    (lambda tj: tj["metadata"].setdefault("annotations", {}).update(touched="1"), True),
    (lambda tj: tj["metadata"].setdefault("labels", {}).update(team="a"), True),
    (lambda tj: tj["metadata"].update(generation=9), True),
    (lambda tj: tj.setdefault("status", {}).update(conditions=[{"type": "Suspended", "status": "True"}]), False),
    (lambda tj: tj["metadata"].update(resourceVersion="12345"), False),
], ids=["annotation", "label", "spec (generation)", "status only", "resourceVersion only"])
def test_an_edit_of_the_trainjob_re_applies_its_children_its_status_does_not(edit, resent):
    """A user's edit reconciles like upstream (every child applied, so an admission policy added since refuses
    and the refusal reaches the TrainJob); the controller's own status writes send nothing."""
    api = suspended_trainjob_api()
    reads = cached(api)
    reconcile(reads, "ns", "tj")
    store = reads.stores[RESOURCES["TrainJob"]]
    trainjob = store.get("tj", "ns")
    edit(trainjob)
    store.put(trainjob)
    api.calls.clear()
    reconcile(reads, "ns", "tj")
    assert ({"JobSet/tj", "PodGroup/tj"} <= set(api.verbs("apply"))) is resent
    assert bool(api.verbs("apply")) is resent


def test_an_apply_without_a_basis_is_always_sent():
    api = suspended_trainjob_api()
    reads = cached(api)
    reconcile(reads, "ns", "tj")
    jobset = reads.stores[RESOURCES["JobSet"]].get("tj", "ns")
    api.calls.clear()
    reads.apply(jobset)
    assert api.verbs("apply") == ["JobSet/tj"]
