"""Tenant TrainJobs on the real API server, Volcano and the controller: the namespace's queue and default
priority class from any runtime kind, priority selection by label, refusals at TrainJob create."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from trainyard.cluster.local import ClusterError

from builders import new_trainjob, tenant_spec, torch_runtime
from tenant_helpers import (FAILED, PRIORITY_LABEL, QUEUE_ANNOTATION, add_tenant, blocker_running, condition, create,
                            create_error, delete_cluster_object, get_trainjob, jobset, podgroup, priority_class,
                            queued_blocker, remove_tenant)

pytestmark = pytest.mark.integration


@pytest.fixture
def classes(cluster):
    suffix = uuid.uuid4().hex[:6]
    names = {"default": f"it-default-{suffix}", "high": f"it-high-{suffix}", "other": f"it-other-{suffix}"}
    cluster.apply(priority_class(names["default"], 100), priority_class(names["high"], 10000),
                  priority_class(names["other"], 100))
    yield names
    for name in names.values():
        delete_cluster_object(cluster, "priorityclass", name)


def tenant_with(cluster, classes, **kwargs):
    spec = tenant_spec(priority_classes=(classes["high"],), default_priority_class=classes["default"], **kwargs)
    return add_tenant(cluster, spec)


def pods(cluster, ns, trainjob_name):
    return [p for p in cluster.core.list_namespaced_pod(ns).items
            if (p.metadata.annotations or {}).get("scheduling.k8s.io/group-name") == trainjob_name]


def test_tenant_user_trainjob_on_a_cluster_runtime_gets_the_tenant_queue_and_default_class(cluster, shared, classes,
                                                                                        catalog_runtime):
    """The issue's scenario: before, the PodGroup had no queue, the queue guard refused it and the job hung."""
    tenant = tenant_with(cluster, classes)
    try:
        create(cluster, new_trainjob("ctr", catalog_runtime, namespace=tenant.ns, nodes=2), as_user=tenant.user)
        pg = cluster.wait(lambda: podgroup(cluster, "ctr", tenant.ns), what="the PodGroup")
        assert pg["spec"]["queue"] == tenant.queue
        assert pg["spec"]["priorityClassName"] == classes["default"]
        done = cluster.wait(lambda: (c := condition(get_trainjob(cluster, "ctr", tenant.ns), "Complete"))
                            and c["status"] == "True", timeout=120, what="the TrainJob to complete")
        assert done
        assert condition(get_trainjob(cluster, "ctr", tenant.ns), FAILED) is None
        ran = pods(cluster, tenant.ns, "ctr")
        assert len(ran) == 2 and {p.spec.priority_class_name for p in ran} == {classes["default"]}
        assert {p.spec.priority for p in ran} == {100}
    finally:
        remove_tenant(cluster, tenant.spec)


def test_admission_refuses_another_queue_and_an_ungranted_class_naming_field_and_allowed_values(
        cluster, shared, classes, catalog_runtime):
    tenant = tenant_with(cluster, classes)
    queue_runtime = f"queued-{uuid.uuid4().hex[:6]}"
    create(cluster, torch_runtime(queue_runtime, gpus=8, queue="default"))
    try:
        by_annotation = create_error(cluster, new_trainjob("q1", catalog_runtime, namespace=tenant.ns, nodes=1,
                                                           annotations={QUEUE_ANNOTATION: "default"}), tenant.user)
        assert "spec.annotations" in by_annotation and tenant.queue in by_annotation
        by_runtime = create_error(cluster, new_trainjob("q2", queue_runtime, namespace=tenant.ns, nodes=1), tenant.user)
        assert f'spec.runtimeRef: Unsupported value: "default": supported values: "{tenant.queue}"' in by_runtime
        by_label = create_error(cluster, new_trainjob("p1", catalog_runtime, namespace=tenant.ns, nodes=1,
                                                      metadata_labels={PRIORITY_LABEL: classes["other"]}), tenant.user)
        allowed = f'"{classes["high"]}", "{classes["default"]}"'
        assert (f'metadata.labels[{PRIORITY_LABEL}]: Unsupported value: "{classes["other"]}": supported values: '
                f'{allowed}') in by_label
        assert get_trainjob(cluster, "q1", tenant.ns) is None and get_trainjob(cluster, "p1", tenant.ns) is None
    finally:
        delete_cluster_object(cluster, "clustertrainingruntime", queue_runtime)
        remove_tenant(cluster, tenant.spec)


