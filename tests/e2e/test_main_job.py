"""The README's main job exactly as a user runs it: `trainyard up` through the installed console script on a
cluster of its own (own name and ports), the smoke suite against it, a tenant's first TrainJob from
examples/, `cluster up` again (idempotent; a clash on its ports refused), then `trainyard down` leaving no
process, no listener and no state behind.

Nothing is faked: `trainyard up` starts the real control plane, controllers and the Pulumi deployment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable, pid_alive, port_in_use
from trainyard.cluster.spec import ClusterSpec
from trainyard.main_job import EXAMPLE_TRAINJOB
from trainyard.paths import repo_root
from trainyard.toolchain.build import ensure_built
from trainyard.toolchain.versions import binary
from waiting import wait_for

pytestmark = pytest.mark.integration

NAME = os.environ.get("TRAINYARD_E2E_CLUSTER", "trainyard-e2e")
SPEC = ClusterSpec(name=NAME, port_base=int(os.environ.get("TRAINYARD_E2E_PORT_BASE", "27400")))
TRAINYARD = Path(sys.executable).parent / "trainyard"  # the console script `make up` runs


def trainyard(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.run([str(TRAINYARD), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=repo_root())


def all_pids() -> dict[str, int]:
    paths = local.ClusterPaths.for_name(NAME)
    pids = dict(ProcessTable(paths.root).load())
    pids.update({f"kwok-{c}": pid for c, pid in local.kwok_processes(paths, NAME).items()})
    return pids


def kubectl(*args: str, user: tuple[str, str] | None = None, input_text: str | None = None) -> subprocess.CompletedProcess:
    identity = [f"--as={user[0]}", f"--as-group={user[1]}"] if user else []
    return subprocess.run([str(binary("kubectl")), "--kubeconfig", str(local.ClusterPaths.for_name(NAME).kubeconfig),
                           *identity, *args], capture_output=True, text=True, input=input_text, timeout=120)



@pytest.fixture(scope="module")
def main_job():
    """`trainyard up` once for the module; `trainyard down` checked by the last test."""
    ensure_built("kubernetes", "etcd", "kwok", "jobset", "volcano", "pulumi", "pulumi-kubernetes",
                 "pulumi-policy-analyzer", "kubeflow-trainer")
    if local.read_state(NAME):
        trainyard("down", "--name", NAME)
    started = time.monotonic()
    result = trainyard("up", "--name", NAME, "--port-base", str(SPEC.port_base))
    elapsed = time.monotonic() - started
    pids = all_pids()
    yield {"result": result, "seconds": elapsed, "pids": pids}
    if local.read_state(NAME):  # a failed test must not leave the cluster running
        trainyard("down", "--name", NAME)


def test_trainyard_up_deploys_the_platform_and_says_what_to_do_next(main_job):
    result = main_job["result"]
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    out = result.stdout
    assert "The platform is up" in out
    kubeconfig = local.ClusterPaths.for_name(NAME).kubeconfig
    assert f"export KUBECONFIG={kubeconfig}" in out
    example = re.search(r"kubectl create -f (\S+)", out).group(1)
    assert Path(example).is_file() and example.endswith(EXAMPLE_TRAINJOB), "the hint names a file that exists"
    assert f"--name {NAME}" in out, "hints for a non-default cluster name it"
    assert {"jobset", "vc-scheduler", "vc-controller-manager", "trainjob-controller"} <= set(main_job["pids"])
    print(f"\ntrainyard up (warm toolchain): {main_job['seconds']:.0f} s")


def test_the_stack_file_in_the_checkout_is_untouched(main_job):
    status = subprocess.run(["git", "status", "--porcelain", "stacks/"], cwd=repo_root(), capture_output=True, text=True)
    assert status.stdout == "", "binding the local stack to a cluster never rewrites stacks/"


def test_smoke_suite_passes_against_the_deployed_platform(main_job):
    env = dict(os.environ, TRAINYARD_SMOKE_KUBECONFIG=str(local.ClusterPaths.for_name(NAME).kubeconfig),
               TRAINYARD_SMOKE_STACK=str(repo_root() / "stacks" / "Pulumi.local.yaml"))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/smoke"],
                         cwd=repo_root(), env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:]
    passed = int(re.search(r"(\d+) passed", run.stdout).group(1))
    assert passed >= 9 and "failed" not in run.stdout


def test_a_tenant_user_runs_the_example_trainjob_to_completion(main_job):
    created = kubectl("create", "-f", str(repo_root() / EXAMPLE_TRAINJOB), "-o", "name",
                      user=("alice", "team-a-users"))
    assert created.returncode == 0, created.stderr
    name = created.stdout.strip().split("/")[-1]

    def get(kind: str) -> dict | None:
        out = kubectl("get", kind, name, "-n", "team-a", "-o", "json")
        return json.loads(out.stdout) if out.returncode == 0 else None

    podgroup = wait_for(lambda: get("podgroups.scheduling.volcano.sh"), 60, "the PodGroup")
    assert podgroup["spec"]["queue"] == "team-a" and podgroup["spec"]["minMember"] == 2
    wait_for(lambda: get("jobsets.jobset.x-k8s.io"), 60, "the JobSet")

    def complete() -> bool:
        conditions = ((get("trainjobs.trainer.kubeflow.org") or {}).get("status") or {}).get("conditions", [])
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conditions)

    wait_for(complete, 240, "the example TrainJob to complete")


def test_cluster_up_again_changes_nothing_and_a_clash_on_its_ports_is_refused(main_job):
    """`cluster up` is idempotent, its kubeconfig stays under the cluster's own directory, and a second cluster
    asking for the same ports is refused by name before anything starts."""
    again = trainyard("cluster", "up", "--name", NAME, "--port-base", str(SPEC.port_base))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already running" in again.stdout
    assert all_pids() == main_job["pids"], "a second up changes nothing"
    path = trainyard("cluster", "kubeconfig", "--name", NAME).stdout.strip()
    assert os.path.isfile(path) and path.startswith(str(local.ClusterPaths.for_name(NAME).root))
    assert os.path.expanduser("~/.kube") not in path
    clash = trainyard("cluster", "up", "--name", "trainyard-clash", "--port-base", str(SPEC.port_base))
    assert clash.returncode != 0
    assert "--port-base" in clash.stdout + clash.stderr and "in use" in clash.stdout + clash.stderr
    assert not local.read_state("trainyard-clash"), "the refused cluster left no state"
    assert all_pids() == main_job["pids"], "the refused cluster touched nothing of the running one"


def test_the_tours_shell_lines_point_the_pinned_kubectl_at_the_cluster(main_job):
    """The README's `eval "$(.venv/bin/trainyard cluster env)"`, in a clean shell: kubectl is the pinned one and
    reads this cluster, whatever KUBECONFIG and PATH held before."""
    script = (f'eval "$({TRAINYARD} cluster env --name {NAME})" && command -v kubectl && '
              "kubectl get nodes -o name && kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}'")
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"], "KUBECONFIG": "/nonexistent"}
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert shell.returncode == 0, shell.stdout + shell.stderr
    lines = shell.stdout.splitlines()
    assert lines[0] == str(binary("kubectl"))
    assert any(line.startswith("node/") for line in lines[1:-1]), lines
    assert lines[-1].endswith(f":{SPEC.ports.port('apiserver')}"), lines[-1]


def test_trainyard_down_leaves_no_process_no_listener_and_no_state(main_job):
    pids = main_job["pids"]
    result = trainyard("down", "--name", NAME, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [name for name, pid in pids.items() if pid_alive(pid)], "every process `up` started is gone"
    assert not [port for port in SPEC.ports.all().values() if port_in_use(port)], "nothing listens any more"
    root = local.ClusterPaths.for_name(NAME).root
    assert not root.exists(), f"{root} (kubeconfig, certs, logs, the stack's Pulumi state) is removed"
    status = trainyard("cluster", "status", "--name", NAME)
    assert "not running" in status.stdout
