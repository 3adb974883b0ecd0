"""Every reconcile failure reaches the user: condition ResourcesCreationFailed with the cause, one Warning event
per cause, backoff retries, and the condition gone once the cause is (real API server, quotas, queue guard)."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from builders import new_trainjob, tenant_spec, torch_runtime
from tenant_helpers import (FAILED, QUEUE_ANNOTATION, add_tenant, condition, create, create_error,
                            delete_cluster_object, get_trainjob, jobset, podgroup, remove_tenant,
                            tenant_objects, wait_cleared, wait_failed, wait_quotas_synced, warning_events, with_gpus)

pytestmark = pytest.mark.integration

EVENT = "TrainJobResourcesCreationFailed"


def touch(cluster, name, ns):
    """An edit by the user: the controller reconciles at once instead of at the next backoff step."""
    cluster.kubectl("annotate", "trainjob", name, "-n", ns, f"touched={time.monotonic_ns()}", "--overwrite")


def events_with(cluster, name, ns, text):
    return [e for e in warning_events(cluster, name, ns) if e.reason == EVENT and text in e.message]


def quota(name, ns, hard):
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns}, "spec": {"hard": hard}}


def test_queue_guard_refusal_becomes_condition_and_one_event_then_clears(cluster, shared):
    """A suspended TrainJob whose runtime names queue `default`; then the namespace becomes a tenant (queue guard
    bound): the PodGroup re-apply is refused by the ValidatingAdmissionPolicy, with its message."""
    spec = tenant_spec()
    name = f"guarded-{uuid.uuid4().hex[:6]}"
    create(cluster, torch_runtime(name, gpus=8, queue="default"))
    cluster.kubectl("create", "namespace", spec.namespace)
    cluster.created_namespaces.append(spec.namespace)
    try:
        create(cluster, new_trainjob("tj", name, namespace=spec.namespace, nodes=1, suspend=True))
        cluster.wait(lambda: podgroup(cluster, "tj", spec.namespace), what="the PodGroup in queue default")
        tenant = add_tenant(cluster, spec)

        def refused():  # the API server sees a new binding and namespace label asynchronously: edit until both bite
            touch(cluster, "tj", tenant.ns)
            c = condition(get_trainjob(cluster, "tj", tenant.ns), FAILED)
            return c and c["reason"] == "ApplyFailed" and f"queue {tenant.queue}" in c["message"] and c

        failed = cluster.wait(refused, interval=1, what="the PodGroup update refused by the queue guard")
        assert "ValidatingAdmissionPolicy 'trainyard-queue-guard'" in failed["message"]
        assert f"names a Volcano queue other than this namespace's queue {tenant.queue}" in failed["message"]
        for _ in range(3):
            cluster.reconciled_after(lambda: touch(cluster, "tj", tenant.ns))
        events = events_with(cluster, "tj", tenant.ns, f"this namespace's queue {tenant.queue}")
        assert len(events) == 1, [e.message for e in events]  # one event per cause, however many retries

        delete_cluster_object(cluster, "validatingadmissionpolicybinding", f"trainyard-queue-guard-{spec.name}")
        cluster.wait(lambda: condition(get_trainjob(cluster, "tj", tenant.ns), FAILED) is None, timeout=90,
                     what="the condition cleared by a backoff retry")
    finally:
        delete_cluster_object(cluster, "clustertrainingruntime", name)
        remove_tenant(cluster, spec)


def test_gang_beyond_the_gpu_quota_is_refused_at_create_in_fits_words(cluster, shared, catalog_runtime):
    tenant = add_tenant(cluster, tenant_spec(gpus=8))
    try:
        refused = create_error(cluster, new_trainjob("big", catalog_runtime, namespace=tenant.ns, nodes=2), tenant.user)
        assert (f"spec.trainer.numNodes: Forbidden: quota tenant-quota in {tenant.ns} allows requests.nvidia.com/gpu 8, "
                "this job needs 16: it can never start") in refused
        assert get_trainjob(cluster, "big", tenant.ns) is None
        create(cluster, new_trainjob("fits", catalog_runtime, namespace=tenant.ns, nodes=1, suspend=True),
               as_user=tenant.user)
    finally:
        remove_tenant(cluster, tenant.spec)


def test_gang_beyond_a_quota_lowered_after_create_is_reported_before_any_pod_then_runs_once_raised(
        cluster, shared, catalog_runtime):
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        cluster.apply(quota("no-jobsets", tenant.ns, {"count/jobsets.jobset.x-k8s.io": "0"}))
        wait_quotas_synced(cluster, tenant.ns)
        create(cluster, new_trainjob("big", catalog_runtime, namespace=tenant.ns, nodes=2),
               as_user=tenant.user)  # admitted: 16 GPUs
        wait_failed(cluster, "big", tenant.ns, "ApplyFailed")  # held back while the quota is lowered
        cluster.apply(*tenant_objects(with_gpus(tenant.spec, 8)))
        cluster.kubectl("delete", "resourcequota", "no-jobsets", "-n", tenant.ns)
        failed = wait_failed(cluster, "big", tenant.ns, "QuotaExceeded", timeout=90)
        assert "needs requests.nvidia.com/gpu=16" in failed["message"]
        assert "allows at most requests.nvidia.com/gpu=8" in failed["message"]
        assert jobset(cluster, "big", tenant.ns) is None and cluster.core.list_namespaced_pod(tenant.ns).items == []
        assert len(events_with(cluster, "big", tenant.ns, "QuotaExceeded")) == 1

        cluster.apply(*tenant_objects(with_gpus(tenant.spec, 16)))
        tj = wait_cleared(cluster, "big", tenant.ns)
        assert podgroup(cluster, "big", tenant.ns)["spec"]["minResources"]["nvidia.com/gpu"] in ("16", 16)
        assert not (tj.get("status") or {}).get("conditions"), "no condition left: the SDK can call it Running"
    finally:
        remove_tenant(cluster, tenant.spec)


def test_quota_refusing_a_child_at_apply_surfaces_the_api_servers_message(cluster, shared, catalog_runtime):
    ns = cluster.namespace("jsquota")
    cluster.apply(quota("no-jobsets", ns, {"count/jobsets.jobset.x-k8s.io": "0"}))
    wait_quotas_synced(cluster, ns)
    create(cluster, new_trainjob("tj", catalog_runtime, namespace=ns, nodes=1,
                                 annotations={QUEUE_ANNOTATION: "default"}))
    failed = wait_failed(cluster, "tj", ns, "ApplyFailed")
    assert 'jobsets.jobset.x-k8s.io "tj" is forbidden: exceeded quota: no-jobsets' in failed["message"]
    (event,) = events_with(cluster, "tj", ns, "exceeded quota: no-jobsets")
    assert event.message.startswith("TrainJob resources reconciliation failed: ApplyFailed: ")
    cluster.kubectl("delete", "resourcequota", "no-jobsets", "-n", ns)
    wait_cleared(cluster, "tj", ns)


def test_trainjob_count_quota_refuses_the_create_itself(cluster, shared, catalog_runtime):
    tenant = add_tenant(cluster, tenant_spec(train_jobs=1))
    try:
        create(cluster, new_trainjob("first", catalog_runtime, namespace=tenant.ns, nodes=1), as_user=tenant.user)
        refused = create_error(cluster, new_trainjob("second", catalog_runtime, namespace=tenant.ns, nodes=1),
                               tenant.user)
        assert "exceeded quota: tenant-quota" in refused and "count/trainjobs.trainer.kubeflow.org" in refused
        assert get_trainjob(cluster, "second", tenant.ns) is None
    finally:
        remove_tenant(cluster, tenant.spec)


def test_missing_runtime_becomes_condition_and_event_until_it_is_back(cluster, shared):
    """Admission requires the runtime at create; it can still vanish before the first successful reconcile
    (here the snapshot ConfigMap is held back by a quota until the runtime is deleted)."""
    ns = cluster.namespace("nort")
    cluster.wait(lambda: cluster.core.list_namespaced_config_map(ns).items, what="kube-root-ca.crt")
    cluster.apply(quota("one-configmap", ns, {"count/configmaps": "1"}))
    wait_quotas_synced(cluster, ns)
    name = f"vanishing-{uuid.uuid4().hex[:6]}"
    rt = torch_runtime(name, gpus=8, queue="default")
    create(cluster, rt)
    try:
        create(cluster, new_trainjob("tj", name, namespace=ns, nodes=1))
        wait_failed(cluster, "tj", ns, "ApplyFailed")
        delete_cluster_object(cluster, "clustertrainingruntime", name)
        cluster.wait(lambda: cluster.get_object("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", name) is None,
                     what="the runtime gone")
        cluster.kubectl("delete", "resourcequota", "one-configmap", "-n", ns)
        failed = wait_failed(cluster, "tj", ns, "RuntimeNotFound")  # a backoff retry (edits need the runtime too)
        assert "not found" in failed["message"] and "ClusterTrainingRuntime" in failed["message"]
        assert len(events_with(cluster, "tj", ns, "RuntimeNotFound")) == 1
        create(cluster, rt)
        wait_cleared(cluster, "tj", ns)
    finally:
        delete_cluster_object(cluster, "clustertrainingruntime", name)


def test_deleted_tenant_queue_becomes_condition_then_clears_when_restored(cluster, shared, catalog_runtime):
    tenant = add_tenant(cluster, tenant_spec())
    try:
        cluster.kubectl("delete", "queues.scheduling.volcano.sh", tenant.queue)
        cluster.wait(lambda: cluster.get_object("scheduling.volcano.sh", "v1beta1", "queues", tenant.queue) is None,
                     what="the queue gone")
        create(cluster, new_trainjob("tj", catalog_runtime, namespace=tenant.ns, nodes=1), as_user=tenant.user)
        failed = wait_failed(cluster, "tj", tenant.ns, "QueueNotFound")
        assert f'Volcano queue "{tenant.queue}" not found' in failed["message"]
        assert podgroup(cluster, "tj", tenant.ns) is None
        assert len(events_with(cluster, "tj", tenant.ns, "QueueNotFound")) == 1
        cluster.apply(*tenant_objects(tenant.spec))
        wait_cleared(cluster, "tj", tenant.ns)
        assert podgroup(cluster, "tj", tenant.ns)["spec"]["queue"] == tenant.queue
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_snapshot_edited_in_the_namespace_is_never_built_from(cluster, shared, catalog_runtime):
    """A tenant admin can edit configmaps; the forged runtime (an image, a node) must never reach a pod."""
    ns = cluster.namespace("forged")
    create(cluster, new_trainjob("tj", catalog_runtime, namespace=ns, nodes=1, suspend=True,
                                 annotations={QUEUE_ANNOTATION: "default"}))
    snapshot = cluster.wait(lambda: next((c for c in cluster.core.list_namespaced_config_map(ns).items
                                          if c.metadata.name == "tj-runtime-snapshot"), None), what="the runtime snapshot")
    assert (snapshot.metadata.annotations or {}).get("trainyard.dev/runtime-snapshot-seal")
    forged = snapshot.data["runtime"].replace("pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", "evil.example/miner:1")
    assert forged != snapshot.data["runtime"]
    cluster.kubectl("patch", "configmap", "tj-runtime-snapshot", "-n", ns, "--type=merge",
                    "-p", json.dumps({"data": {"runtime": forged}}))
    cluster.kubectl("patch", "trainjob", "tj", "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    failed = wait_failed(cluster, "tj", ns, "BuildFailed")
    assert "runtime snapshot ConfigMap tj-runtime-snapshot was not written by the TrainJob controller" in failed["message"]
    assert events_with(cluster, "tj", ns, "was not written by the TrainJob controller")
    js = jobset(cluster, "tj", ns)
    images = {c["image"] for j in (js or {}).get("spec", {}).get("replicatedJobs", [])
              for c in j["template"]["spec"]["template"]["spec"]["containers"]}
    assert "evil.example/miner:1" not in images and (js is None or js["spec"].get("suspend") is True)
