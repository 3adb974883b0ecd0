"""Every runtime of the current catalog release runs a real, tiny job to completion on the real nodes, or says
here (and in the README) why it cannot on this machine.

The runtimes are the release's own, rendered for team-a with the documented local override
(`trainyard catalog show <release> --image all=trainyard.local/training:local --real-nodes --name-suffix -real`),
so the release stays as it is; the TrainJobs are submitted by alice, a team-a user. The logs are read back:
the collective's result and, where there is training, the loss going down."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from typing import Callable

import pytest
import yaml

from realcluster import REAL_NODES, trainyard
from test_real_training import ALICE, logs, pods_of, terminal
from waiting import wait_for

pytestmark = pytest.mark.integration

LOCAL_IMAGE = "trainyard.local/training:local"
SUFFIX = "-real"
SCRIPTS = "/opt/trainyard/scripts"
TORCHRUN = ["torchrun", f"{SCRIPTS}/torch_allreduce_sgd.py"]
MPIRUN = ["sh", "-c",
          # rank 0 runs on mpirun's own host when the launcher is in the hostfile (runLauncherAsNode), else on
          # the hostfile's first host: that is where the gloo group's master listens
          'H="$OMPI_MCA_orte_default_hostfile"; MASTER_ADDR="$(grep "^$(hostname)[. ]" "$H" | cut -d" " -f1)"; '
          'export MASTER_ADDR="${MASTER_ADDR:-$(head -n1 "$H" | cut -d" " -f1)}"; '
          f'exec mpirun -n {REAL_NODES} -x PATH -x MASTER_ADDR python3 {SCRIPTS}/mpi_torch_allreduce.py']
HYDRA = ["sh", "-c",
         # MPICH's Hydra reads the runtime's rewritten hostfile (`host:slots` lines, HYDRA_HOST_FILE), launches over
         # ssh and passes the whole environment; rank 0 is the hostfile's first host. MPICH 4 reads the extra ssh
         # arguments from HYDRA_LAUNCHER_EXTRA_ARGS: the runtime's (and mpi-operator's) HYDRA_LAUNCH_EXTRA_ARGS is
         # the pre-4 name, which it ignores. The proxies connect back to the launcher by the name `-localhost`
         # gives (its short hostname does not resolve in other pods; its FQDN under the JobSet's Service does).
         'export MASTER_ADDR="$(head -n1 "$HYDRA_HOST_FILE" | cut -d: -f1)"; '
         'export HYDRA_LAUNCHER_EXTRA_ARGS="$HYDRA_LAUNCH_EXTRA_ARGS"; '
         f'exec mpiexec.hydra -localhost "$(hostname -f)" -n {REAL_NODES} python3 {SCRIPTS}/mpi_torch_allreduce.py']


def current_release() -> dict:
    out = trainyard("catalog", "list", "--json")
    assert out.returncode == 0, out.stderr
    return next(r for r in json.loads(out.stdout) if r["status"] == "current")


def check_torch(texts: dict[str, str], procs: int) -> None:
    world = REAL_NODES * procs
    for pod, text in texts.items():
        assert re.findall(r"^allreduce ok world_size=(\d+)$", text, re.M) == [str(world)], (pod, text[-1500:])
        losses = [float(x) for x in re.findall(r"^step \d+ loss ([\d.]+)$", text, re.M)]
        assert losses and losses[-1] < losses[0] / 10, (pod, losses)


def check_mpi(texts: dict[str, str], _: int) -> None:
    ((launcher_pod, launcher),) = [(pod, text) for pod, text in texts.items() if "-launcher-" in pod]
    job = launcher_pod.split("-launcher-")[0]
    # not anchored to lines: Hydra forwards the ranks' output in chunks, and two ranks' lines can arrive glued
    lines = re.findall(r"mpi allreduce ok world_size=(\d+) rank=(\d+) host=(\S+?-(?:node|launcher)-\d+-\d+)", launcher)
    assert sorted(rank for _, rank, _ in lines) == [str(r) for r in range(REAL_NODES)], launcher[-1500:]
    assert {world for world, _, _ in lines} == {str(REAL_NODES)}
    hosts = {host for _, _, host in lines}
    assert len(hosts) == REAL_NODES, "one rank in each pod of the hostfile, over SSH"
    assert all(re.fullmatch(rf"{re.escape(job)}-(node|launcher)-0-\d+", h) for h in hosts), (job, hosts)


def check_jax(texts: dict[str, str], _: int) -> None:
    for pod, text in texts.items():
        assert f"jax ok processes={REAL_NODES} sum={REAL_NODES * (REAL_NODES + 1) // 2}" in text, (pod, text[-1500:])


def check_xgboost(texts: dict[str, str], _: int) -> None:
    for pod, text in texts.items():
        assert f"xgboost ok workers={REAL_NODES}" in text, (pod, text[-1500:])
        first, final = map(float, re.search(r"first rmse ([\d.]+) final rmse ([\d.]+)", text).groups())
        assert final < first / 3, (pod, first, final)


@dataclass(frozen=True)
class Case:
    trainer: dict
    check: Callable[[dict[str, str], int], None]
    procs: int = 1
    num_nodes: int = REAL_NODES
    spread: tuple[str, ...] = ("node",)  # replicated jobs whose pods go one per real node
    resources: dict = field(default_factory=lambda: {"requests": {"cpu": "250m", "memory": "512Mi"},
                                                      "limits": {"memory": "3Gi"}})


TORCH = Case({"command": TORCHRUN, "numProcPerNode": 2}, check_torch, procs=2)
# openmpi-distributed: numNodes workers and a launcher that runs no rank (runLauncherAsNode false), one worker per
# real node; deepspeed-distributed: the launcher is one of the numNodes, so a launcher and a worker, apart.
MPI = Case({"command": MPIRUN}, check_mpi, resources={})
MPI_LAUNCHER_AS_NODE = Case({"command": MPIRUN}, check_mpi, resources={}, spread=("node", "launcher"))
MPICH = Case({"command": HYDRA}, check_mpi, resources={})
INTEL_ON_HYDRA = ["sh", "-c",
                  # the stand-in: MPICH's Hydra (Intel MPI's launcher descends from it) driven by the Intel runtime's
                  # own settings: its rewritten hostfile, bootstrap and extra ssh arguments
                  'export MASTER_ADDR="$(head -n1 "$I_MPI_HYDRA_HOST_FILE" | cut -d: -f1)"; '
                  'export HYDRA_LAUNCHER_EXTRA_ARGS="$I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"; '
                  'exec mpiexec.hydra -f "$I_MPI_HYDRA_HOST_FILE" -launcher "$I_MPI_HYDRA_BOOTSTRAP" '
                  f'-localhost "$(hostname -f)" -n {REAL_NODES} python3 {SCRIPTS}/mpi_torch_allreduce.py']
INTEL_MPI = Case({"command": INTEL_ON_HYDRA}, check_mpi, resources={})
RUNNABLE: dict[str, Case] = {
    "torch-distributed": TORCH,
    "torch-distributed-cpu": TORCH,
    "torch-distributed-gpu": TORCH,
    "torch-distributed-topology": TORCH,
    "torch-distributed-volcano": TORCH,
    "openmpi-distributed": MPI,
    "mpich-distributed": MPICH,
    "intel-mpi-distributed": INTEL_MPI,  # Intel MPI itself is proprietary: its launcher settings on MPICH's Hydra
    "deepspeed-distributed": MPI_LAUNCHER_AS_NODE,
    "jax-distributed": Case({"command": ["python3", f"{SCRIPTS}/jax_allreduce.py"]}, check_jax),
    "xgboost-distributed": Case({"command": ["python3", f"{SCRIPTS}/xgboost_train.py"]}, check_xgboost),
}
NOT_HERE: dict[str, str] = {}
"""Runtimes that cannot run here, with the reason the README repeats (none now). Stand-ins: DeepSpeed runs its
launcher (mpirun over the controller's SSH keys and hostfile) with torch on the training image (the deepspeed
package is not in it); Intel MPI (proprietary) runs its runtime's Hydra settings on MPICH's Hydra."""


def test_every_runtime_of_the_current_release_is_run_or_has_a_reason():
    """The torchtune runtimes run in test_real_torchtune.py (their names cannot take the suffix)."""
    release = current_release()
    torchtune = {name for name in release["runtimes"] if name.startswith("torchtune-")}
    assert set(RUNNABLE) | set(NOT_HERE) | torchtune == set(release["runtimes"]), "a new runtime needs a case here"
    assert not set(RUNNABLE) & set(NOT_HERE)


@pytest.fixture(scope="module")
def local_runtimes(real_cluster):
    """The current release's runtimes for team-a, with the local image and pinned to the real nodes."""
    version = current_release()["version"]
    shown = trainyard("catalog", "show", version, "--tenant-queue", "team-a", "--namespace", "team-a",
                      "--priority-class", "team-a-default", "--image", f"all={LOCAL_IMAGE}", "--real-nodes",
                      "--name-suffix", SUFFIX)
    assert shown.returncode == 0, shown.stderr
    runtimes = [r for r in yaml.safe_load_all(shown.stdout) if r]
    assert {r["metadata"]["name"] for r in runtimes} == {n + SUFFIX for n in current_release()["runtimes"]
                                                          if not n.startswith("torchtune-")}
    applied = real_cluster.kubectl("apply", "--server-side", "-f", "-", input_text=shown.stdout)
    assert applied.returncode == 0, applied.stderr
    yield version
    real_cluster.kubectl("delete", "-f", "-", "--wait=false", input_text=shown.stdout)


