"""The local cluster is real: GPU nodes, the JobSet controller and Volcano gang scheduling work."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


def test_nodes_carry_gpu_labels_and_allocatable_gpus(cluster):
    nodes = cluster.core.list_node(label_selector="nvidia.com/gpu.present=true").items
    assert len(nodes) >= cluster.spec.nodes
    for node in nodes:
        labels = node.metadata.labels
        assert labels["nvidia.com/gpu.product"] == cluster.spec.gpu_product
        assert labels["nvidia.com/gpu.count"] == str(cluster.spec.gpus_per_node)
        assert labels["topology.kubernetes.io/zone"]
        assert labels["trainyard.dev/rack"].startswith("rack-")
        assert node.status.allocatable["nvidia.com/gpu"] == str(cluster.spec.gpus_per_node)
        assert node.status.capacity["nvidia.com/gpu"] == str(cluster.spec.gpus_per_node)
    ready = [n for n in nodes if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])]
    assert len(ready) == len(nodes), "kwok marks the simulated nodes Ready"


def test_api_server_reports_the_stamped_version(cluster):
    info = json.loads(cluster.kubectl("version", "-o", "json"))
    assert info["serverVersion"]["gitVersion"].startswith("v1.36.")
    assert info["clientVersion"]["gitVersion"] == info["serverVersion"]["gitVersion"]


def _jobset(name: str, replicas: int = 2, pods: int = 2) -> dict:
    pod_spec = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36",
                                                           "resources": {"requests": {"cpu": "1"}}}]}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": {
            "parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
            "template": {"spec": pod_spec}}}}]},
    }


def test_jobset_creates_jobs_and_pods_that_complete(cluster):
    ns = cluster.namespace("jobset")
    cluster.kubectl("-n", ns, "create", "-f", "-", input_text=json.dumps(_jobset("hello")))
    jobs = cluster.wait(lambda: len(cluster.kubectl("-n", ns, "get", "jobs", "-o", "name").split()) == 2 or None,
                        what="the JobSet controller to create 2 Jobs")
    assert jobs

    def completed():
        obj = json.loads(cluster.kubectl("-n", ns, "get", "jobset", "hello", "-o", "json"))
        conds = {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}
        return conds.get("Completed") == "True" and obj

    obj = cluster.wait(completed, timeout=90, what="JobSet Completed")
    assert {r["name"]: r["succeeded"] for r in obj["status"]["replicatedJobsStatus"]} == {"workers": 2}
    pods = cluster.core.list_namespaced_pod(ns).items
    assert len(pods) == 4
    assert all(p.status.phase == "Succeeded" for p in pods)
    assert {p.spec.hostname for p in pods} == {"hello-workers-0-0", "hello-workers-0-1", "hello-workers-1-0",
                                              "hello-workers-1-1"}


def _gpu_pod(name: str, ns: str, gpus: int, pool: str | None = None, group: str | None = None) -> dict:
    meta = {"name": name, "namespace": ns}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec = {"schedulerName": "volcano", "containers": [{"name": "main", "image": "busybox:1.36", "resources": {
        "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if pool:
        spec["nodeSelector"] = {"trainyard.dev/test-pool": pool}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_volcano_binds_an_eight_gpu_pod_to_a_gpu_node(cluster):
    ns = cluster.namespace("vc")
    cluster.apply(_gpu_pod("eight", ns, 8))
    node = cluster.wait(lambda: cluster.core.read_namespaced_pod("eight", ns).spec.node_name, timeout=60,
                        what="vc-scheduler to bind the pod")
    assert cluster.core.read_node(node).metadata.labels["nvidia.com/gpu.present"] == "true"
    cluster.wait(lambda: cluster.core.read_namespaced_pod("eight", ns).status.phase == "Running",
                 what="kwok to run the pod")


def test_gang_stays_unbound_until_a_second_node_exists(cluster):
    """PodGroup minMember 2, two 8-GPU pods: one node fits only one pod, so neither binds."""
    from trainyard.cluster.spec import ClusterSpec, gpu_node

    ns = cluster.namespace("gang")
    pool = ns  # a node pool of this test's own nodes
    first = gpu_node(0, ClusterSpec(nodes=1, racks=1))
    first["metadata"]["name"] = f"{ns}-a"
    first["metadata"]["labels"].update({"trainyard.dev/test-pool": pool, "kubernetes.io/hostname": f"{ns}-a"})
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(first))
    cluster.apply({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                   "metadata": {"name": "gang", "namespace": ns},
                   "spec": {"minMember": 2, "queue": "default",
                            "minResources": {"cpu": "2", "nvidia.com/gpu": "16"}}})
    cluster.apply(_gpu_pod("p0", ns, 8, pool, "gang"), _gpu_pod("p1", ns, 8, pool, "gang"))

    def bound():
        return [p.spec.node_name for p in cluster.core.list_namespaced_pod(ns).items if p.spec.node_name]

    def unschedulable():
        pg = cluster.custom.get_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", "gang")
        conds = (pg.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Unschedulable" for c in conds) or (pg.get("status") or {}).get("phase") == "Pending"

    cluster.wait(unschedulable, timeout=60, what="the scheduler to look at the gang")
    cluster.wait_scheduler_cycles(5)  # the scheduler had every chance, with only one node
    assert bound() == [], "a gang must not bind partially"

    second = json.loads(json.dumps(first))
    second["metadata"]["name"] = f"{ns}-b"
    second["metadata"]["labels"]["kubernetes.io/hostname"] = f"{ns}-b"
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(second))
    nodes = cluster.wait(lambda: len(bound()) == 2 and bound(), timeout=60, what="both gang members to bind")
    assert sorted(nodes) == [f"{ns}-a", f"{ns}-b"]
    for name in (f"{ns}-a", f"{ns}-b"):
        cluster.kubectl("delete", "node", name, "--wait=false")


def test_volcano_scheduler_follows_the_configmap(cluster):
    """What is deployed in volcano-system/volcano-scheduler-configmap is what the local vc-scheduler reads."""

    from trainyard.cluster.local import ClusterPaths
    from trainyard.cluster.processes import ProcessTable
    from trainyard.queues.scheduler_config import SchedulerSettings, render

    conf_file = ClusterPaths.for_name(cluster.name).scheduler_conf
    original = conf_file.read_text()
    wanted = render(SchedulerSettings(profile="fair-share", binpack_weight=7))
    assert wanted != original
    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                 "data": {"volcano-scheduler.conf": wanted}}
    cluster.apply(configmap)
    try:
        cluster.wait(lambda: conf_file.read_text() == wanted, timeout=30, what="the conf file to follow the ConfigMap")
        cluster.wait_scheduler_cycles(3)  # the scheduler keeps running sessions on the new configuration
        assert "vc-scheduler" in ProcessTable(ClusterPaths.for_name(cluster.name).root).running()
    finally:
        configmap["data"]["volcano-scheduler.conf"] = original
        cluster.apply(configmap)
        cluster.wait(lambda: conf_file.read_text() == original, timeout=30, what="the original configuration back")


def test_the_controller_manager_resyncs_quotas_every_few_seconds(cluster):
    """A tenant quota created before kube-controller-manager has discovered the TrainJob CRD counts its
    TrainJobs only from the next resync: 5 minutes by default, during which every TrainJob is refused
    and `platform up` waits (cluster/spec.py QUOTA_RESYNC)."""
    from trainyard.cluster import local
    from trainyard.cluster.spec import QUOTA_RESYNC

    paths = local.ClusterPaths.for_name(cluster.name)
    pid = local.kwok_processes(paths, cluster.name)["kube-controller-manager"]
    argv = open(f"/proc/{pid}/cmdline").read().split("\0")
    assert f"--resource-quota-sync-period={QUOTA_RESYNC}" in argv, argv