def test_priority_label_puts_a_granted_class_on_pods_and_podgroup_and_volcano_runs_it_first(
        cluster, shared, classes, catalog_runtime):
    """Queue capability 8 GPUs, held by a running gang; a default job then a training-high job wait. The gang
    profile has no preempt action, so nothing is evicted; once the queue frees up the high one goes first."""
    tenant = tenant_with(cluster, classes, gpus=24, queue_gpus=8)
    try:
        cluster.apply(*queued_blocker(tenant, "hold", priority=classes["default"]))
        blocker_running(cluster, tenant.ns, "hold")
        create(cluster, new_trainjob("low", catalog_runtime, namespace=tenant.ns, nodes=1), as_user=tenant.user)
        time.sleep(1)
        create(cluster, new_trainjob("high", catalog_runtime, namespace=tenant.ns, nodes=1,
                                     metadata_labels={PRIORITY_LABEL: classes["high"]}),
               as_user=tenant.user)
        high_pg = cluster.wait(lambda: podgroup(cluster, "high", tenant.ns), what="the high PodGroup")
        assert high_pg["spec"]["priorityClassName"] == classes["high"]
        assert podgroup(cluster, "low", tenant.ns)["spec"]["priorityClassName"] == classes["default"]
        cluster.wait(lambda: all((podgroup(cluster, n, tenant.ns).get("status") or {}).get("phase") == "Pending"
                                 for n in ("low", "high")), what="both gangs kept out of the full queue")
        cluster.wait_scheduler_cycles(5)  # no preemption in the gang profile: after several sessions both wait
        assert blocker_running(cluster, tenant.ns, "hold")
        for name in ("low", "high"):  # not admitted: no pod exists yet (tenant gangs' JobSets wait suspended)
            assert jobset(cluster, name, tenant.ns)["spec"]["suspend"] is True
            assert pods(cluster, tenant.ns, name) == []

        cluster.kubectl("delete", "replicaset,podgroups.scheduling.volcano.sh", "hold", "-n", tenant.ns)
        cluster.kubectl("delete", "pod", "-l", "blocker=hold", "-n", tenant.ns, "--grace-period=0",
                        "--force")  # the running gang ends: the queue frees up
        bound = cluster.wait(lambda: [p for p in pods(cluster, tenant.ns, "high") if p.spec.node_name], interval=0.2,
                             what="the training-high gang bound")
        assert {p.spec.priority_class_name for p in bound} == {classes["high"]}
        assert bound[0].spec.priority == 10000
        assert not any(p.spec.node_name for p in pods(cluster, tenant.ns, "low")), "the default gang went first"
        cluster.wait(lambda: (c := condition(get_trainjob(cluster, "low", tenant.ns), "Complete")) and c["status"] == "True",
                     timeout=120, what="the default gang to run after the high one")
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_controller_that_may_not_read_namespaces_skips_tenant_checks_instead_of_failing(cluster, shared, classes):
    """An in-cluster controller deployed without `get namespaces`: the webhook's Namespace lookup degrades to
    "no tenant policy" (the queue guard still holds) rather than refusing every TrainJob; other lookups still fail."""
    from trainyard.cluster.local import user_kubeconfig
    from trainyard.controller.runtime.apiserver import ApiServer
    from trainyard.controller.runtime.transport import ApiError
    from trainyard.controller.runtime.webhook_server import make_lookup

    tenant = tenant_with(cluster, classes)
    try:
        admin = make_lookup(ApiServer.from_kubeconfig(cluster.kubeconfig))
        assert admin("Namespace", tenant.ns)["metadata"]["labels"]["trainyard.dev/queue"] == tenant.queue
        user, group = tenant.user
        restricted = make_lookup(ApiServer.from_kubeconfig(str(user_kubeconfig(cluster.name, user, (group,)))))
        assert restricted("Namespace", tenant.ns) is None
        with pytest.raises(ApiError) as refused:
            restricted("Queue", tenant.queue)
        assert refused.value.status == 403
    finally:
        remove_tenant(cluster, tenant.spec)