def scheduling_picture(cluster, name: str, namespace: str = "team-a") -> str:
    """What a stuck TrainJob's gang and pods say (for the failure message)."""
    parts = []
    pods = [p["metadata"]["name"] for p in cluster.items("pods", "-n", namespace,
                                                       "-l", f"jobset.sigs.k8s.io/jobset-name={name}")]
    logs = [args for pod in pods for args in (["logs", "-n", namespace, pod, "--tail=30"],
                                              ["logs", "-n", namespace, pod, "--previous", "--tail=2000"])]
    for args in (["get", "trainjob,jobset,podgroup,pods,pvc", "-n", namespace, "-o", "wide"],
                 ["describe", "podgroup", name, "-n", namespace],
                 ["get", "hypernodes", "-o", "wide"], ["get", "nodes", "-L", "trainyard.dev/rack"],
                 ["get", "events", "-n", namespace, "--sort-by=.lastTimestamp"], *logs):
        out = cluster.kubectl(*args)
        text = out.stdout + out.stderr
        parts.append(f"$ kubectl {' '.join(args)}\n{error_lines(text)}{text[-3000:]}")
    return "\n".join(parts)


ERROR_LINE = re.compile(r"terminate called|what\(\)|Error|error:|Exception|Abort|Killed|Signal \d+|enforce fail",
                        re.IGNORECASE)


