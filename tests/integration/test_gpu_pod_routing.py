"""No path around a tenant's Volcano queue: every GPU pod in a tenant namespace, whatever creates it and
whatever scheduler it names, is placed by Volcano in the tenant's queue; nothing is created bound to a node;
a TrainJob on a gang-less runtime is a gang in that queue, so its priority never makes kube-scheduler
preempt another tenant's pods."""

from __future__ import annotations

import json
import uuid

import pytest

from builders import new_trainjob, tenant_spec, torch_runtime
from tenant_helpers import (PRIORITY_LABEL, add_tenant, create, delete_cluster_object, get_trainjob, podgroup,
                            priority_class, remove_tenant)
from trainyard.platform.gpu_pod_routing import render_gpu_pod_routing_binding

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
QUEUE = "scheduling.volcano.sh/queue-name"
GROUP = "scheduling.k8s.io/group-name"


def pod_spec(gpus: int = 1, **extra) -> dict:
    return {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {GPU: str(gpus)}}}], **extra}


def template(label: str, **extra) -> dict:
    return {"metadata": {"labels": {"app": label}}, "spec": pod_spec(**extra)}


def workloads(ns: str) -> list[dict]:
    """One of each kind that creates pods, none naming volcano (two name another scheduler)."""
    def meta(name: str) -> dict:
        return {"name": name, "namespace": ns}

    selector = lambda label: {"matchLabels": {"app": label}}  # noqa: E731
    job_spec = {"template": template("job", restartPolicy="Never")}
    return [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta("bare"), "labels": {"app": "bare"}}, "spec": pod_spec()},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta("named-default"), "labels": {"app": "named-default"}},
         "spec": pod_spec(schedulerName="default-scheduler")},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("dep"),
         "spec": {"replicas": 1, "selector": selector("dep"), "template": template("dep", schedulerName="default-scheduler")}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("sts"),
         "spec": {"replicas": 1, "serviceName": "sts", "selector": selector("sts"), "template": template("sts")}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("job"), "spec": job_spec},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("cron"),
         "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": template("cron", restartPolicy="Never")}}}},
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta("js"),
         "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
             "template": template("js", restartPolicy="Never")}}}]}},
    ]


def ci_service_account(ns: str) -> list[dict]:
    """A CI identity with create rights on every workload kind (no right to pick a queue or a node)."""
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list"]},
             {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": ["create"]},
             {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["create", "get"]},
             {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["create"]}]
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ci", "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ci", "namespace": ns},
             "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "ci", "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ci"},
             "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": ns}]}]


def as_ci(cluster, ns: str, *args: str, obj: dict | None = None) -> str:
    extra = {"input_text": json.dumps(obj)} if obj is not None else {}
    return cluster.kubectl(f"--as=system:serviceaccount:{ns}:ci", *args, **extra)


def refusal(cluster, ns: str, obj: dict) -> str:
    try:
        as_ci(cluster, ns, "create", "--dry-run=server", "-f", "-", obj=obj)
    except Exception as exc:  # noqa: BLE001 - kubectl's non-zero exit carries the API server's message
        return str(exc)
    raise AssertionError(f"{obj['kind']} {obj['metadata']['name']} was accepted")


def gpu_pods(cluster, ns: str) -> list:
    return [p for p in cluster.core.list_namespaced_pod(ns).items
            if any((c.resources.limits or {}).get(GPU) for c in p.spec.containers)]


def placed(pod) -> bool:
    return bool(pod.spec.node_name) or pod.status.phase in ("Running", "Succeeded")


def test_every_gpu_pod_of_every_workload_kind_is_placed_by_volcano_in_the_tenant_queue(cluster, shared):
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    ns = tenant.ns
    try:
        cluster.apply(*ci_service_account(ns))
        for obj in workloads(ns):
            as_ci(cluster, ns, "create", "-f", "-", obj=obj)
        as_ci(cluster, ns, "create", "job", "cron-now", "--from=cronjob/cron", "-n", ns)
        apps = {"bare", "named-default", "dep", "sts", "job", "cron", "js"}

        def all_placed():
            pods = gpu_pods(cluster, ns)
            return pods if {p.metadata.labels.get("app") for p in pods if placed(p)} == apps else None

        pods = cluster.wait(all_placed, timeout=120, what="one placed GPU pod per workload kind")
        for pod in pods:
            name = f"pod {pod.metadata.name}"
            assert pod.spec.scheduler_name == "volcano", name
            assert (pod.metadata.annotations or {}).get(QUEUE) == tenant.queue, name
            group = (pod.metadata.annotations or {}).get(GROUP)
            assert group, f"{name} was given no PodGroup"
            assert podgroup(cluster, group, ns)["spec"]["queue"] == tenant.queue, name
    finally:
        remove_tenant(cluster, tenant.spec)