def test_an_identity_with_podgroup_rights_cannot_steer_a_trainjobs_podgroup(cluster, shared, classes, catalog_runtime):
    """Attacks found by hidden sets: patched to system-node-critical with minMember 0, admitted, reverted ~4 s later;
    status.phase forged to Inqueue, which started a gang in a queue its budget had closed."""
    tenant = tenant_with(cluster, classes)
    ns = tenant.ns
    sa = f"system:serviceaccount:{ns}:workflow"
    cluster.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "workflow", "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "pg-editor", "namespace": ns},
         "rules": [{"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": ["get", "patch", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "pg-editor", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pg-editor"},
         "subjects": [{"kind": "ServiceAccount", "name": "workflow", "namespace": ns}]})
    try:
        create(cluster, new_trainjob("steered", catalog_runtime, namespace=ns, nodes=1, suspend=True),
               as_user=tenant.user)
        before = cluster.wait(lambda: podgroup(cluster, "steered", ns), what="the TrainJob's PodGroup")["spec"]
        for patch in ({"priorityClassName": "system-node-critical", "minMember": 0}, {"queue": tenant.queue + "-x"},
                      {"minResources": {"nvidia.com/gpu": "1"}}, {"minMember": 0}):
            try:
                cluster.kubectl(f"--as={sa}", "patch", "podgroup.scheduling.volcano.sh", "steered", "-n", ns,
                                "--type=merge", "-p", json.dumps({"spec": patch}))
            except ClusterError as exc:
                assert "this PodGroup belongs to a TrainJob: only the TrainJob controller may change its queue" in str(exc) \
                    or ("queue" in patch and "names a Volcano queue other than this namespace's queue" in str(exc)), str(exc)
            else:
                raise AssertionError(f"the patch {patch} was admitted")
        # the controller starts a gang when its PodGroup reads Inqueue: only Volcano may write that
        phase = podgroup(cluster, "steered", ns).get("status", {}).get("phase")
        for forged in ({"phase": "Inqueue"}, {"phase": "Running", "running": 1}):
            if forged["phase"] == phase:
                continue
            with pytest.raises(ClusterError, match="its status .* is written by Volcano only"):
                cluster.kubectl(f"--as={sa}", "patch", "podgroup.scheduling.volcano.sh", "steered", "-n", ns,
                                "--type=merge", "-p", json.dumps({"status": forged}))
        cluster.kubectl(f"--as={sa}", "patch", "podgroup.scheduling.volcano.sh", "steered", "-n", ns, "--type=merge",
                        "-p", json.dumps({"metadata": {"labels": {"note": "mine"}}}))  # what does not steer stays allowed
        assert podgroup(cluster, "steered", ns)["spec"] == before
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_failed_trainjobs_gang_stops_holding_the_tenants_queue(cluster, shared, classes, catalog_runtime):
    """Volcano keeps an enqueued PodGroup Inqueue after its pods are gone, reserving its minResources in the queue:
    one failed 16-GPU gang held team-a's whole capability on real nodes until someone deleted the TrainJob. Here a
    gang that fits the queue but no node (a selector nothing matches) is Inqueue, then fails on its deadline: its
    PodGroup goes, and the next 16-GPU gang of the queue starts."""
    tenant = tenant_with(cluster, classes)
    try:
        nowhere = [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"trainyard.dev/nowhere": "x"}}}]
        create(cluster, new_trainjob("doomed", catalog_runtime, namespace=tenant.ns, nodes=2, activeDeadlineSeconds=20,
                                     podTemplateOverrides=nowhere), as_user=tenant.user)
        inqueue = cluster.wait(lambda: (pg := podgroup(cluster, "doomed", tenant.ns))
                               and (pg.get("status") or {}).get("phase") == "Inqueue" and pg,
                               what="the doomed gang Inqueue (room in the queue, no node to run on)")
        assert inqueue["spec"]["minResources"]["nvidia.com/gpu"] == "16"
        failed = cluster.wait(lambda: (c := condition(get_trainjob(cluster, "doomed", tenant.ns), "Failed"))
                              and c["status"] == "True" and c, timeout=60, what="the deadline to fail it")
        assert failed["reason"] == "DeadlineExceeded"
        cluster.wait(lambda: podgroup(cluster, "doomed", tenant.ns) is None, timeout=30,
                     what="the failed TrainJob's PodGroup deleted")
        assert get_trainjob(cluster, "doomed", tenant.ns) is not None, "the TrainJob itself stays, Failed"
        create(cluster, new_trainjob("next", catalog_runtime, namespace=tenant.ns, nodes=2), as_user=tenant.user)
        done = cluster.wait(lambda: (c := condition(get_trainjob(cluster, "next", tenant.ns), "Complete"))
                            and c["status"] == "True", timeout=120, what="the next 16-GPU gang of the queue to run")
        assert done
    finally:
        remove_tenant(cluster, tenant.spec)