def error_lines(text: str, most: int = 25) -> str:
    """The lines of a long log that name an error, with the one after each (a rank's own cause of death is printed
    long before torchrun's summary, which is all a tail shows)."""
    lines = text.splitlines()
    picked = [i for i, line in enumerate(lines) if ERROR_LINE.search(line)][:most]
    if not picked:
        return ""
    keep = sorted({j for i in picked for j in (i, i + 1) if j < len(lines)})
    return "[error lines]\n" + "\n".join(lines[j][:300] for j in keep) + "\n[tail]\n"


FINISH_S = 480
"""A tiny job takes 10-40 s; a rank that dies rejoins after its peers' process-group timeout (90 s, see
torch_allreduce_sgd.py) and the containers' restart back-off."""


def restart_notes(cluster, pods: list[dict], namespace: str = "team-a") -> list[str]:
    """For each container that restarted on the way to completion: how often, and its previous run's error lines
    (a transient crash the job survived is still reported, not hidden by the pass)."""
    notes = []
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses", []):
            if status.get("restartCount"):
                name = pod["metadata"]["name"]
                previous = cluster.kubectl("logs", "-n", namespace, name, "-c", status["name"], "--previous")
                notes.append(f"{name}/{status['name']} restarted {status['restartCount']}x; previous run:\n"
                             + (error_lines(previous.stdout + previous.stderr) or previous.stdout[-1500:]))
    return notes


