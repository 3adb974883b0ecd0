"""Checkpoint-aware reclaim on real nodes: a real torch TrainJob of team-a that checkpoints with the training image's
`trainyard_checkpoint` is reclaimed mid-training for team-b's gang, saves when asked, is resumed once the gang has
run, continues from its checkpoint and ends with the loss of an uninterrupted run of the same seed. A job that
reports no checkpoint and ignores SIGTERM is suspended at once, killed at the end of its termination grace period,
restarts from scratch, and the work it lost is counted.

Reclaim runs here as the controller runs it (`capacity.reclaimer.Reclaimer`, rule `deserved`), on Volcano's
`capacity` queue plugin with team-b owed 16 GPUs and team-a 8: the local stack's `proportion` plugin and queues are
put back afterwards."""

from __future__ import annotations

import re
import subprocess
import threading
import time

import pytest
import yaml

from trainyard import k8s as K
from trainyard.capacity import live
from trainyard.capacity.reclaimer import Reclaimer
from trainyard.cluster import local
from trainyard.queues.scheduler_config import SchedulerSettings, scheduler_configmap
from trainyard.toolchain.versions import binary
from test_real_training import logs
from waiting import wait_for

pytestmark = pytest.mark.integration

STEPS, EVERY = 40, 10
TRAINING_ENV = {"TRAIN_STEPS": str(STEPS), "STEP_SECONDS": "0.5", "CHECKPOINT_EVERY": str(EVERY), "SEED": "3",
                "TRAINYARD_CHECKPOINT_DIR": "/checkpoints"}
LOSS_TOLERANCE = 1e-6
"""Every step's data and update are fixed by the seed and the all-reduce of two ranks is exact: a resumed run's
final loss equals the uninterrupted one's to the printed precision."""


def real_node_overrides(extra: dict | None = None) -> list[dict]:
    spec = {"nodeSelector": {"trainyard.dev/real-node": "true"},
            "tolerations": [{"key": "trainyard.dev/real-node", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "kubernetes.io/hostname",
                "labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/replicatedjob-name": "node"}},
                "matchLabelKeys": ["jobset.sigs.k8s.io/jobset-name"]}]}}}
    return [{"targetJobs": [{"name": "node"}], "spec": {**spec, **(extra or {})}}]


def trainjob(namespace: str, name: str, command: list[str], gpus: int, env: dict[str, str] | None = None,
             claim: str | None = None) -> dict:
    extra = None
    if claim:
        extra = {"volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": claim}}],
                 "containers": [{"name": "node", "volumeMounts": [{"name": "checkpoints", "mountPath": "/checkpoints"}]}]}
    return {"apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"name": "torch-distributed-volcano", "kind": "TrainingRuntime"},
                     "trainer": {"image": "trainyard.local/training:local", "command": command, "numNodes": 2,
                                 "numProcPerNode": 1,
                                 "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                                 "resourcesPerNode": {"requests": {"cpu": "200m", "memory": "512Mi", K.GPU_RESOURCE: str(gpus)},
                                                      "limits": {"memory": "3Gi", K.GPU_RESOURCE: str(gpus)}}},
                     "podTemplateOverrides": real_node_overrides(extra)}}


USERS = {"team-a": ("alice", "team-a-users"), "team-b": ("bob", "team-b-users")}


def create(cluster, document: dict) -> str:
    """Create a TrainJob as a user of its tenant (every admission layer a data scientist's request passes)."""
    namespace = document["metadata"]["namespace"]
    created = cluster.kubectl("create", "-f", "-", "-o", "name", user=USERS[namespace],
                              input_text=yaml.safe_dump(document))
    assert created.returncode == 0, created.stderr
    return created.stdout.strip().split("/")[-1]


