"""A TrainJob whose Volcano gang waits says why: one Event `TrainJobGangPending` with the PodGroup's verdict,
shown by `kubectl describe trainjob` (real API server, vc-scheduler and controller)."""

from __future__ import annotations

import time

import pytest

from builders import new_trainjob, tenant_spec
from tenant_helpers import add_tenant, create, remove_tenant

pytestmark = pytest.mark.integration

REASON = "TrainJobGangPending"


def gang_events(cluster, name, ns):
    events = cluster.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    return [e for e in events if e.reason == REASON and e.involved_object.kind == "TrainJob"]


def touch(cluster, name, ns):
    cluster.kubectl("annotate", "trainjob", name, "-n", ns, f"touched={time.monotonic_ns()}", "--overwrite")


def test_gang_beyond_queue_capability_reports_the_queue_verdict_once(cluster, shared, catalog_runtime):
    tenant = add_tenant(cluster, tenant_spec(gpus=64, queue_gpus=8))
    try:
        create(cluster, new_trainjob("big", catalog_runtime, namespace=tenant.ns, nodes=2), as_user=tenant.user)
        quota = "queue resource quota insufficient"
        events = cluster.wait(lambda: [e for e in gang_events(cluster, "big", tenant.ns) if quota in e.message],
                              timeout=90, what="the gang's queue verdict on the TrainJob")
        assert events[0].type == "Warning"
        assert f"gang waits to enter queue {tenant.queue}: {quota}: insufficient nvidia.com/gpu" in events[0].message
        # no pod exists before Volcano admits the gang (a tenant gang's JobSet waits suspended): the group has no
        # condition of Volcano's, the event says what the controller stands in for it
        assert "PodGroup big Unschedulable/NotAdmitted: no pod is created until Volcano admits" in events[0].message
        for _ in range(3):  # more reconciles of the same verdict add no event
            cluster.reconciled_after(lambda: touch(cluster, "big", tenant.ns))
        messages = [e.message for e in gang_events(cluster, "big", tenant.ns)]
        assert len(messages) == len(set(messages)), messages  # one event per verdict, however many reconciles
        assert all(e.count in (None, 1) for e in gang_events(cluster, "big", tenant.ns))
        described = cluster.kubectl("describe", "trainjob", "big", "-n", tenant.ns)
        assert REASON in described and quota in described
        status = cluster.get_object("trainer.kubeflow.org", "v1alpha1", "trainjobs", "big", tenant.ns).get("status") or {}
        assert not status.get("conditions"), "the verdict must not add a status condition (the SDK's Running check)"
    finally:
        remove_tenant(cluster, tenant.spec)


def test_gang_larger_than_the_cluster_reports_the_verdict(cluster, shared, catalog_runtime):
    """5 x 8 GPUs on a 32-GPU cluster: the queue would allow it, the cluster never can."""
    tenant = add_tenant(cluster, tenant_spec(gpus=64))
    try:
        create(cluster, new_trainjob("huge", catalog_runtime, namespace=tenant.ns, nodes=5), as_user=tenant.user)
        events = cluster.wait(lambda: gang_events(cluster, "huge", tenant.ns), timeout=90,
                              what="the gang's verdict on the TrainJob")
        # proportion caps a queue's capability at the cluster's size: Volcano never admits the gang into its queue
        assert "queue resource quota insufficient: insufficient nvidia.com/gpu" in events[-1].message
        assert "PodGroup huge Unschedulable/NotAdmitted" in events[-1].message
    finally:
        remove_tenant(cluster, tenant.spec)
