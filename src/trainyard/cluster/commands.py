"""`trainyard cluster up | down | status | kubeconfig`, and the top-level `up`/`down` behind make."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from trainyard.cluster import local
from trainyard.cluster.spec import ClusterSpec

cluster_app = typer.Typer(help="A local Kubernetes cluster of simulated GPU nodes (kwok) with JobSet and Volcano.",
                          no_args_is_help=True)
console = Console()
NAME = typer.Option("trainyard", "--name", help="Cluster name (several clusters need distinct --port-base).")


def _fail(message: str, code: int = 1) -> None:
    console.print(f"[red]error:[/] {message}")
    raise typer.Exit(code)


@cluster_app.command("up")
def up(
    name: str = NAME,
    nodes: int = typer.Option(4, help="Number of simulated GPU nodes."),
    gpus_per_node: int = typer.Option(8, help="nvidia.com/gpu capacity of each node."),
    gpu_product: str = typer.Option("NVIDIA-H100-80GB-HBM3", help="Value of the nvidia.com/gpu.product label."),
    racks: int = typer.Option(2, help="Racks the nodes are spread over (topology labels for HyperNodes)."),
    port_base: int = typer.Option(26400, help="First of the loopback ports the cluster listens on."),
    provider: str = typer.Option("kwok", help="kwok (default, no container engine needed) or kind."),
    feature_gates: str = typer.Option(ClusterSpec.feature_gates, help="The TrainJob controller's feature gates."),
) -> None:
    """Start the cluster; on a running cluster say so and change nothing."""
    try:
        spec = ClusterSpec(name=name, nodes=nodes, gpus_per_node=gpus_per_node, gpu_product=gpu_product,
                           racks=racks, port_base=port_base, feature_gates=feature_gates)
    except ValueError as exc:
        _fail(str(exc), 2)
    try:
        if provider == "kwok":
            local.up(spec, echo=console.print)
        elif provider == "kind":
            from trainyard.cluster import kind

            kind.up(spec, echo=console.print)
        else:
            _fail(f"--provider {provider!r}: use kwok or kind", 2)
    except local.ClusterError as exc:
        _fail(str(exc))
    _print_status(name)


@cluster_app.command("down")
def down(name: str = NAME) -> None:
    """Stop every process `up` started."""
    local.down(name, echo=console.print)


@cluster_app.command("status")
def status(name: str = NAME, as_json: bool = typer.Option(False, "--json")) -> None:
    """What is running, where its kubeconfig and logs are."""
    if as_json:
        typer.echo(json.dumps(local.status(name), indent=2))
        return
    _print_status(name)


@cluster_app.command("kubeconfig")
def kubeconfig(
    name: str = NAME,
    user: str = typer.Option(None, "--user", help="print a kubeconfig acting as this user instead of the admin"),
    group: list[str] = typer.Option([], "--group", help="a group of --user (repeatable), e.g. team-a-users"),
) -> None:
    """Print the path of the cluster's own kubeconfig (never ~/.kube/config), or with --user of one acting
    as that user (client certificate from the cluster CA) to try a tenant's rights or the Kubeflow SDK."""
    state = local.read_state(name)
    if not state:
        _fail(f"cluster {name!r} does not exist; start it with `trainyard cluster up --name {name}`")
    if group and not user:
        _fail("--group needs --user (the user the groups belong to)")
    if user:
        typer.echo(str(local.user_kubeconfig(name, user, tuple(group))))
        return
    typer.echo(state["kubeconfig"])


def _print_status(name: str) -> None:
    info = local.status(name)
    if not info.get("running"):
        console.print(f"cluster {name!r} is not running")
        return
    table = Table("process", "state", title=f"cluster {name} at {info['apiserver']}")
    for proc, state in sorted(info["processes"].items()):
        table.add_row(proc, state)
    console.print(table)
    console.print(f"kubeconfig: {info['kubeconfig']}\nlogs:       {info['logs']}")
    console.print(f"try:        export KUBECONFIG={info['kubeconfig']}; kubectl get nodes -L nvidia.com/gpu.product")


def register_top_level(app: typer.Typer) -> None:
    """`trainyard up` / `trainyard down`: what `make up` / `make down` run."""

    @app.command("up")
    def platform_up(name: str = NAME, stack: str = typer.Option("local", help="Stack deployed on the cluster.")) -> None:
        """Start the local GPU cluster with its controllers, then `pulumi up` the local stack on it."""
        up(name=name, nodes=4, gpus_per_node=8, gpu_product="NVIDIA-H100-80GB-HBM3", racks=2, port_base=26400,
           provider="kwok")
        from trainyard.platform_commands import up as stack_up

        console.print(f"deploying the platform: pulumi up of stack {stack!r}")
        stack_up(stack=stack, extra=None)
        state = local.read_state(name) or {}
        console.print(
            "\n[bold]The platform is up.[/]\n"
            f"  export KUBECONFIG={state.get('kubeconfig')}\n"
            "  kubectl get queues.scheduling.volcano.sh            # tenant queues (Open)\n"
            "  kubectl get trainingruntimes -n team-a              # the runtimes team-a's catalog release pins\n"
            "  kubectl get clustertrainingruntimes                 # the current catalog release\n"
            "  kubectl create -n team-a -f my-trainjob.yaml --as alice --as-group team-a-users\n"
            "  .venv/bin/trainyard cluster status                  # processes and logs\n"
            "  make down                                           # stop everything"
        )

    @app.command("down")
    def platform_down(name: str = NAME, stack: str = typer.Option("local", help="Stack deployed on the cluster.")) -> None:
        """Stop everything `trainyard up` started and forget the stack's state (its cluster is gone)."""
        down(name=name)
        from trainyard.platform_commands import forget_stack

        forget_stack(stack)