def finished(cluster, name: str, namespace: str, timeout: float) -> dict:
    """The TrainJob's terminal condition (Complete or Failed); on timeout, its conditions, pods and events."""
    def terminal():
        trainjob = cluster.get("trainjobs.trainer.kubeflow.org", name, namespace) or {}
        return next((c for c in (trainjob.get("status") or {}).get("conditions", [])
                     if c["type"] in ("Complete", "Failed") and c["status"] == "True"), None)

    condition = wait_for(terminal, timeout, f"TrainJob {namespace}/{name} to finish", 2, error=None)
    assert condition, f"{namespace}/{name} did not finish in {timeout:.0f} s:\n{where_it_stands(cluster, name, namespace)}"
    return condition


def where_it_stands(cluster, name: str, namespace: str) -> str:
    trainjob = cluster.get("trainjobs.trainer.kubeflow.org", name, namespace) or {}
    lines = [f"trainjob {namespace}/{name}: {(trainjob.get('status') or {}).get('conditions')}"]
    lines += [f"pod {p['metadata']['name']} on {p['spec'].get('nodeName')}: {(p.get('status') or {}).get('phase')}"
              for p in pods_of_ns(cluster, name, namespace)]
    events = sorted(cluster.items("events", "-n", namespace), key=lambda e: e.get("lastTimestamp") or "")[-20:]
    lines += [f"event {e['involvedObject'].get('name')} {e.get('reason')}: {e.get('message')}" for e in events]
    return "\n".join(lines)


def simulated_filler(name: str) -> dict:
    """A team-a TrainJob holding 8 GPUs of a simulated node for an hour (kwok ends its pod after the delay)."""
    filler = trainjob("team-a", name, ["sleep", "3600"], 8)
    filler["spec"]["trainer"]["numNodes"] = 1
    filler["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "metadata": {
        "annotations": {K.KWOK_POD_COMPLETE_DELAY_ANNOTATION: "3600s"}}}]
    return filler


def claim(cluster, namespace: str, name: str) -> str:
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    created = cluster.kubectl("create", "-f", "-", input_text=yaml.safe_dump(pvc))
    assert created.returncode == 0, created.stderr
    return name