def test_the_tenant_queue_capability_holds_for_plain_workloads_and_nothing_is_created_bound(cluster, shared):
    tenant = add_tenant(cluster, tenant_spec(gpus=16, queue_gpus=2))
    ns = tenant.ns
    try:
        cluster.apply(*ci_service_account(ns))
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "three", "namespace": ns},
                      "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "three"}}, "template": template("three")}}
        as_ci(cluster, ns, "create", "-f", "-", obj=deployment)

        def two_run_one_waits():
            pods = gpu_pods(cluster, ns)
            running = [p for p in pods if p.status.phase == "Running"]
            waiting = [p for p in pods if any(c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
                                              for c in p.status.conditions or [])]
            return (running, waiting) if len(running) == 2 and len(waiting) == 1 else None

        running, (waiting,) = cluster.wait(two_run_one_waits, timeout=90,
                                           what="2 pods running and 1 held back by the queue capability of 2 GPUs")
        assert waiting.spec.scheduler_name == "volcano" and not waiting.spec.node_name

        bound = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound", "namespace": ns},
                 "spec": pod_spec(nodeName="gpu-node-0")}
        cpu_bound = {**bound, "spec": {"nodeName": "gpu-node-0", "containers": [{"name": "c", "image": "busybox"}]}}
        bound_template = {**deployment, "metadata": {"name": "pinned", "namespace": ns},
                          "spec": {**deployment["spec"], "template": template("three", nodeName="gpu-node-0")}}
        pinned_jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "pinned", "namespace": ns},
                         "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": template(
                             "js", restartPolicy="Never", nodeName="gpu-node-0")}}}]}}
        for obj in (bound, cpu_bound, bound_template, pinned_jobset):
            assert "sets spec.nodeName" in refusal(cluster, ns, obj) or "spec.nodeName is set at create" in \
                refusal(cluster, ns, obj), obj["kind"]
        assert "spec.nodeName is set at create, which skips the scheduler" in refusal(cluster, ns, bound)

        # without the routing binding (a half-onboarded tenant), a GPU pod naming another scheduler is refused
        delete_cluster_object(cluster, "mutatingadmissionpolicybinding",
                              render_gpu_pod_routing_binding(tenant.spec)["metadata"]["name"])
        other = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other", "namespace": ns},
                 "spec": pod_spec(schedulerName="default-scheduler")}

        def refused_without_routing():
            try:
                as_ci(cluster, ns, "create", "--dry-run=server", "-f", "-", obj=other)
            except Exception as exc:  # noqa: BLE001
                return str(exc)
            return None

        message = cluster.wait(refused_without_routing, timeout=30, what="the queue guard refusing a default-scheduler GPU pod")
        assert f"a pod naming {GPU} is scheduled by volcano in queue {tenant.queue}, not by default-scheduler" in message
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_high_priority_trainjob_on_a_gangless_runtime_waits_in_its_queue_and_preempts_no_one(cluster, shared):
    """Found by hand: with kube-scheduler, `training-high` on a gang-less runtime evicted another tenant's pod."""
    suffix = uuid.uuid4().hex[:6]
    low, high, rt = f"it-low-{suffix}", f"it-high-{suffix}", f"gangless-{suffix}"
    cluster.apply(priority_class(low, 100), priority_class(high, 100000))
    create(cluster, torch_runtime(rt, gpus=8, volcano=False))  # no podGroupPolicy, no schedulerName
    holder = add_tenant(cluster, tenant_spec(gpus=32, priority_classes=(low,), default_priority_class=low))
    urgent = add_tenant(cluster, tenant_spec(gpus=8, priority_classes=(high,), default_priority_class=high))
    try:
        fill = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "fill", "namespace": holder.ns},
                "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "fill"}},
                         "template": {"metadata": {"labels": {"app": "fill"}},
                                      "spec": pod_spec(gpus=8, priorityClassName=low)}}}
        cluster.apply(fill)
        held = cluster.wait(lambda: (r := [p for p in gpu_pods(cluster, holder.ns) if p.status.phase == "Running"])
                            and len(r) == 4 and r, timeout=180, what="the holder filling every GPU of the cluster")
        uids = {p.metadata.uid for p in held}

        create(cluster, new_trainjob("urgent", rt, namespace=urgent.ns, nodes=1, metadata_labels={PRIORITY_LABEL: high}),
               as_user=urgent.user)
        group = cluster.wait(lambda: podgroup(cluster, "urgent", urgent.ns), what="the tenant gang of a gang-less runtime")
        assert group["spec"]["queue"] == urgent.queue and group["spec"]["priorityClassName"] == high

        def unschedulable():
            pods = gpu_pods(cluster, urgent.ns)
            return pods if pods and all(any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                                                for c in p.status.conditions or []) for p in pods) else None

        waiting = cluster.wait(unschedulable, timeout=90, what="Volcano reporting the urgent gang unschedulable")
        assert {p.spec.scheduler_name for p in waiting} == {"volcano"}
        assert all(not p.spec.node_name for p in waiting)
        still = [p for p in gpu_pods(cluster, holder.ns) if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
        assert {p.metadata.uid for p in still} == uids, "a pod of the other tenant was preempted"
        assert get_trainjob(cluster, "urgent", urgent.ns) is not None
    finally:
        remove_tenant(cluster, urgent.spec)
        remove_tenant(cluster, holder.spec)
        delete_cluster_object(cluster, "clustertrainingruntime", rt)
        for name in (low, high):
            delete_cluster_object(cluster, "priorityclass", name)
