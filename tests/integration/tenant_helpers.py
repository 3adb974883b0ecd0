"""A tenant as the platform renders it (Namespace, Volcano queue, quotas, RBAC, queue guard), applied to the
test cluster without Pulumi, plus the waits the tenant tests share (their builders are tests/builders.py's)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, replace

from trainyard.cluster.local import ClusterError
from trainyard.k8s import PRIORITY_CLASS_LABEL as PRIORITY_LABEL  # noqa: F401 (the tenant tests import these)
from trainyard.k8s import TRAINER_GROUP as GROUP
from trainyard.k8s import TRAINER_VERSION as VERSION
from trainyard.k8s import VOLCANO_QUEUE_ANNOTATION as QUEUE_ANNOTATION  # noqa: F401
from trainyard.platform.gpu_pod_routing import render_gpu_pod_routing_binding
from trainyard.platform.node_loss_toleration import render_node_loss_binding
from trainyard.platform.pod_defaults import render_pod_defaults_binding
from trainyard.platform.queue_guard import render_queue_guard_binding
from trainyard.platform.stack_config import TenantSpec
from trainyard.platform.tenant_bundle import shared_bundle, tenant_bundle

from waiting import wait_for

FAILED = "ResourcesCreationFailed"


def queued_blocker(tenant, name: str, gpus: int = 8, priority: str | None = None) -> list[dict]:
    """A gang of one in the tenant's queue that kwok keeps running: a PodGroup and a ReplicaSet whose pod names it
    (the queue guard refuses bare pods naming a PodGroup; kwok completes only Jobs' pods)."""
    gpu = "nvidia.com/gpu"
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": tenant.ns},
             "spec": {"minMember": 1, "queue": tenant.queue, "minResources": {gpu: str(gpus)},
                      **({"priorityClassName": priority} if priority else {})}}
    replicas = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": tenant.ns},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"blocker": name}}, "template": {
                    "metadata": {"labels": {"blocker": name}, "annotations": {"scheduling.k8s.io/group-name": name}},
                    "spec": {"schedulerName": "volcano", **({"priorityClassName": priority} if priority else {}),
                             "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {gpu: str(gpus)}}}]}}}}
    return [group, replicas]


def blocker_running(cluster, ns: str, name: str) -> list:
    return cluster.wait(lambda: [p for p in cluster.core.list_namespaced_pod(ns, label_selector=f"blocker={name}").items
                                 if p.status.phase == "Running"], what=f"the blocker {name} running")


@dataclass
class Tenant:
    spec: TenantSpec
    created: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return self.spec.namespace

    @property
    def queue(self) -> str:
        return self.spec.queue.name

    @property
    def user(self) -> tuple[str, str]:
        return "alice-" + self.spec.name, self.spec.groups.users[0]


def tenant_objects(spec: TenantSpec) -> list[dict]:
    """What platform/components/tenancy.py registers for one tenant (NetworkPolicy left out)."""
    return tenant_bundle(spec)


def shared_objects() -> list[dict]:
    return shared_bundle()


def _exists(cluster, obj: dict) -> bool:
    return bool(cluster.kubectl("get", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found",
                                "-o", "name").strip())


def prepare(cluster) -> list[dict]:
    """Once per module: the platform's cluster-wide tenant pieces, and quotas that count custom resources.

    Returns what it created: the session's platform stack may have deployed them already, and a test
    must neither take them over nor delete them (the stack's next preview would find them gone)."""
    missing = [obj for obj in shared_objects() if not _exists(cluster, obj)]
    if missing:
        cluster.apply(*missing)
    wait_quota_monitors(cluster)
    return missing


def unprepare(cluster, created: list[dict]) -> None:
    for obj in created:
        cluster.kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", "--wait=false")


def add_tenant(cluster, spec: TenantSpec) -> Tenant:
    if spec.namespace not in cluster.created_namespaces:
        cluster.created_namespaces.append(spec.namespace)  # deleted after the test
    cluster.apply(*tenant_objects(spec))
    wait_quotas_synced(cluster, spec.namespace)
    wait_admission_policies(cluster, spec.namespace)
    return Tenant(spec)


def _dry_run_gpu_pod(cluster, ns: str, jsonpath: str = "{.spec.schedulerName}", **spec) -> tuple[bool, str]:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": ns},
           "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                    **spec}}
    try:
        return True, cluster.kubectl("create", "--dry-run=server", "-f", "-", "-o", f"jsonpath={jsonpath}",
                                     input_text=json.dumps(pod))
    except ClusterError as exc:
        return False, str(exc)


def wait_admission_policies(cluster, ns: str) -> None:
    """Admission policies bite only once the API server has loaded their new bindings (about a second):
    probe until a GPU pod is routed to Volcano, given a memory limit and the tenant's node-loss toleration, and
    one created bound to a node is refused."""
    def in_effect() -> bool:
        routed, bound = _dry_run_gpu_pod(cluster, ns), _dry_run_gpu_pod(cluster, ns, nodeName="probe")
        limited = _dry_run_gpu_pod(cluster, ns, "{.spec.containers[0].resources.limits.memory}")
        tolerated = _dry_run_gpu_pod(cluster, ns, "{.spec.tolerations[?(@.key=='node.kubernetes.io/unreachable')]"
                                                  ".tolerationSeconds}")
        return (routed == (True, "volcano") and not bound[0] and "denied" in bound[1] and limited[1] != ""
                and tolerated[1] not in ("", "300"))

    cluster.wait(in_effect, timeout=60, interval=0.5, what=f"the admission policies of {ns} in effect")


COUNTED = ("count/trainjobs.trainer.kubeflow.org", "count/jobsets.jobset.x-k8s.io", "count/configmaps")


def wait_quota_monitors(cluster, timeout: float = 120) -> None:
    """Right after the control plane starts, the quota controller only counts custom resources once discovery
    has found them (it re-discovers every 30 s), and a quota it saw before that stays uncounted until its
    next full resync (minutes). Probe with fresh quotas until one is counted."""
    ns = cluster.namespace("quota-probe")

    def a_fresh_quota_counted() -> bool:
        name = f"probe-{uuid.uuid4().hex[:6]}"
        cluster.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
                       "spec": {"hard": {key: "100" for key in COUNTED}}})

        def counted() -> bool:
            status = cluster.core.read_namespaced_resource_quota(name, ns).status
            return bool(status and set(status.used or {}) >= set(COUNTED))

        return wait_for(counted, 5, f"quota {name} counted", 0.5, error=None)

    wait_for(a_fresh_quota_counted, timeout, "the quota controller to count custom resources", interval=0)


