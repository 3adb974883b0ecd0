"""The controller Deployment on the real nodes, shared by the in-cluster and upgrade tests: the objects the platform
program renders for it (pinned to the real nodes, its webhook certificate `provided`), applied server-side under
one field manager as Pulumi applies them, and what the tests read back (its pods, the leader, a TrainJob's state).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from trainyard.cluster import certs
from trainyard.cluster.real_node_spec import REAL_NODE_LABEL
from trainyard.paths import repo_root
from trainyard.platform import controller_objects as ctl
from trainyard.platform.stack_config import ControllerSpec
from waiting import wait_for

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


FIELD_MANAGER = "trainyard-platform"
"""One manager for every version's apply: fields a newer version no longer renders are removed, as Pulumi's
server-side apply removes them."""
RENDER = """
import json, sys
from trainyard.platform import controller_objects as ctl
from trainyard.platform.stack_config import ControllerSpec, WebhookSpec
image, replicas, ca = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
spec = ControllerSpec(image=image, replicas=replicas, webhook=WebhookSpec(certificate="provided"))
print(json.dumps([ctl.render_controller_namespace(spec), *ctl.render_controller_rbac(spec),
                  *ctl.render_controller_services(spec), *ctl.render_pod_disruption_budget(spec),
                  ctl.render_controller_deployment(spec), ctl.render_controller_webhook(spec, ca)]))
"""


def rendered_objects(image: str, replicas: int, ca_file: Path, package: Path | None = None) -> list[dict]:
    """The controller's objects as a version of the platform program renders them: the checkout's, or the one
    installed under `package` (a release's, put first on the path)."""
    env = dict(os.environ, **({"PYTHONPATH": str(package)} if package else {}))
    run = subprocess.run([sys.executable, "-c", RENDER, image, str(replicas), str(ca_file)], capture_output=True,
                         text=True, env=env, timeout=120, cwd="/")
    assert run.returncode == 0, run.stderr
    objects = json.loads(run.stdout)
    return [on_real_nodes(o) if o["kind"] == "Deployment" else o for o in objects]


def apply(cluster, objects: list[dict]) -> None:
    """Server-side apply, as the platform program's update would; the local controller's webhook registration
    (URL mode) is replaced, not merged: a webhook has a URL or a Service."""
    webhook = next(o for o in objects if o["kind"] == "ValidatingWebhookConfiguration")
    current = cluster.get("validatingwebhookconfiguration", webhook["metadata"]["name"]) or {}
    if any("url" in hook.get("clientConfig", {}) for hook in current.get("webhooks", [])):
        cluster.kubectl("delete", "validatingwebhookconfiguration", webhook["metadata"]["name"])
    applied = cluster.kubectl("apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
                              "-f", "-", input_text=yaml.safe_dump_all(objects))
    assert applied.returncode == 0, applied.stderr


def rolled_out(cluster, timeout: float = 240) -> None:
    rollout = cluster.kubectl("rollout", "status", "-n", NAMESPACE, f"deployment/{ctl.NAME}", f"--timeout={timeout:.0f}s",
                              timeout=timeout + 20)
    assert rollout.returncode == 0, rollout.stdout + rollout.stderr + picture(cluster)


def admission_answers(cluster) -> None:
    """Wait until a TrainJob passes the webhook (its Service's endpoints and kube-proxy's rules follow readiness)."""
    def answers() -> bool:
        dry_run = cluster.kubectl("create", "--dry-run=server", "-f", "-", user=ALICE,
                                  input_text=yaml.safe_dump(small_trainjob()))
        return dry_run.returncode == 0

    assert wait_for(answers, 60, "the webhook answering through its Service", 1, error=None), picture(cluster)


def remove(cluster, objects: list[dict]) -> None:
    """The webhook registration and the Deployment go (the local controller stays stopped; its webhook must not
    refuse writes), and the controller's pods are gone before the teardown counts what real pods leave."""
    webhook = next(o for o in objects if o["kind"] == "ValidatingWebhookConfiguration")
    cluster.kubectl("delete", "validatingwebhookconfiguration", webhook["metadata"]["name"], "--ignore-not-found")
    cluster.kubectl("delete", "deployment", ctl.NAME, "-n", NAMESPACE, "--ignore-not-found", "--wait=true")
    wait_for(lambda: not cluster.items("pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/name={ctl.NAME}"), 120,
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
