"""The README's main job as plain functions: deploy the local stack onto a running local cluster and
tell the user what to do next. `trainyard up` (and so `make up`) is cluster start + `deploy`."""

from __future__ import annotations

from typing import Callable

from trainyard import stack_deploy
from trainyard.cluster import local
from trainyard.k8s import QUEUES, VOLCANO_GROUP, resource_name
from trainyard.paths import repo_root
from trainyard.stack_deploy import StackError

EXAMPLE_TRAINJOB = "examples/torch-distributed-team-a.yaml"
__all__ = ["EXAMPLE_TRAINJOB", "StackError", "closing_hint", "deploy"]


def deploy(cluster: str, stack: str = stack_deploy.LOCAL_STACK, echo: Callable[[str], None] = print) -> None:
    """`pulumi up` (+ refresh) of `stack` bound to the local cluster `cluster`."""
    echo(f"deploying the platform: pulumi up of stack {stack!r} onto cluster {cluster!r}")
    stack_deploy.up(stack, cluster=cluster)


def closing_hint(cluster: str, stack: str = stack_deploy.LOCAL_STACK) -> str:
    """What `trainyard up` prints last: where the cluster is and a first TrainJob that exists in the repo."""
    state = local.read_state(cluster) or {}
    name_flag = "" if cluster == stack_deploy.DEFAULT_CLUSTER else f" --name {cluster}"
    example = repo_root() / EXAMPLE_TRAINJOB
    steps = [
        (f"export KUBECONFIG={state.get('kubeconfig')}", ""),
        (f"kubectl get {resource_name(QUEUES, VOLCANO_GROUP)}", "tenant queues (Open)"),
        ("kubectl get trainingruntimes -n team-a", "the runtimes team-a's catalog release pins"),
        ("kubectl get clustertrainingruntimes", "the current catalog release"),
        (f"kubectl create -f {example} --as alice --as-group team-a-users", "a first TrainJob, as a tenant user"),
        ("kubectl get trainjobs,jobsets,podgroups -n team-a", "the TrainJob, its JobSet and gang"),
        (f".venv/bin/trainyard usage --since 1h{name_flag}", "GPU-hours, waits and outcomes per tenant"),
        (f".venv/bin/trainyard cluster status{name_flag}", "processes and logs"),
        ("make down" if not name_flag else f".venv/bin/trainyard down{name_flag}", "stop everything"),
    ]
    width = max(len(command) for command, _ in steps if len(command) < 60)
    lines = [f"  {command.ljust(width)}  # {why}" if why else f"  {command}" for command, why in steps]
    return f"\nThe platform is up (cluster {cluster!r}, stack {stack!r}).\n" + "\n".join(lines)