def wait_quotas_synced(cluster, ns: str) -> None:
    """Quota admission refuses what a quota counts until the quota controller has filled its status."""
    def synced(quota) -> bool:
        status = quota.status
        return bool(status and status.hard == quota.spec.hard and set(status.used or {}) >= set(quota.spec.hard))

    cluster.wait(lambda: all(synced(q) for q in cluster.core.list_namespaced_resource_quota(ns).items),
                 what=f"the ResourceQuotas of {ns} synced")


def remove_tenant(cluster, spec: TenantSpec) -> None:
    """The cluster-scoped pieces (the namespace goes with the test's namespaces)."""
    for kind, name in (("queues.scheduling.volcano.sh", spec.queue.name),
                       ("validatingadmissionpolicybinding", render_queue_guard_binding(spec)["metadata"]["name"]),
                       ("mutatingadmissionpolicybinding", render_gpu_pod_routing_binding(spec)["metadata"]["name"]),
                       ("mutatingadmissionpolicybinding", render_pod_defaults_binding(spec)["metadata"]["name"]),
                       ("mutatingadmissionpolicybinding", render_node_loss_binding(spec)["metadata"]["name"]),
                       ("clusterrolebinding", f"trainyard:runtime-reader:{spec.name}")):
        cluster.kubectl("delete", kind, name, "--ignore-not-found", "--wait=false")


def with_gpus(spec: TenantSpec, gpus: int) -> TenantSpec:
    """The same tenant after the platform team raised its GPU quota and queue capability."""
    return replace(spec, quota=replace(spec.quota, gpu=gpus),
                   queue=replace(spec.queue, capability={**spec.queue.capability, "nvidia.com/gpu": gpus}))


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def create(cluster, obj: dict, as_user: tuple[str, str] | None = None) -> str:
    args = [f"--as={as_user[0]}", f"--as-group={as_user[1]}"] if as_user else []
    return cluster.kubectl(*args, "create", "-f", "-", input_text=json.dumps(obj))


def create_error(cluster, obj: dict, as_user: tuple[str, str] | None = None) -> str:
    """The API server's refusal of a create (the test fails if it is accepted)."""
    try:
        create(cluster, obj, as_user)
    except ClusterError as exc:  # kubectl's non-zero exit, with the API server's message
        return str(exc)
    raise AssertionError(f"{obj['kind']} {obj['metadata']['name']} was accepted")


def get_trainjob(cluster, name: str, ns: str) -> dict | None:
    return cluster.get_object(GROUP, VERSION, "trainjobs", name, ns)


def podgroup(cluster, name: str, ns: str) -> dict | None:
    return cluster.get_object("scheduling.volcano.sh", "v1beta1", "podgroups", name, ns)


def jobset(cluster, name: str, ns: str) -> dict | None:
    return cluster.get_object("jobset.x-k8s.io", "v1alpha2", "jobsets", name, ns)


def condition(obj: dict | None, kind: str) -> dict | None:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def wait_failed(cluster, name: str, ns: str, reason: str, timeout: float = 60) -> dict:
    return cluster.wait(lambda: (c := condition(get_trainjob(cluster, name, ns), FAILED)) and c["status"] == "True"
                        and c["reason"] == reason and c, timeout=timeout, what=f"{FAILED}/{reason} on {ns}/{name}")


def wait_cleared(cluster, name: str, ns: str, timeout: float = 90) -> dict:
    """Backoff retries reach the fixed cause within the work queue's maximum delay (60 s)."""
    return cluster.wait(lambda: (tj := get_trainjob(cluster, name, ns)) and condition(tj, FAILED) is None
                        and jobset(cluster, name, ns) and tj, timeout=timeout, what=f"{FAILED} cleared on {ns}/{name}")


def warning_events(cluster, name: str, ns: str) -> list:
    events = cluster.core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    return [e for e in events if e.type == "Warning" and e.involved_object.kind == "TrainJob"]


def delete_cluster_object(cluster, kind: str, name: str) -> None:
    cluster.kubectl("delete", kind, name, "--ignore-not-found", "--wait=false")