def trainjob(runtime: str, case: Case) -> dict:
    spec: dict = {"runtimeRef": {"name": runtime + SUFFIX, "kind": "TrainingRuntime"},
                  "trainer": {"numNodes": case.num_nodes, **case.trainer}}
    if case.resources:
        spec["trainer"]["resourcesPerNode"] = case.resources
    apart = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchExpressions": [{"key": "jobset.sigs.k8s.io/replicatedjob-name", "operator": "In",
                                                "values": list(case.spread)}]},
        "matchLabelKeys": ["jobset.sigs.k8s.io/jobset-name"]}]}}
    spec["podTemplateOverrides"] = [{"targetJobs": [{"name": job} for job in case.spread],
                                     "spec": {"affinity": apart}}]
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"generateName": f"{runtime[:20]}-", "namespace": "team-a"}, "spec": spec}


@pytest.mark.parametrize("runtime", sorted(RUNNABLE))
def test_runtime_runs_a_real_tiny_job(real_cluster, local_runtimes, runtime, capsys):
    case = RUNNABLE[runtime]
    created = real_cluster.kubectl("create", "-f", "-", "-o", "name", user=ALICE,
                                   input_text=json.dumps(trainjob(runtime, case)))
    assert created.returncode == 0, created.stderr
    name = created.stdout.strip().split("/")[-1]
    placed: dict[str, str] = {}  # pod -> node of the spread jobs, seen while they ran (MPI workers go at the end)

    def done() -> dict | None:
        for pod in pods_of(real_cluster, name):
            if pod["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") in case.spread:
                placed[pod["metadata"]["name"]] = pod["spec"].get("nodeName", "")
        return terminal(real_cluster, name)

    try:
        condition = wait_for(done, FINISH_S, f"TrainJob {name} to finish", 1, error=None)
        assert condition, f"TrainJob {name} did not finish in {FINISH_S} s:\n{scheduling_picture(real_cluster, name)}"
        pods = pods_of(real_cluster, name)
        with capsys.disabled():
            for line in restart_notes(real_cluster, pods):
                print(f"\n[real-nodes] {runtime}: {line}", end="")
        texts = {p["metadata"]["name"]: text for p in pods  # MPI workers may go as the launcher completes
                 if (text := logs(real_cluster, p["metadata"]["name"], missing_ok=True)) is not None}
        assert condition["type"] == "Complete", (condition, {k: v[-800:] for k, v in texts.items()})
        assert len(set(placed.values()) - {""}) == REAL_NODES, ("spread over the real nodes", placed)
        case.check(texts, case.procs)
    finally:  # gone before the next runtime's gang is scheduled, so runs do not share a node's state
        try:
            real_cluster.kubectl("delete", "trainjob", name, "-n", "team-a", "--cascade=foreground", "--timeout=110s")
        except subprocess.TimeoutExpired:
            pass  # the wait below reports it, without hiding the assertion that brought us here
        wait_for(lambda: not pods_of(real_cluster, name), 120, f"the pods of {name} gone", 1)