class LogFollower:
    """`kubectl logs -f` of a pod into memory: a reclaimed pod's log goes with the pod."""

    def __init__(self, cluster, pod: str, namespace: str):
        self.process = subprocess.Popen([str(binary("kubectl")), "--kubeconfig", str(cluster.kubeconfig), "logs", "-f",
                                         "-n", namespace, pod], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.thread = threading.Thread(target=lambda: self.lines.extend(self.process.stdout or []), daemon=True)
        self.thread.start()

    def text(self) -> str:
        self.process.terminate()
        self.thread.join(10)
        return "".join(self.lines)


def final_loss(text: str) -> float:
    found = re.findall(r"final loss (\S+)", text)
    assert found, text[-3000:]
    return float(found[-1])


def pods_of_ns(cluster, name: str, namespace: str) -> list[dict]:
    return cluster.items("pods", "-n", namespace, "-l", f"jobset.sigs.k8s.io/jobset-name={name}")


@pytest.fixture
def capacity_queues(real_cluster):
    """Volcano's `capacity` plugin, team-b owed 16 GPUs and team-a 8 (restored afterwards)."""
    api = live.connect(str(real_cluster.kubeconfig))
    queues = {name: api.get(live.QUEUES, name) for name in ("team-a", "team-b")}
    configmaps = live.list_items(api, live.CONFIGMAPS, "volcano-system")
    wanted = scheduler_configmap(SchedulerSettings(profile="gang", queue_plugin="capacity"))
    before = next(c for c in configmaps if c["metadata"]["name"] == wanted["metadata"]["name"])
    conf = local.ClusterPaths.for_name(real_cluster.name).scheduler_conf
    for name, gpus in (("team-a", 8), ("team-b", 16)):
        api.merge_patch(live.QUEUES, name, {"spec": {"deserved": {K.GPU_RESOURCE: str(gpus)}}})
    api.merge_patch(live.CONFIGMAPS, before["metadata"]["name"], {"data": wanted["data"]}, "volcano-system")
    key = next(iter(wanted["data"]))
    wait_for(lambda: conf.exists() and conf.read_text() == wanted["data"][key], 60, "the capacity scheduler conf", 0.5)
    time.sleep(2.0)
    yield api
    api.merge_patch(live.CONFIGMAPS, before["metadata"]["name"], {"data": before["data"]}, "volcano-system")
    for name, queue in queues.items():
        api.merge_patch(live.QUEUES, name, {"spec": {"deserved": (queue["spec"].get("deserved") or None)}})
    wait_for(lambda: conf.read_text() == before["data"][key], 60, "the stack's scheduler conf back", 0.5)


def test_a_checkpointing_job_reclaimed_for_a_gang_resumes_from_its_checkpoint_with_the_same_loss(real_cluster,
                                                                                                capacity_queues):
    api = capacity_queues
    command = ["torchrun", "/opt/trainyard/scripts/torch_checkpointed_sgd.py"]
    reference = create(real_cluster, trainjob("team-a", "ckpt-reference", command, 4, TRAINING_ENV,
                                              claim(real_cluster, "team-a", "ckpt-reference")))
    assert finished(real_cluster, reference, "team-a", 400)["type"] == "Complete"
    expected = final_loss(logs(real_cluster, rank0_pod_name(real_cluster, reference, "team-a")))
    real_cluster.kubectl("delete", "trainjob", reference, "-n", "team-a", "--wait=true")

    # team-a holds 8 GPUs of a simulated node besides the victim's 8 on the real nodes: 8 above what it is owed
    create(real_cluster, simulated_filler("ckpt-filler"))
    victim = create(real_cluster, trainjob("team-a", "ckpt-victim", command, 4, TRAINING_ENV,
                                           claim(real_cluster, "team-a", "ckpt-victim")))
    reclaimer = Reclaimer(api, after_s=2.0, period=1.0, rule="deserved", holds=False)
    follower = None
    try:
        pod = wait_for(lambda: running_rank0(real_cluster, victim, "team-a"), 300, "the victim's rank 0 running", 1)
        follower = LogFollower(real_cluster, pod, "team-a")
        wait_for(lambda: "checkpoint saved at step 9" in "".join(follower.lines), 180, "the victim's first checkpoint", 1)
        reclaimer.start()
        gang = create(real_cluster, trainjob("team-b", "ckpt-gang", ["sh", "-c", "echo gang ran; sleep 5"], 8))
        assert finished(real_cluster, gang, "team-b", 300)["type"] == "Complete"
        assert finished(real_cluster, victim, "team-a", 400)["type"] == "Complete"
        second_run = logs(real_cluster, rank0_pod_name(real_cluster, victim, "team-a"))
    finally:
        history = reclaimer.finish()
        first_run = follower.text() if follower else ""
        real_cluster.kubectl("delete", "trainjob", "ckpt-filler", "ckpt-victim", "-n", "team-a", "--wait=false")
        real_cluster.kubectl("delete", "trainjob", "ckpt-gang", "-n", "team-b", "--wait=false")
    assert [(e.gang, e.victims) for _, e in history] == [(("team-b", "ckpt-gang"), (("team-a", "ckpt-victim"),))], history
    assert "final loss" not in first_run, "the first run was stopped before its end"
    stopped_at = max(int(step) for step in re.findall(r"step (\d+) loss", first_run))
    resumed = re.findall(r"resuming from the checkpoint of step (\d+)", second_run)
    assert resumed, second_run[-3000:]
    assert 0 <= stopped_at - int(resumed[0]) <= EVERY, (stopped_at, resumed)
    assert abs(final_loss(second_run) - expected) <= LOSS_TOLERANCE, (final_loss(second_run), expected)
    events = [e["message"] for e in live.list_items(api, live.EVENTS, "team-a")
              if e.get("reason") == "Reclaimed" and e["involvedObject"]["name"] == victim]
    assert len(events) == 1 and "gang team-b/ckpt-gang" in events[0], events
    assert "after it saved the checkpoint it was asked for" in events[0], events
    real_cluster.kubectl("delete", "pvc", "ckpt-reference", "ckpt-victim", "-n", "team-a", "--wait=false")


def test_a_job_that_reports_no_checkpoint_and_ignores_sigterm_restarts_from_scratch_and_its_loss_is_counted(
        real_cluster, capacity_queues):
    """Suspended at once (no checkpoint to wait for), its pods killed when their 10 s termination grace period
    ends, the gang starts after that; the job resumes from its start, and the reclaim counts the GPU-seconds lost."""
    api = capacity_queues
    ticking = ["sh", "-c", "trap '' TERM; echo run started; i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done"]
    stubborn = trainjob("team-a", "stubborn", ticking, 4)
    stubborn["spec"]["podTemplateOverrides"][0]["spec"]["terminationGracePeriodSeconds"] = 10
    create(real_cluster, simulated_filler("stubborn-filler"))
    victim = create(real_cluster, stubborn)
    reclaimer = Reclaimer(api, after_s=2.0, period=1.0, rule="deserved", holds=False)
    try:
        first = wait_for(lambda: running_rank0(real_cluster, victim, "team-a"), 300, "the job running", 1)
        wait_for(lambda: "tick 5" in (logs(real_cluster, first, missing_ok=True) or ""), 60, "five ticks", 1)
        reclaimer.start()
        gang = create(real_cluster, trainjob("team-b", "stubborn-gang", ["sh", "-c", "echo gang ran; sleep 3"], 8))
        assert finished(real_cluster, gang, "team-b", 300)["type"] == "Complete"
        second = wait_for(lambda: (p := running_rank0(real_cluster, victim, "team-a")) != first and p, 300,
                          "the job running again", 1)
        wait_for(lambda: "tick 2" in (logs(real_cluster, second, missing_ok=True) or ""), 60, "the rerun ticking", 1)
    finally:
        history = reclaimer.finish()
        real_cluster.kubectl("delete", "trainjob", "stubborn", "stubborn-filler", "-n", "team-a", "--wait=false")
        real_cluster.kubectl("delete", "trainjob", "stubborn-gang", "-n", "team-b", "--wait=false")
    assert [(e.gang, e.victims) for _, e in history] == [(("team-b", "stubborn-gang"), (("team-a", "stubborn"),))]
    rerun = logs(real_cluster, second, missing_ok=True) or ""
    assert rerun.startswith("run started\ntick 1\n"), rerun[:200]  # from scratch
    events = [e for e in live.list_items(api, live.EVENTS, "team-a")
              if e.get("reason") == "Reclaimed" and e["involvedObject"]["name"] == victim]
    assert len(events) == 1 and "at once" in events[0]["message"] and "resumes from its start" in events[0]["message"]
    lost = reclaimer.lost_gpu_seconds["team-a"]
    assert lost >= 8 * 5, lost  # 8 GPUs for at least the five ticks it had run
    assert f"({lost:.0f} GPU-seconds)" in events[0]["message"]
    group = api.get(live.PODGROUPS, "stubborn-gang", "team-b")
    assert group is None or (group.get("status") or {}).get("phase") in ("Completed", "Running", None)


def running_rank0(cluster, name: str, namespace: str) -> str | None:
    """The name of the TrainJob's running rank-0 pod, if any."""
    pods = [p for p in pods_of_ns(cluster, name, namespace) if p["metadata"]["name"].startswith(f"{name}-node-0-0-")
            and (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return pods[0]["metadata"]["name"] if pods else None


def rank0_pod_name(cluster, name: str, namespace: str) -> str:
    """The TrainJob's newest rank-0 pod."""
    pods = sorted((p for p in pods_of_ns(cluster, name, namespace) if p["metadata"]["name"].startswith(f"{name}-node-0-0-")),
                  key=lambda p: p["metadata"]["creationTimestamp"])
    assert pods, f"no rank-0 pod of {name}"
    return pods[-1]["metadata"]["name"]
