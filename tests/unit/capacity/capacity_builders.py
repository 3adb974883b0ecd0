"""Small builders of the listed objects the capacity functions read."""

from __future__ import annotations

GPU = "nvidia.com/gpu"


def node(name: str, rack: str, gpus: int = 8, spine: str = "spine-0", ready: bool = True, cordoned: bool = False) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"trainyard.dev/rack": rack, "trainyard.dev/spine": spine}},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"allocatable": {GPU: str(gpus), "cpu": "96", "memory": "1024Gi"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def cluster(*free_layout: tuple[str, str]) -> list[dict]:
    return [node(name, rack) for name, rack in free_layout]


FOUR = cluster(("n0", "rack-0"), ("n1", "rack-0"), ("n2", "rack-1"), ("n3", "rack-1"))


def pod(name: str, node_name: str | None, gpus: int, ns: str = "ns", phase: str = "Running", group: str | None = None,
        scheduler: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": ns}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict = {"containers": [{"name": "c", "resources": {"limits": {GPU: str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def queue(name: str, capability: int | None = None, deserved: int | None = None, state: str = "Open",
          weight: int = 1) -> dict:
    spec: dict = {"weight": weight}
    if capability is not None:
        spec["capability"] = {GPU: str(capability)}
    if deserved is not None:
        spec["deserved"] = {GPU: str(deserved)}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": spec, "status": {"state": state}}


def pod_group(name: str, queue_name: str, gpus: int, members: int = 1, phase: str = "Running", running: int = 0,
              ns: str = "ns", conditions: list | None = None) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
            "spec": {"minMember": members, "queue": queue_name, "minResources": {GPU: str(gpus)}},
            "status": {"phase": phase, "running": running, "conditions": conditions or []}}


def quota(name: str, hard: dict, used: dict | None = None, ns: str = "ns", scope: dict | None = None) -> dict:
    spec: dict = {"hard": {k: str(v) for k, v in hard.items()}}
    if scope:
        spec["scopeSelector"] = scope
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
            "spec": spec, "status": {"hard": spec["hard"], "used": {k: str(v) for k, v in (used or {}).items()}}}


def built(pods: int, gpus: int, queue_name: str | None = "team-a", topology: dict | None = None,
          priority: str | None = None, ns: str = "ns") -> list[dict]:
    """What build_objects returns for a one-job torch TrainJob: a PodGroup and a JobSet."""
    pod_spec: dict = {"containers": [{"name": "node", "resources": {"limits": {GPU: str(gpus)}}}]}
    if priority:
        pod_spec["priorityClassName"] = priority
    group_spec: dict = {"minMember": pods, "minResources": {GPU: str(pods * gpus)}}
    if queue_name:
        group_spec["queue"] = queue_name
    if topology:
        group_spec["networkTopology"] = topology
    if priority:
        group_spec["priorityClassName"] = priority
    return [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "tj", "namespace": ns}, "spec": group_spec},
            {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "tj", "namespace": ns},
             "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                 "parallelism": pods, "completions": pods, "template": {
                     "metadata": {"annotations": {"scheduling.k8s.io/group-name": "tj"}}, "spec": pod_spec}}}}]}}]
