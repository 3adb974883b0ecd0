"""The dev/prod in-cluster controller on real pods: the controller image built locally (the project installed
from its wheel, as controller/Dockerfile builds it), the objects the platform program registers in-cluster
(RBAC, Services, PodDisruptionBudget, a 2-replica Deployment with probes and leader election, the webhook
registered by Service), on the real nodes. The pods reach the API server through the `kubernetes` Service and
the API server reaches their webhook through its Service (ClusterIPs translated by kube-proxy).

It replaces the cluster's local controller process, so conftest runs it after the other real-node tests and
before the teardown.
"""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable
from trainyard.cluster.trainer_controllers import PROCESS as LOCAL_CONTROLLER
from trainyard.controller.runtime.leader import LeaderElector
from trainyard.platform import controller_objects as ctl
from trainyard.platform.stack_config import ControllerSpec, WebhookSpec
from trainyard.cluster.real_node_spec import real_node_name
from incluster import (ALICE, EXAMPLE, NAMESPACE, admission_answers, apply, completes, controller_pods, leader, picture,
                       ready, remove, rendered_objects, serving_secret, small_trainjob, submit, rolled_out)
from realcluster import NAME, REAL_NODES, trainyard
from waiting import wait_for

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def in_cluster(real_cluster):
    loaded = trainyard("cluster", "load-image", "controller", "--name", NAME)
    assert loaded.returncode == 0, loaded.stdout[-3000:] + loaded.stderr[-2000:]
    image = re.search(r"loaded (\S+)", loaded.stdout).group(1)
    assert image.startswith("trainyard.local/controller:"), loaded.stdout

    paths = local.ClusterPaths.for_name(NAME)
    ProcessTable(paths.root).stop(LOCAL_CONTROLLER)
    spec = ControllerSpec(image=image, replicas=REAL_NODES, webhook=WebhookSpec(certificate="provided"))
    secret, ca_pem = serving_secret(paths.root / "incluster-certs", spec)
    objects = rendered_objects(image, REAL_NODES, paths.root / "incluster-certs" / "ca.crt")
    objects.insert(1, secret)  # after its Namespace
    apply(real_cluster, objects)
    rolled_out(real_cluster)
    admission_answers(real_cluster)
    yield spec
    remove(real_cluster, objects)


def test_the_controller_image_runs_as_the_deployment_on_real_nodes_with_one_leader(real_cluster, in_cluster):
    pods = controller_pods(real_cluster)
    assert len(pods) == REAL_NODES and all(ready(p) for p in pods), [p["status"] for p in pods]
    assert sorted(p["spec"]["nodeName"] for p in pods) == [real_node_name(i) for i in range(REAL_NODES)]
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {in_cluster.image}
    statuses = [s for p in pods for s in p["status"]["containerStatuses"]]
    assert all(s["restartCount"] == 0 and "running" in s["state"] for s in statuses), statuses
    assert wait_for(lambda: leader(real_cluster) in {p["metadata"]["name"] for p in pods}, 60, "a pod holds the lease")
    pod_security = real_cluster.get("namespace", NAMESPACE)["metadata"]["labels"]
    assert pod_security["pod-security.kubernetes.io/enforce"] == "restricted", "the pods pass the restricted profile"


def test_the_webhook_is_served_from_the_pods_through_its_service(real_cluster, in_cluster):
    registered = real_cluster.get("validatingwebhookconfiguration", "trainyard-trainer-validator")
    (hook,) = registered["webhooks"]
    assert hook["clientConfig"]["service"]["name"] == f"{ctl.NAME}-webhook" and hook["failurePolicy"] == "Fail"
    service = real_cluster.get("service", f"{ctl.NAME}-webhook", NAMESPACE)
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["clusterIP"] not in ("", "None")
    slices = real_cluster.items("endpointslices", "-n", NAMESPACE, "-l", f"kubernetes.io/service-name={ctl.NAME}-webhook")
    addresses = {a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]}
    assert addresses == {p["status"]["podIP"] for p in controller_pods(real_cluster)}

    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"]["runtimeRef"]["name"] = "no-such-runtime"
    refused = real_cluster.kubectl("create", "-f", "-", user=ALICE, input_text=yaml.safe_dump(document))
    assert refused.returncode != 0
    assert "admission webhook" in refused.stderr and "must be created before the TrainJob" in refused.stderr, \
        refused.stderr


def test_a_trainjob_goes_through_the_in_cluster_controller(real_cluster, in_cluster):
    name = submit(real_cluster, small_trainjob())
    assert completes(real_cluster, name)["type"] == "Complete"
    jobset = json.loads(real_cluster.kubectl("get", "jobsets.jobset.x-k8s.io", name, "-n", "team-a", "-o", "json",
                                             "--show-managed-fields").stdout)
    managers = {m["manager"] for m in jobset["metadata"]["managedFields"]}
    assert "trainer" in managers, managers
    podgroup = real_cluster.items("podgroups.scheduling.volcano.sh", "-n", "team-a")
    assert any(pg["metadata"]["name"].startswith(name) for pg in podgroup)
    logs = real_cluster.kubectl("logs", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={ctl.NAME}", "--tail=-1").stdout
    assert name in logs, "the leader's log names the TrainJob it reconciled"


def test_deleting_the_leader_pod_hands_over_to_the_other_replica(real_cluster, in_cluster):
    """The deleted leader gives the lease up as it stops (SIGTERM), so a standby takes it at its next retry, well
    before the lease would have expired. The standby usually wins; the Deployment's replacement pod may race it."""
    first = wait_for(lambda: leader(real_cluster), 60, "a leader")
    transitions = real_cluster.get("lease", ctl.NAME, NAMESPACE)["spec"].get("leaseTransitions", 0)
    deleted_at = time.monotonic()
    deleted = real_cluster.kubectl("delete", "pod", "-n", NAMESPACE, first, "--wait=false")
    assert deleted.returncode == 0, deleted.stderr

    def new_leader() -> str | None:
        holder = leader(real_cluster)
        return holder if holder and holder != first else None

    holder = wait_for(new_leader, 90, "another replica takes the lease", 0.5, error=None)
    assert holder, picture(real_cluster)
    handover = time.monotonic() - deleted_at
    assert holder in {p["metadata"]["name"] for p in controller_pods(real_cluster)}
    assert handover < LeaderElector.lease_seconds_default, \
        f"{handover:.1f} s: the lease was not released, it expired" + picture(real_cluster)
    assert real_cluster.get("lease", ctl.NAME, NAMESPACE)["spec"]["leaseTransitions"] > transitions
    print(f"\nleader {first} deleted; {holder} took the lease after {handover:.1f} s")
    name = submit(real_cluster, small_trainjob())
    assert completes(real_cluster, name)["type"] == "Complete", "the new leader reconciles"
    wait_for(lambda: len([p for p in controller_pods(real_cluster) if ready(p)]) == REAL_NODES, 180,
             "the Deployment replaces the deleted pod")
