"""The runtime snapshot's seal: the controller builds only from snapshots it wrote itself."""

import pytest

from trainyard.controller.build import build_objects
from trainyard.controller.errors import BuildError
from trainyard.controller.runtime.reconciler import reconcile
from trainyard.controller.snapshot import build_snapshot
from trainyard.controller.snapshot_seal import SEAL_ANNOTATION, SnapshotTamperedError, check_seal, seal, sealed

from ctl_builders import by_kind, fixed_key, runtime, trainjob
from fake_apiserver import FakeApiServer

KEY = b"k" * 32
RT = runtime(ml={"torch": {}})


def test_seal_binds_key_trainjob_identity_and_content():
    tj = trainjob()
    base = seal(KEY, tj, "text")
    assert base == seal(KEY, tj, "text")
    other_uid = {**tj, "metadata": {**tj["metadata"], "uid": "uid-2"}}
    assert len({base, seal(b"x" * 32, tj, "text"), seal(KEY, tj, "text2"), seal(KEY, other_uid, "text")}) == 4


@pytest.mark.parametrize("tamper", [
    lambda s: s["data"].update(runtime=s["data"]["runtime"].replace("torch: {}", "torch: {numProcPerNode: 64}")),
    lambda s: s["metadata"]["annotations"].pop(SEAL_ANNOTATION),
    lambda s: s["metadata"]["annotations"].update({SEAL_ANNOTATION: "0" * 64}),
])
def test_any_edit_or_a_missing_seal_is_refused(tamper):
    tj = trainjob()
    snapshot = sealed(build_snapshot(tj, RT), KEY, tj)
    check_seal(snapshot, KEY, tj)
    tamper(snapshot)
    with pytest.raises(SnapshotTamperedError, match="was not written by the TrainJob controller"):
        check_seal(snapshot, KEY, tj)


def test_build_seals_new_snapshots_only_with_a_key():
    objects = build_objects(trainjob(trainer={"numNodes": 1}), RT, key_generator=fixed_key, seal_key=KEY)
    assert SEAL_ANNOTATION in by_kind(objects, "ConfigMap")[0]["metadata"]["annotations"]
    plain = build_objects(trainjob(trainer={"numNodes": 1}), RT, key_generator=fixed_key)
    assert SEAL_ANNOTATION not in (by_kind(plain, "ConfigMap")[0]["metadata"].get("annotations") or {})


def test_reconcile_applies_nothing_from_a_forged_snapshot_and_reports_it_once():
    tj = trainjob(trainer={"numNodes": 1})
    forged = build_snapshot(tj, runtime(ml={"torch": {}}, name="rt"))  # right owner and name, no seal
    api = FakeApiServer(tj, RT, forged)
    with pytest.raises(BuildError):
        reconcile(api, "ns", "tj", seal_key=KEY)
    assert api.verbs("apply") == []
    assert [reason for reason, _ in api.events] == ["TrainJobResourcesCreationFailed"]
    assert "runtime snapshot ConfigMap tj-runtime-snapshot was not written by the TrainJob controller" in api.events[0][1]


def test_reconcile_seals_then_builds_from_its_own_snapshot():
    tj = trainjob(trainer={"numNodes": 1})
    api = FakeApiServer(tj, RT)
    reconcile(api, "ns", "tj", seal_key=KEY)
    snapshot = api.find("ConfigMap", "tj-runtime-snapshot")
    check_seal(snapshot, KEY, tj)
    api.find("JobSet", "tj")["spec"]["suspend"] = True  # something to re-apply from the snapshot
    reconcile(api, "ns", "tj", seal_key=KEY)
    assert api.verbs("apply")[-1] == "JobSet/tj"
