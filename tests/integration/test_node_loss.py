"""A simulated GPU node dies with a gang on it (`trainyard cluster node-down`: kwok stops keeping it alive), on the
real API server with its node lifecycle, taint eviction, Job and JobSet controllers and Volcano:

- the tenant's pods tolerate a lost node for the tenant's `nodeLossTolerationSeconds`, not the API server's 300;
- the node turns NotReady, the TrainJob gets a NodeLost Event saying what follows, and the report counts none of
  the GPUs its pod there holds;
- the pod is evicted after the toleration, its Job fails and JobSet's failure policy restarts the whole gang,
  which Volcano places again on the nodes left (the lost one's GPUs are not offered), once the controller has
  deleted for good the evicted pod the dead node never confirms (JobSet deletes the failed Job in the foreground);
- the node comes back (`node-up`) and is Ready; the evicted pod is gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from trainyard import k8s as K
from trainyard.capacity import live
from trainyard.capacity.report import build_report
from trainyard.platform.stack_model import TenantLimits

from builders import new_trainjob, tenant_spec, torch_runtime
from tenant_helpers import add_tenant, create, delete_cluster_object, remove_tenant

pytestmark = pytest.mark.integration

TOLERATION_S = 15
TRAINYARD = Path(sys.executable).parent / "trainyard"


def trainyard(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TRAINYARD), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def tenant(cluster, shared):
    spec = replace(tenant_spec(gpus=32), limits=TenantLimits(node_loss_toleration_seconds=TOLERATION_S))
    added = add_tenant(cluster, spec)
    yield added
    remove_tenant(cluster, spec)


@pytest.fixture
def restartable_runtime(cluster):
    """The catalog's torch gang with one restart in its JobSet failure policy and Jobs that fail on their first
    failed pod (backoffLimit 0: a pod is not replaced on its own, the gang restarts whole); pods run ten minutes
    (kwok)."""
    name = f"torch-{uuid.uuid4().hex[:6]}"
    runtime = torch_runtime(name, gpus=8)
    runtime["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 1}
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        job["template"]["spec"]["backoffLimit"] = 0
    pod_template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod_template.setdefault("metadata", {})["annotations"] = {K.KWOK_POD_COMPLETE_DELAY_ANNOTATION: "600s"}
    create(cluster, runtime)
    yield name
    delete_cluster_object(cluster, "clustertrainingruntime", name)


def tolerations(cluster, ns: str, pod: dict) -> dict[str, int | None]:
    admitted = json.loads(cluster.kubectl("create", "-n", ns, "--dry-run=server", "-f", "-", "-o", "json",
                                          input_text=json.dumps(pod)))
    return {t.get("key", ""): t.get("tolerationSeconds") for t in admitted["spec"].get("tolerations") or []}


def probe(*extra: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": list(extra)}}


def test_a_tenants_pods_tolerate_a_lost_node_for_the_tenants_seconds_and_keep_their_own(cluster, tenant):
    assert tolerations(cluster, tenant.ns, probe()) == {"node.kubernetes.io/not-ready": TOLERATION_S,
                                                        "node.kubernetes.io/unreachable": TOLERATION_S}
    own = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
           "tolerationSeconds": 120}
    other = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    assert tolerations(cluster, tenant.ns, probe(own, other)) == {
        "node.kubernetes.io/unreachable": 120, "dedicated": None, "node.kubernetes.io/not-ready": TOLERATION_S}
    assert tolerations(cluster, "default", probe()) == {"node.kubernetes.io/not-ready": 300,
                                                        "node.kubernetes.io/unreachable": 300}, "not a tenant's"


def gang_pods(cluster, ns: str, name: str) -> list:
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    return list(cluster.core.list_namespaced_pod(ns, label_selector=selector).items)


def node_ready(cluster, node: str) -> str:
    conditions = cluster.core.read_node(node).status.conditions or []
    return next((c.status for c in conditions if c.type == "Ready"), "")


def test_a_lost_node_fails_its_pod_and_the_failure_policy_restarts_the_gang_elsewhere(cluster, tenant,
                                                                                      restartable_runtime):
    name = "lost-gang"
    create(cluster, new_trainjob(name, restartable_runtime, namespace=tenant.ns, nodes=2), as_user=tenant.user)
    def running():
        pods = [p for p in gang_pods(cluster, tenant.ns, name) if p.status.phase == "Running"]
        return pods if len(pods) == 2 else None

    first = cluster.wait(running, timeout=120, what="the gang running")
    victim = first[1].spec.node_name
    down = trainyard("cluster", "node-down", victim, "--name", cluster.name)
    try:
        assert down.returncode == 0, down.stdout + down.stderr
        lost_at = cluster.wait(lambda: time.time() if node_ready(cluster, victim) not in ("True", "") else None,
                               timeout=150, interval=2, what=f"{victim} NotReady")

        def node_lost_event():
            selector = f"involvedObject.name={name},reason=NodeLost"
            events = cluster.core.list_namespaced_event(tenant.ns, field_selector=selector).items
            return events[0] if events else None

        event = cluster.wait(node_lost_event, timeout=60, interval=2, what="the NodeLost Event")
        assert victim in event.message and first[1].metadata.name in event.message, event.message
        assert "(0 of 1 restarts used, 1 left)" in event.message, event.message

        report = build_report(live.snapshot(live.connect(cluster.kubeconfig)))
        row = next(r for r in report.nodes if r["node"] == victim)
        assert row["lost"] and row["allocated"] == 0 and row["free"] == 0
        queue = next(q for q in report.queues if q["queue"] == tenant.spec.queue.name)
        assert queue["allocated"] == 8, "the gang's pod on the lost node holds nothing; the one left holds 8"

        def restarted():
            jobset = cluster.get_object("jobset.x-k8s.io", "v1alpha2", "jobsets", name, tenant.ns) or {}
            pods = [p for p in gang_pods(cluster, tenant.ns, name)
                    if p.metadata.deletion_timestamp is None and p.status.phase == "Running"]
            fresh = [p for p in pods if p.metadata.uid not in {f.metadata.uid for f in first}]
            return (jobset, fresh) if (jobset.get("status") or {}).get("restarts") == 1 and len(fresh) == 2 else None

        jobset, again = cluster.wait(restarted, timeout=TOLERATION_S + 240, interval=2,
                                     what="the failure policy restarting the gang")
        released = cluster.core.list_namespaced_event(
            tenant.ns, field_selector=f"involvedObject.name={name},reason=NodeLostPodsDeleted").items
        assert released and first[1].metadata.name in released[0].message, "the evicted pod deleted for good"
        restarted_after = time.time() - lost_at
        assert victim not in {p.spec.node_name for p in again}, "the lost node's GPUs are not offered"
        trainjob = cluster.get_object("trainer.kubeflow.org", "v1alpha1", "trainjobs", name, tenant.ns)
        assert not any(c["type"] == "Failed" and c["status"] == "True"
                       for c in (trainjob.get("status") or {}).get("conditions") or []), trainjob.get("status")
        print(f"\n{victim} lost; gang restarted on {[p.spec.node_name for p in again]} {restarted_after:.0f} s after "
              f"NotReady (toleration {TOLERATION_S} s)")
    finally:
        up = trainyard("cluster", "node-up", victim, "--name", cluster.name)
        assert up.returncode == 0, up.stdout + up.stderr
    cluster.wait(lambda: node_ready(cluster, victim) == "True", timeout=90, interval=2, what=f"{victim} Ready again")
    cluster.wait(lambda: not [p for p in gang_pods(cluster, tenant.ns, name) if p.spec.node_name == victim],
                 timeout=90, interval=2, what="the evicted pod gone once its node is back")
