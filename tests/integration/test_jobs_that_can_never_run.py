"""A job that can never run is told so and holds nothing (real API server, Pod Security admission, the real Job
controller, Volcano and the controller): pods the API server would refuse are refused with the TrainJob at create
(and by `trainyard fit`), in the API server's words; pods refused later (a policy added after the create) fail the
TrainJob within seconds and free its queue for the next gang; a TrainJob cannot make its pods run as a
ServiceAccount the tenant was not given, whoever writes it."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest

from builders import new_trainjob, tenant_spec
from tenant_helpers import (add_tenant, condition, create, create_error, get_trainjob, jobset, podgroup,
                            remove_tenant, warning_events)
from test_capacity import fit, trainyard

pytestmark = pytest.mark.integration

PRIVILEGED = "violates PodSecurity"
GPU = "nvidia.com/gpu"


def privileged_patch() -> list[dict]:
    """runtimePatches, as alice writes them, setting securityContext.privileged on the trainer's container."""
    return [{"manager": "example.com/alice", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [
            {"name": "node", "securityContext": {"privileged": True}}]}}}}}]}}}}]


def service_account_patch(account: str) -> list[dict]:
    return [{"manager": "example.com/alice", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {"serviceAccountName": account}}}}}]}}}}]


def eight_gpus(name: str, runtime: str, ns: str, nodes: int = 1, **fields) -> dict:
    return new_trainjob(name, runtime, namespace=ns, nodes=nodes,
                        per_node={"requests": {GPU: "8"}, "limits": {GPU: "8"}}, **fields)


def set_pod_security(cluster, ns: str, level: str) -> None:
    cluster.kubectl("label", "namespace", ns, f"pod-security.kubernetes.io/enforce={level}", "--overwrite")


def complete(cluster, name: str, ns: str) -> bool:
    found = condition(get_trainjob(cluster, name, ns), "Complete")
    return bool(found and found["status"] == "True")


def test_pods_pod_security_refuses_are_refused_at_create_and_by_fit_in_the_api_servers_words(
        cluster, shared, catalog_runtime, tmp_path):
    """The issue's case: validate, fit and the webhook said OK to a privileged trainer in a baseline namespace."""
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        set_pod_security(cluster, tenant.ns, "baseline")
        broken = eight_gpus("broken", catalog_runtime, tenant.ns, runtimePatches=privileged_patch())
        refused = create_error(cluster, broken, as_user=tenant.user)
        assert PRIVILEGED in refused and 'privileged (container "node"' in refused, refused
        assert "fix: remove what the namespace's Pod Security level forbids" in refused
        assert get_trainjob(cluster, "broken", tenant.ns) is None
        told = fit(cluster, tmp_path, broken)
        assert told.returncode == 2, told.stdout + told.stderr
        assert PRIVILEGED in told.stdout and told.stdout.splitlines()[-1].startswith("refused"), told.stdout
        # the same TrainJob without the patch is admitted and runs: the refusal is the patch's, not the namespace's
        create(cluster, eight_gpus("fine", catalog_runtime, tenant.ns), as_user=tenant.user)
        assert cluster.wait(lambda: complete(cluster, "fine", tenant.ns), timeout=120, what="the fine TrainJob done")
    finally:
        remove_tenant(cluster, tenant.spec)


def test_pods_refused_after_create_fail_the_trainjob_within_seconds_and_free_the_queue(cluster, shared, catalog_runtime):
    """A policy added later: created (suspended) while the namespace allowed privileged pods, resumed after it became
    baseline. The Job controller's pods are refused; the controller fails the TrainJob with the API server's words
    (one event), deletes its JobSet and PodGroup, and a teammate's gang of the whole queue (2 x 8 GPUs) runs."""
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        set_pod_security(cluster, tenant.ns, "privileged")
        create(cluster, eight_gpus("broken", catalog_runtime, tenant.ns, runtimePatches=privileged_patch(),
                                   suspend=True), as_user=tenant.user)
        cluster.wait(lambda: jobset(cluster, "broken", tenant.ns), what="the suspended JobSet")
        set_pod_security(cluster, tenant.ns, "baseline")
        cluster.kubectl("patch", "trainjob", "broken", "-n", tenant.ns, "--type=merge", "-p",
                        '{"spec": {"suspend": false}}', f"--as={tenant.user[0]}", f"--as-group={tenant.user[1]}")
        cluster.wait(lambda: ((podgroup(cluster, "broken", tenant.ns) or {}).get("status") or {}).get("phase")
                     not in (None, "", "Pending"), what="Volcano admitting the broken gang (it reserves 8 GPUs)")
        admitted = time.monotonic()
        failed = cluster.wait(lambda: (c := condition(get_trainjob(cluster, "broken", tenant.ns), "Failed"))
                              and c["status"] == "True" and c, timeout=60, interval=0.25,
                              what="the TrainJob failed for its refused pods")
        took = time.monotonic() - admitted
        assert failed["reason"] == "PodsRefused", failed
        assert PRIVILEGED in failed["message"] and "fix: " in failed["message"]
        assert took < 30, f"noticed {took:.1f} s after admission"
        cluster.wait(lambda: podgroup(cluster, "broken", tenant.ns) is None and jobset(cluster, "broken", tenant.ns)
                     is None, timeout=30, what="its PodGroup and JobSet deleted (nothing held, nothing retried)")
        create(cluster, eight_gpus("teammate", catalog_runtime, tenant.ns, nodes=2), as_user=tenant.user)
        assert cluster.wait(lambda: complete(cluster, "teammate", tenant.ns), timeout=120,
                            what="the teammate's 2 x 8-GPU gang (the whole queue) to run")
        events = [e for e in warning_events(cluster, "broken", tenant.ns) if e.reason == "TrainJobPodsRefused"]
        assert len(events) == 1 and PRIVILEGED in events[0].message, [e.message for e in events]
        assert condition(get_trainjob(cluster, "broken", tenant.ns), "Failed")["reason"] == "PodsRefused"
        report = trainyard(cluster, "report", "--all")
        assert report.returncode == 0, report.stderr
        section = report.stdout.split("TrainJobs that can never start", 1)[-1]
        assert "TrainJobs that can never start" in report.stdout and "broken" in section and "PodsRefused" in section
        assert f"{tenant.ns}/broken" not in report.stdout.split("Pending gangs", 1)[-1].split("TrainJobs that", 1)[0], \
            "no start estimate counts it: it is no pending gang"
    finally:
        remove_tenant(cluster, tenant.spec)


