"""Pure parts of the controller runtime: lease expiry and owner mapping."""

import datetime as dt

import pytest

from trainyard.controller.runtime.leader import lease_expired
from trainyard.controller.runtime.reconciler import owner_trainjob

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("spec,expired", [
    ({}, True),
    ({"holderIdentity": "a", "renewTime": "2026-01-01T11:59:50.000000Z", "leaseDurationSeconds": 15}, False),
    ({"holderIdentity": "a", "renewTime": "2026-01-01T11:59:40.000000Z", "leaseDurationSeconds": 15}, True),
    ({"holderIdentity": "", "renewTime": "2026-01-01T11:59:59.000000Z", "leaseDurationSeconds": 15}, True),
])
def test_lease_expiry(spec, expired):
    assert lease_expired({"spec": spec}, NOW) is expired


@pytest.mark.parametrize("refs,expected", [
    ([{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj", "controller": True}],
     ("ns", "tj")),
    ([{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj"}], None),
    ([{"apiVersion": "batch/v1", "kind": "Job", "name": "tj", "controller": True}], None),
    ([{"apiVersion": "other.io/v1", "kind": "TrainJob", "name": "tj", "controller": True}], None),
    ([], None),
])
def test_owned_objects_map_to_their_controlling_trainjob(refs, expected):
    obj = {"metadata": {"namespace": "ns", "name": "x", "ownerReferences": refs}}
    assert owner_trainjob(obj) == expected


@pytest.mark.parametrize("leader,since_renewal,holds", [(True, 0.0, True), (True, 10.0, True), (True, 10.1, False),
                                                         (False, 0.0, False)])
def test_a_leader_paused_past_the_renew_deadline_holds_no_lease(leader, since_renewal, holds):
    """15 s lease -> 10 s renew deadline, by the process's own monotonic clock (it keeps running while paused)."""
    from trainyard.controller.runtime.leader import LeaderElector

    elector = LeaderElector(api=None, namespace="trainyard-system", lease_seconds=15)
    elector.clock = lambda: 1000.0 + since_renewal
    elector.last_renewed = 1000.0
    if leader:
        elector.is_leader.set()
    assert elector.holds_lease() is holds


def test_a_standby_replica_is_ready_and_the_leader_once_its_informers_synced():
    """Found on real pods: readiness waited for informers, which only the leader starts, so the standby of a
    2-replica Deployment never turned Ready (kwok marks pods Ready without probing) and the Deployment was never
    Available, while the standby's webhook was serving all along."""
    from types import SimpleNamespace

    from trainyard.controller.runtime.manager import Manager, Settings

    manager = Manager(api=SimpleNamespace(guarded=lambda may_write: None), settings=Settings(leader_elect=True))
    assert manager.ready(), "standby: serves webhooks, waits for the lease"
    manager.elector.is_leader.set()
    assert not manager.ready(), "leader with informers still listing"
    for informer in manager.informers:
        informer.synced.set()
    assert manager.ready()
    assert not Manager(api=SimpleNamespace(), settings=Settings(leader_elect=False)).ready(), \
        "without election, the only replica is the leader"
