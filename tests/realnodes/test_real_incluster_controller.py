"""The dev/prod in-cluster controller on real pods: the controller image built locally (the project installed
from its wheel, as controller/Dockerfile builds it), the objects the platform program registers in-cluster
(RBAC, Services, PodDisruptionBudget, a 2-replica Deployment with probes and leader election, the webhook
registered by Service), on the real nodes. The pods reach the API server through the `kubernetes` Service and
the API server reaches their webhook through its Service (ClusterIPs translated by kube-proxy).

It replaces the cluster's local controller process, so conftest runs it after the other real-node tests and
before the teardown.
"""

from __future__ import annotations

import copy
import json
import re
import time

import pytest
import yaml

from trainyard.cluster import certs, local
from trainyard.cluster.processes import ProcessTable
from trainyard.cluster.trainer_controllers import PROCESS as LOCAL_CONTROLLER
from trainyard.controller.runtime.leader import LeaderElector
from trainyard.platform import controller_objects as ctl
from trainyard.platform.stack_config import ControllerSpec, WebhookSpec
from trainyard.paths import repo_root
from trainyard.cluster.real_node_spec import REAL_NODE_LABEL, real_node_name
from realcluster import NAME, REAL_NODES, trainyard
from waiting import wait_for

pytestmark = pytest.mark.integration

ALICE = ("alice", "team-a-users")
NAMESPACE = ControllerSpec().namespace
EXAMPLE = repo_root() / "examples" / "torch-distributed-team-a.yaml"


def on_real_nodes(deployment: dict) -> dict:
    """The Deployment pinned to the real nodes (their label and taint), one replica per node."""
    out = copy.deepcopy(deployment)
    pod = out["spec"]["template"]["spec"]
    pod["nodeSelector"] = {REAL_NODE_LABEL: "true"}
    pod["tolerations"] = [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}]
    pod["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                         "whenUnsatisfiable": "DoNotSchedule",
                                         "labelSelector": {"matchLabels": out["spec"]["selector"]["matchLabels"]}}]
    return out


def serving_secret(directory, spec: ControllerSpec) -> tuple[dict, str]:
    """Secret trainyard-webhook-cert (`certificate: provided`) for the webhook Service's DNS names, and its CA."""
    service = f"{ctl.NAME}-webhook.{spec.namespace}.svc"
    ca_pem = certs.write_serving_pair(directory, common_name=service, dns_names=(service, f"{service}.cluster.local"))
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": {"name": ctl.CERT_SECRET, "namespace": spec.namespace},
              "stringData": {"tls.crt": (directory / "tls.crt").read_text(), "tls.key": (directory / "tls.key").read_text(),
                             "ca.crt": ca_pem.decode()}}
    return secret, ca_pem.decode()


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
    objects = [ctl.render_controller_namespace(spec), *ctl.render_controller_rbac(spec), secret,
               *ctl.render_controller_services(spec), *ctl.render_pod_disruption_budget(spec),
               on_real_nodes(ctl.render_controller_deployment(spec)), ctl.render_controller_webhook(spec, ca_pem)]
    # the local controller's registration (URL mode) is replaced, not merged: a webhook has a URL or a Service
    real_cluster.kubectl("delete", "validatingwebhookconfiguration", objects[-1]["metadata"]["name"], "--ignore-not-found")
    applied = real_cluster.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=incluster-test",
                                   "-f", "-", input_text=yaml.safe_dump_all(objects))
    assert applied.returncode == 0, applied.stderr
    rollout = real_cluster.kubectl("rollout", "status", "-n", NAMESPACE, f"deployment/{ctl.NAME}", "--timeout=240s",
                                   timeout=260)
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr + picture(real_cluster)

    def admission_answers() -> bool:  # the Service's endpoints and kube-proxy's rules follow the pods' readiness
        dry_run = real_cluster.kubectl("create", "--dry-run=server", "-f", "-", user=ALICE,
                                       input_text=yaml.safe_dump(small_trainjob()))
        return dry_run.returncode == 0

    assert wait_for(admission_answers, 60, "the webhook answering through its Service", 1, error=None), \
        picture(real_cluster)
    yield spec
    # The local controller stays stopped (the teardown test follows); its webhook must not refuse writes, and
    # the controller's pods are gone before the teardown test counts what real pods leave on the host.
    real_cluster.kubectl("delete", "validatingwebhookconfiguration", objects[-1]["metadata"]["name"], "--ignore-not-found")
    real_cluster.kubectl("delete", "deployment", ctl.NAME, "-n", NAMESPACE, "--ignore-not-found", "--wait=true")
    wait_for(lambda: not real_cluster.items("pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={ctl.NAME}"), 120,
             "the controller's pods gone")


def picture(cluster) -> str:
    """Pods, events and the controller's log lines, for a failed rollout."""
    pods = cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide").stdout
    events = cluster.kubectl("get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp").stdout[-3000:]
    log = cluster.kubectl("logs", "-n", NAMESPACE, f"deployment/{ctl.NAME}", "--tail=40").stdout
    return f"\n{pods}\n{events}\n{log}"


def controller_pods(cluster) -> list[dict]:
    return [p for p in cluster.items("pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={ctl.NAME}")
            if not p["metadata"].get("deletionTimestamp")]


def ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def leader(cluster) -> str:
    """The pod whose identity holds the controller's Lease (identity = hostname-suffix, hostname = pod name)."""
    lease = cluster.get("lease", ctl.NAME, NAMESPACE) or {}
    holder = (lease.get("spec") or {}).get("holderIdentity", "")
    return holder.rsplit("-", 1)[0]


def submit(cluster, document: dict) -> str:
    created = cluster.kubectl("create", "-f", "-", "-o", "name", user=ALICE, input_text=yaml.safe_dump(document))
    assert created.returncode == 0, created.stderr
    return created.stdout.strip().split("/")[-1]


def small_trainjob() -> dict:
    """The tenant example on one simulated node with one GPU: it fits beside whatever earlier tests left."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"]["trainer"] = {"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                                                       "limits": {"nvidia.com/gpu": "1"}}}
    return document


def completes(cluster, name: str) -> dict:
    def condition():
        job = cluster.get("trainjobs.trainer.kubeflow.org", name, "team-a") or {}
        return next((c for c in (job.get("status") or {}).get("conditions", [])
                     if c["type"] in ("Complete", "Failed") and c["status"] == "True"), None)

    found = wait_for(condition, 120, f"TrainJob {name} finished", 1, error=None)
    assert found, job_picture(cluster, name)
    return found


def job_picture(cluster, name: str) -> str:
    """Where a TrainJob stands: its conditions, its JobSet, PodGroup and pods, its queue."""
    job = cluster.get("trainjobs.trainer.kubeflow.org", name, "team-a") or {}
    groups = [(g["metadata"]["name"], g.get("status")) for g in cluster.items("podgroups.scheduling.volcano.sh", "-n", "team-a")
              if g["metadata"]["name"].startswith(name)]
    pods = cluster.kubectl("get", "pods", "-n", "team-a", "-o", "wide").stdout
    queue = (cluster.get("queues.scheduling.volcano.sh", "team-a") or {}).get("status")
    return (f"\nTrainJob {name}: {(job.get('status') or {}).get('conditions')}\nJobSet: "
            f"{bool(cluster.get('jobsets.jobset.x-k8s.io', name, 'team-a'))}\nPodGroups: {groups}\nqueue: {queue}\n{pods}"
            f"{picture(cluster)}")


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
