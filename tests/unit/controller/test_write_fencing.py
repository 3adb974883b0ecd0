"""A replica that lost its lease while paused mid-reconcile must not write: the fenced ApiServer view
refuses writes before they leave the process, and still reads (the reliability suite shows it live)."""

from __future__ import annotations

import pytest

from trainyard.controller.runtime.apiserver import RESOURCES, ApiServer, NotLeader, resource_of_path
from trainyard.controller.runtime.transport import ClusterAccess, Transport

TRAINJOB = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "ns"}, "spec": {}}


def unreachable_api() -> ApiServer:
    """An API server address nothing listens on: any request that is sent fails with a connection error."""
    return ApiServer(Transport(ClusterAccess(server="http://127.0.0.1:9")))


@pytest.mark.parametrize("write", [
    lambda api: api.apply(TRAINJOB),
    lambda api: api.create(TRAINJOB),
    lambda api: api.apply_status(TRAINJOB, "m"),
    lambda api: api.patch_status(RESOURCES["TrainJob"], "tj", "ns", {}),
    lambda api: api.delete(RESOURCES["JobSet"], "tj", "ns"),
], ids=["apply", "create", "apply_status", "patch_status", "delete"])
def test_fenced_view_refuses_every_write_without_sending_it(write):
    with pytest.raises(NotLeader, match="no longer holds the leader lease"):
        write(unreachable_api().guarded(lambda: False))


def test_fenced_view_sends_reads_and_writes_while_the_lease_is_held():
    holding = unreachable_api().guarded(lambda: True)
    for request in (lambda: holding.get(RESOURCES["TrainJob"], "tj", "ns"), lambda: holding.apply(TRAINJOB)):
        with pytest.raises(Exception) as raised:  # sent: the empty port refuses the connection
            request()
        assert not isinstance(raised.value, NotLeader)
    lost = unreachable_api().guarded(lambda: False)
    with pytest.raises(Exception) as read:
        lost.get(RESOURCES["TrainJob"], "tj", "ns")
    assert not isinstance(read.value, NotLeader), "reads are not fenced"


@pytest.mark.parametrize("path,resource", [
    ("/api/v1/namespaces/ns/configmaps/x", "configmaps"),
    ("/api/v1/namespaces/ns/configmaps", "configmaps"),
    ("/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status", "trainjobs/status"),
    ("/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch", "clustertrainingruntimes"),
    ("/apis/scheduling.volcano.sh/v1beta1/podgroups", "podgroups"),
    ("/api/v1/namespaces/ns", "namespaces"),
    ("/api/v1/namespaces", "namespaces"),
    ("/apis/authentication.k8s.io/v1/tokenreviews", "tokenreviews"),
])
def test_requests_are_counted_by_the_resource_kube_apiserver_reports(path, resource):
    assert resource_of_path(path) == resource


def test_every_request_sent_is_observed_and_the_fenced_view_reports_to_the_same_place():
    seen = []
    api = unreachable_api()
    api.observe = lambda method, resource: seen.append((method, resource))
    for request in (lambda: api.get(RESOURCES["TrainJob"], "tj", "ns"),
                    lambda: api.guarded(lambda: True).apply(TRAINJOB),
                    lambda: next(api.watch(RESOURCES["JobSet"]))):
        with pytest.raises(Exception):
            request()
    with pytest.raises(NotLeader):
        api.guarded(lambda: False).apply(TRAINJOB)
    assert seen == [("GET", "trainjobs"), ("PATCH", "trainjobs"), ("WATCH", "jobsets")], "refused writes are not sent"