def _service_account(cluster, ns: str, name: str) -> None:
    cluster.kubectl("create", "serviceaccount", name, "-n", ns)


@pytest.mark.parametrize("who", ["user", "admin"])
def test_a_trainjob_cannot_borrow_a_service_account_the_tenant_was_not_given(cluster, shared, catalog_runtime, who):
    """A CI system's ServiceAccount (allowed to create pods and JobSets) lives in the tenant namespace. Neither alice
    nor the tenant admin gets pods running as it through a TrainJob; a ServiceAccount the stack lists is usable."""
    spec = tenant_spec(gpus=16)
    spec = replace(spec, service_accounts=("trainer",))
    tenant = add_tenant(cluster, spec)
    try:
        for name in ("ci-deployer", "trainer"):
            _service_account(cluster, tenant.ns, name)
        identity = tenant.user if who == "user" else (f"bob-{uuid.uuid4().hex[:4]}", spec.groups.admins[0])
        refused = create_error(cluster, eight_gpus("borrow", catalog_runtime, tenant.ns,
                                                   runtimePatches=service_account_patch("ci-deployer")),
                               as_user=identity)
        assert "ServiceAccount 'ci-deployer'" in refused and "serviceAccounts" in refused, refused
        assert get_trainjob(cluster, "borrow", tenant.ns) is None
        create(cluster, eight_gpus("listed", catalog_runtime, tenant.ns, runtimePatches=service_account_patch("trainer")),
               as_user=identity)
        assert cluster.wait(lambda: complete(cluster, "listed", tenant.ns), timeout=120, what="the listed account's job")
        ran = [p for p in cluster.core.list_namespaced_pod(tenant.ns).items
               if (p.metadata.labels or {}).get("jobset.sigs.k8s.io/jobset-name") == "listed"]
        assert ran and {p.spec.service_account_name for p in ran} == {"trainer"}
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_gang_whose_pods_a_full_quota_refuses_is_released_and_runs_once_there_is_room(
        cluster, shared, catalog_runtime):
    """A reason that may pass: a ResourceQuota of one pod, held by another pod. Volcano admits the gang (it knows
    nothing of pod counts) and the Job controller's creates are refused; after the test cluster's gang start timeout
    (10 s) the gang is released with a Warning that quotes the API server (the TrainJob is not failed); once the pod
    is gone it is admitted again and runs."""
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        cluster.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-pod", "namespace": tenant.ns},
                       "spec": {"hard": {"pods": "1"}}})
        cluster.wait(lambda: (q := cluster.core.read_namespaced_resource_quota("one-pod", tenant.ns).status)
                     and (q.used or {}).get("pods") is not None, what="the pod quota counted")
        cluster.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "holder", "namespace": tenant.ns},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        create(cluster, eight_gpus("waits", catalog_runtime, tenant.ns), as_user=tenant.user)
        released = cluster.wait(lambda: [e for e in warning_events(cluster, "waits", tenant.ns)
                                         if e.reason == "TrainJobGangReleased"], timeout=90,
                                what="the gang released after its pods were refused for 10 s")
        assert "exceeded quota: one-pod" in released[0].message and "no longer holds its queue" in released[0].message
        tj = get_trainjob(cluster, "waits", tenant.ns)
        assert condition(tj, "Failed") is None, "a full quota may pass: the TrainJob is not failed"
        cluster.kubectl("delete", "pod", "holder", "-n", tenant.ns, "--wait=true")
        assert cluster.wait(lambda: complete(cluster, "waits", tenant.ns), timeout=180,
                            what="the released gang admitted again and run once the quota has room")
    finally:
        remove_tenant(cluster, tenant.spec)


@pytest.mark.parametrize("field, value", [("labels", {"bad key!": "x"}), ("annotations", {"-bad/": "x"}),
                                          ("labels", {"team": "not a valid value!"})])
def test_a_label_or_annotation_the_api_server_refuses_on_the_jobset_is_refused_at_create(
        cluster, shared, catalog_runtime, field, value):
    """spec.labels / spec.annotations are copied onto the JobSet; the API server's own rules for their keys and
    values (not a hand-written copy) refuse them at create, naming the field."""
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        refused = create_error(cluster, eight_gpus("labelled", catalog_runtime, tenant.ns, **{field: value}),
                               as_user=tenant.user)
        assert f"spec.{field}" in refused and "the API server refuses the JobSet" in refused, refused
        assert get_trainjob(cluster, "labelled", tenant.ns) is None
        create(cluster, eight_gpus("plain", catalog_runtime, tenant.ns, **{field: {"team": "a"}}), as_user=tenant.user)
    finally:
        remove_tenant(cluster, tenant.spec)
