"""Failure semantics on real processes, under a JobSet failure policy: a trainer that exits 1 is restarted as
the policy says and the TrainJob ends Failed with the reason; a gang member killed for memory restarts the whole
gang (every pod recreated, not only the killed one).

The catalog's runtimes set no failure policy (as upstream's: a failed Job fails the JobSet), so the platform
team's override is a TrainingRuntime of the tenant's namespace derived from the catalog one, the documented way
to change a runtime without editing a release."""

from __future__ import annotations

import copy

import pytest
import yaml

from trainyard.paths import repo_root
from test_real_training import finished, pods_of, submit
from waiting import wait_for

pytestmark = pytest.mark.integration

RESTARTABLE = "torch-restartable"
MAX_RESTARTS = 2


@pytest.fixture(scope="module")
def restartable_runtime(real_cluster):
    """team-a's torch-distributed-volcano with failurePolicy.maxRestarts and Jobs that fail on the first pod
    failure (backoffLimit 0), so a failure restarts the gang rather than one pod."""
    runtime = copy.deepcopy(real_cluster.get("trainingruntimes.trainer.kubeflow.org", "torch-distributed-volcano",
                                             "team-a"))
    runtime["metadata"] = {"name": RESTARTABLE, "namespace": "team-a", "labels": runtime["metadata"].get("labels", {})}
    template = runtime["spec"]["template"]["spec"]
    template["failurePolicy"] = {"maxRestarts": MAX_RESTARTS}
    for job in template["replicatedJobs"]:
        job["template"]["spec"]["backoffLimit"] = 0
    created = real_cluster.kubectl("create", "-f", "-", input_text=yaml.safe_dump(runtime))
    assert created.returncode == 0, created.stderr
    yield RESTARTABLE
    real_cluster.kubectl("delete", "trainingruntime", RESTARTABLE, "-n", "team-a", "--wait=false")


def real_trainjob(runtime: str, command: list[str], memory_limit: str = "1Gi") -> dict:
    document = yaml.safe_load((repo_root() / "examples" / "real-torch-team-a.yaml").read_text())
    document["spec"]["runtimeRef"]["name"] = runtime
    trainer = document["spec"]["trainer"]
    trainer["command"] = command
    trainer["numProcPerNode"] = 1
    trainer["resourcesPerNode"] = {"requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": "1"},
                                   "limits": {"memory": memory_limit, "nvidia.com/gpu": "1"}}
    trainer["env"] = [{"name": "RESTART_ATTEMPT", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"}}}]
    return document


def jobset_of(cluster, name: str) -> dict:
    return cluster.get("jobsets.jobset.x-k8s.io", name, "team-a") or {}


def test_a_trainer_exiting_1_is_restarted_by_policy_then_the_trainjob_fails_with_the_reason(real_cluster,
                                                                                           restartable_runtime):
    name = submit(real_cluster, real_trainjob(restartable_runtime, ["sh", "-c", "echo attempt $RESTART_ATTEMPT; exit 1"]))
    condition = finished(real_cluster, name, 300)
    assert condition["type"] == "Failed", condition
    jobset = jobset_of(real_cluster, name)
    assert jobset["status"].get("restarts") == MAX_RESTARTS, jobset.get("status")
    jobset_failed = next(c for c in jobset["status"]["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == jobset_failed["reason"] and condition["message"] == jobset_failed["message"], \
        (condition, jobset_failed)
    assert "maximum" in condition["message"].lower() or "restart" in condition["message"].lower(), condition
    # Volcano keeps the group Inqueue after its pods failed, reserving team-a's GPUs: the controller deletes it
    wait_for(lambda: real_cluster.get("podgroups.scheduling.volcano.sh", name, "team-a") is None, 30,
             f"the PodGroup of the failed {name} deleted", 1)
    assert jobset_of(real_cluster, name), "the JobSet stays (its pods' logs with it)"


def test_a_gang_member_killed_for_memory_restarts_the_whole_gang(real_cluster, restartable_runtime):
    """Rank 1 allocates 512 MiB under a 128 MiB limit on the first attempt and is OOM-killed; JobSet recreates
    both pods, and the second attempt completes."""
    hog = ("import os\n"
           "if os.environ['PET_NODE_RANK'] == '1' and os.environ['RESTART_ATTEMPT'] == '0':\n"
           "    block = bytearray(512 * 2**20)\n"
           "print('done attempt', os.environ['RESTART_ATTEMPT'], flush=True)\n")
    name = submit(real_cluster, real_trainjob(restartable_runtime, ["python3", "-c", hog], memory_limit="128Mi"))
    seen: dict[str, set[str]] = {}  # pod uid -> terminated reasons seen

    def watch_until_finished():
        for pod in pods_of(real_cluster, name):
            for status in pod["status"].get("containerStatuses") or []:
                for state in (status.get("state") or {}, status.get("lastState") or {}):
                    reason = (state.get("terminated") or {}).get("reason")
                    entry = seen.setdefault(pod["metadata"]["uid"], set())
                    if reason:
                        entry.add(f"{pod['metadata']['labels'].get('jobset.sigs.k8s.io/restart-attempt')}:{reason}")
        trainjob = real_cluster.get("trainjobs.trainer.kubeflow.org", name, "team-a") or {}
        return any(c["type"] in ("Complete", "Failed") and c["status"] == "True"
                   for c in (trainjob.get("status") or {}).get("conditions", []))

    wait_for(watch_until_finished, 300, f"TrainJob {name} to finish", 0.3)
    condition = finished(real_cluster, name, 10)
    assert condition["type"] == "Complete", condition
    assert any("0:OOMKilled" in reasons for reasons in seen.values()), seen
    jobset = jobset_of(real_cluster, name)
    assert jobset["status"].get("restarts") == 1, jobset.get("status")
    final = pods_of(real_cluster, name)
    assert len(final) == 2 and all(p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1" for p in final), \
        "both ranks run again in attempt 1, the healthy one too"
