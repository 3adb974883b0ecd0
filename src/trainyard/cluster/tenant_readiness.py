"""When freshly applied tenants are really in force on a local cluster (I/O): a TrainJob created earlier would
meet an uncounted quota ("status unknown for quota") or admission policies not yet loaded, and be refused for a
reason no real tenant meets."""

from __future__ import annotations

import json
import time

from trainyard import k8s as K
from trainyard.cluster import local
from trainyard.waiting import wait_for

PROBE_NAMESPACE = "quota-probe"


def _kubectl(cluster: str, *args: str, obj: dict) -> str:
    return local.kubectl(cluster, *args, input_text=json.dumps(obj))


def quota_counts_custom_resources(cluster: str, core) -> bool:
    """A quota created before the quota controller discovered TrainJobs stays uncounted for minutes (until its
    full resync): probe with a fresh quota in a scratch namespace; True once one counts them."""
    key = f"count/{K.TRAINJOBS}.{K.TRAINER_GROUP}"
    _kubectl(cluster, "apply", "-f", "-", obj={"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": PROBE_NAMESPACE}})
    name = f"probe-{time.monotonic_ns()}"
    _kubectl(cluster, "apply", "-f", "-", obj={"apiVersion": "v1", "kind": "ResourceQuota",
                                                "metadata": {"name": name, "namespace": PROBE_NAMESPACE},
                                                "spec": {"hard": {key: "100"}}})

    def counted() -> bool:
        status = core.read_namespaced_resource_quota(name, PROBE_NAMESPACE).status
        return bool(status and key in (status.used or {}))

    return bool(wait_for(counted, 5, f"quota {name} counting TrainJobs", 0.5, error=None))


def quotas_synced(core, namespace: str) -> bool:
    """Every ResourceQuota of the namespace has its usage filled in (quota admission refuses until then)."""
    return all(q.status and q.status.hard == q.spec.hard and set(q.status.used or {}) >= set(q.spec.hard)
               for q in core.list_namespaced_resource_quota(namespace).items)


def policies_in_effect(cluster: str, namespace: str) -> bool:
    """The tenant's GPU pod routing policy is loaded: a GPU pod created there (dry run) goes to Volcano."""
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": namespace},
             "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"limits": {K.GPU_RESOURCE: "1"}}}]}}
    try:
        return _kubectl(cluster, "create", "--dry-run=server", "-o", "jsonpath={.spec.schedulerName}", "-f", "-",
                        obj=probe) == K.VOLCANO_SCHEDULER_NAME
    except local.ClusterError:
        return False


def wait_quota_controller_counting(cluster: str, core, timeout: float = 180) -> None:
    """Block until the quota controller counts TrainJobs: call it before creating the tenants' quotas."""
    wait_for(lambda: quota_counts_custom_resources(cluster, core), timeout, "the quota controller counting TrainJobs",
             0.5)


def wait_tenants_in_force(cluster: str, core, namespaces, timeout: float = 120) -> None:
    """Block until every namespace's quotas are counted and its admission policies loaded."""
    def in_force(namespace: str) -> bool:
        return policies_in_effect(cluster, namespace) and quotas_synced(core, namespace)

    for namespace in namespaces:
        wait_for(lambda: in_force(namespace), timeout, f"the admission policies and quotas of {namespace}", 0.5)
