"""`trainyard fit` on a TrainJob claiming GPUs through DRA (`resourceClaimsPerNode`): the gang counts the devices
its pods claim, the quota check refuses a gang beyond a device-class quota, and the gang line says what counts them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from trainyard.capacity.fit import REFUSED, WAITS, check_quota, gang_from_objects
from trainyard.capacity.fit_check import claims_text
from trainyard.controller.build import build_objects

from builders import job, runtime, trainjob

KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


def template(count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpus", "namespace": "ns"},
            "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                                "count": count}}]}}}}


def gang(nodes: int, count: int):
    tj = trainjob(trainer={"numNodes": nodes, "resourceClaimsPerNode": [{"name": "g", "resourceClaimTemplateName": "gpus"}]})
    rt = runtime([job("node", "trainer", [{"name": "node", "image": "img"}])], ml={"torch": {}})
    return gang_from_objects(build_objects(tj, rt, [template(count)]), [template(count)])


def quota(hard: str, used: str = "0") -> dict:
    return {"kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": "ns"},
            "spec": {"hard": {KEY: hard}}, "status": {"used": {KEY: used}}}


def test_the_gang_counts_the_devices_its_pods_claim():
    assert gang(2, 8).claimed_devices == {KEY: Fraction(16)}
    assert "gpu.nvidia.com 16 (counted by quotas, not by queues or node capacity)" in claims_text(gang(2, 8))
    plain = gang_from_objects(build_objects(trainjob(trainer={"numNodes": 1}), runtime(ml={"torch": {}}), []))
    assert plain.claimed_devices == {} and claims_text(plain) == ""


@pytest.mark.parametrize("nodes, count, hard, used, outcome", [
    (2, 8, "16", "0", None),
    (3, 8, "16", "0", REFUSED),       # can never start: admission refuses it at create too
    (2, 8, "16", "8", WAITS),         # room once the claims of running jobs go
])
def test_the_quota_check_sees_claimed_devices(nodes, count, hard, used, outcome):
    verdict = check_quota(gang(nodes, count), [quota(hard, used)])
    assert (verdict.outcome if verdict else None) == outcome
    if verdict:
        assert KEY in verdict.message