def test_two_gangs_submitted_together_under_a_quota_equal_to_the_capability_both_run(cluster, shared, classes,
                                                                                    catalog_runtime):
    """Found on a fresh `make up`: two 2x8-GPU TrainJobs created together in a tenant whose GPU quota equals its queue
    capability (16) each got ONE pod created before the ResourceQuota was full (it counts pods that exist, scheduled
    or not), and both gangs waited for ever. A tenant gang's JobSet now waits suspended until Volcano admits its
    PodGroup. Here both are submitted while two 8-GPU blockers hold the queue and the quota: both wait without a pod,
    each TrainJob says why; once the blockers go, both run, one after the other."""
    tenant = tenant_with(cluster, classes)
    names = ("first", "second")
    try:
        for hold in ("hold-a", "hold-b"):  # 8 GPUs each: a node has 8
            cluster.apply(*queued_blocker(tenant, hold))
            blocker_running(cluster, tenant.ns, hold)
        for name in names:
            create(cluster, new_trainjob(name, catalog_runtime, namespace=tenant.ns, nodes=2), as_user=tenant.user)

        def told_why(name: str) -> list[str]:
            events = cluster.core.list_namespaced_event(tenant.ns, field_selector=f"involvedObject.name={name}").items
            return [e.message for e in events if e.reason == "TrainJobGangPending" and e.involved_object.kind == "TrainJob"
                    and "queue resource quota insufficient" in e.message]

        for name in names:
            said = cluster.wait(lambda: told_why(name), timeout=60, what=f"{name}: the event saying why it waits")
            assert f"gang waits to enter queue {tenant.queue}" in said[0]
            assert (podgroup(cluster, name, tenant.ns).get("status") or {}).get("phase") == "Pending"
            assert jobset(cluster, name, tenant.ns)["spec"]["suspend"] is True
            assert pods(cluster, tenant.ns, name) == [], f"{name} has pods before Volcano admitted its gang"
        resumed_before = cluster.metric("controller_metrics", "trainyard_admitted_gang_resume_seconds_count")
        cluster.kubectl("delete", "replicaset,podgroup", "hold-a", "hold-b", "-n", tenant.ns, "--wait=false")

        def invariant_then_done() -> bool:
            """On every poll: a gang Volcano has not admitted has a suspended JobSet and no pod."""
            finished = 0
            for name in names:
                phase = ((podgroup(cluster, name, tenant.ns) or {}).get("status") or {}).get("phase", "")
                if phase in ("", "Pending"):
                    assert jobset(cluster, name, tenant.ns)["spec"].get("suspend") is True, (name, phase)
                    assert pods(cluster, tenant.ns, name) == [], f"{name} has pods before Volcano admitted it"
                done = condition(get_trainjob(cluster, name, tenant.ns), "Complete")
                finished += bool(done and done["status"] == "True")
            return finished == len(names)

        cluster.wait(invariant_then_done, timeout=180, interval=1, what="both gangs to complete, one after the other")
        for name in names:
            assert condition(get_trainjob(cluster, name, tenant.ns), FAILED) is None
        # each was resumed by the reconcile its admission brought, ahead of other work, and measured
        resumed = cluster.metric("controller_metrics", "trainyard_admitted_gang_resume_seconds_count") - resumed_before
        assert resumed >= len(names), resumed
    finally:
        remove_tenant(cluster, tenant.spec)
