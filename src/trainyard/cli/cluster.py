"""`trainyard cluster up | down | status | kubeconfig`: thin Typer commands over trainyard.cluster.local.

Commands never call each other: Typer fills an omitted option with its OptionInfo object, not its
default, so shared behaviour lives in plain functions (`start`, `print_status`) every command calls.
"""

from __future__ import annotations

import json
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.table import Table

from trainyard.cluster import local
from trainyard.cluster.spec import PROVIDERS, TRAINJOB_CONTROLLERS, ClusterSpec
from trainyard.cluster.real_node_spec import REAL_NODE_LABEL

cluster_app = typer.Typer(help="A local Kubernetes cluster of simulated GPU nodes (kwok) with JobSet and Volcano.",
                          no_args_is_help=True)
console = Console()
DEFAULT = ClusterSpec()
NAME = typer.Option(DEFAULT.name, "--name", help="Cluster name (several clusters need distinct --port-base).")
PORT_BASE = typer.Option(DEFAULT.port_base, help="First of the loopback ports the cluster listens on.")
DEFAULT_PROVIDER = PROVIDERS[0]
PROVIDER = typer.Option(DEFAULT_PROVIDER, help=f"{DEFAULT_PROVIDER} (default, no container engine needed) or "
                        f"{' or '.join(PROVIDERS[1:])}.")
FEATURE_GATES = typer.Option(DEFAULT.feature_gates, help="The TrainJob controller's feature gates.")
TRAINJOB_CONTROLLER = typer.Option(
    DEFAULT.trainjob_controller, "--trainjob-controller",
    help=f"Which TrainJob controller runs: {' or '.join(TRAINJOB_CONTROLLERS)} (Kubeflow Trainer's own "
         "trainer-controller-manager, built by `trainyard tools build kubeflow-trainer`, as an oracle).")
REAL_NODES = typer.Option(DEFAULT.real_nodes, "--real-nodes", help=(
    "Also start N real nodes (kubelet + containerd on this machine, root only) that run pods for real; they carry "
    f"the GPU labels and capacity of the simulated nodes and the taint {REAL_NODE_LABEL}=true:NoSchedule."))

MONITORING = typer.Option(DEFAULT.monitoring, "--monitoring/--no-monitoring", help=(
    "Also run kube-state-metrics and Prometheus, the usage record (data kept under ~/.cache/trainyard/usage/)."))


def fail(message: str, code: int = 1) -> NoReturn:
    console.print(f"[red]error:[/] {message}")
    raise typer.Exit(code)


def make_spec(**values) -> ClusterSpec:
    """A validated ClusterSpec, or exit 2 with the option names and fixes."""
    try:
        return ClusterSpec(**values)
    except ValueError as exc:
        fail(str(exc), 2)
        raise  # unreachable: fail exits


def start(spec: ClusterSpec, provider: str = DEFAULT_PROVIDER, bare: bool = False) -> dict:
    """Start the cluster with the chosen provider; a running cluster is left alone."""
    if provider not in PROVIDERS:
        fail(f"--provider {provider!r}: use one of {', '.join(PROVIDERS)}", 2)
    if bare and provider != DEFAULT_PROVIDER:
        fail("--bare is a kwok option (kind clusters start without trainyard's local controllers anyway)", 2)
    if spec.real_nodes and provider != DEFAULT_PROVIDER:
        fail("--real-nodes is a kwok option (kind's nodes run pods for real already)", 2)
    if spec.trainjob_controller != DEFAULT.trainjob_controller and (bare or provider != DEFAULT_PROVIDER):
        fail(f"--trainjob-controller {spec.trainjob_controller}: the controller runs as a local process of a "
             "kwok cluster with controllers (not --bare, not --provider kind)", 2)
    try:
        if provider == "kind":
            from trainyard.cluster import kind

            kind.up(spec, echo=console.print)
            return local.read_state(spec.name) or {}
        return local.up(spec, echo=console.print, controllers=not bare, real_nodes=real_node_lifecycle())
    except local.ClusterError as exc:
        fail(str(exc))
        raise


def real_node_lifecycle() -> local.RealNodeLifecycle:
    """How a cluster's real nodes start and stop, for `cluster.local.up/down`."""
    from trainyard.realnodes.nodes import LIFECYCLE

    return LIFECYCLE


@cluster_app.command("up")
def up(
    name: str = NAME,
    nodes: int = typer.Option(DEFAULT.nodes, help="Number of simulated GPU nodes."),
    gpus_per_node: int = typer.Option(DEFAULT.gpus_per_node, help="nvidia.com/gpu capacity of each node."),
    gpu_product: str = typer.Option(DEFAULT.gpu_product, help="Value of the nvidia.com/gpu.product label."),
    racks: int = typer.Option(DEFAULT.racks, help="Racks the nodes are spread over (topology labels for HyperNodes)."),
    spines: int = typer.Option(DEFAULT.spines, help="Spines the racks are spread over (tier-2 topology label)."),
    port_base: int = PORT_BASE,
    provider: str = PROVIDER,
    feature_gates: str = FEATURE_GATES,
    trainjob_controller: str = TRAINJOB_CONTROLLER,
    real_nodes: int = REAL_NODES,
    monitoring: bool = MONITORING,
    bare: bool = typer.Option(False, "--bare", help="Control plane and GPU nodes only, no local controllers: "
                              "deploy an in-cluster stack (controllersRunLocally: false) onto it; kwok runs its pods."),
    reclaim: str = typer.Option(DEFAULT.reclaim, "--reclaim", help="The TrainJob controller's gang-aware reclaim: none "
                                "or its rule (deserved, final-share, fair-sharing); for a stack whose "
                                "scheduler.queuePlugin is capacity."),
) -> None:
    """Start the cluster; on a running cluster say so and change nothing."""
    spec = make_spec(name=name, nodes=nodes, gpus_per_node=gpus_per_node, gpu_product=gpu_product, racks=racks,
                     spines=spines, port_base=port_base, feature_gates=feature_gates, trainjob_controller=trainjob_controller,
                     real_nodes=real_nodes, monitoring=monitoring, reclaim=reclaim)
    start(spec, provider, bare)
    print_status(name)


@cluster_app.command("down")
def down(name: str = NAME) -> None:
    """Stop every process `up` started."""
    local.down(name, echo=console.print, real_nodes=real_node_lifecycle())


@cluster_app.command("status")
def status(name: str = NAME, as_json: bool = typer.Option(False, "--json")) -> None:
    """What is running, where its kubeconfig and logs are."""
    if as_json:
        typer.echo(json.dumps(local.status(name), indent=2))
        return
    print_status(name)


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
        fail(f"cluster {name!r} does not exist; start it with `trainyard cluster up --name {name}`")
    if group and not user:
        fail("--group needs --user (the user the groups belong to)")
    if user:
        typer.echo(str(local.user_kubeconfig(name, user, tuple(group))))
        return
    typer.echo(state["kubeconfig"])


def shell_env(kubeconfig: str, kubectl_dir: str) -> str:
    """The two lines `eval "$(trainyard cluster env)"` runs: the cluster's kubeconfig and the pinned kubectl first
    on PATH (quoted for a POSIX shell)."""
    import shlex

    return f"export KUBECONFIG={shlex.quote(kubeconfig)}\nexport PATH={shlex.quote(kubectl_dir)}:\"$PATH\""


@cluster_app.command("env")
def env(name: str = NAME) -> None:
    """Print shell lines that point kubectl at the cluster: `eval "$(.venv/bin/trainyard cluster env)"`."""
    from trainyard.toolchain.versions import binary

    state = local.read_state(name)
    if not state:
        fail(f"cluster {name!r} does not exist; start it with `trainyard cluster up --name {name}`")
    typer.echo(shell_env(state["kubeconfig"], str(binary("kubectl").parent)))


@cluster_app.command("load-image")
def load_image(image: str = typer.Argument(..., help="An image trainyard builds: pause, training or controller."),
               name: str = NAME,
               revision: Optional[str] = typer.Option(None, "--revision", help=(
                   "Build the controller image from this release or commit instead of the checkout: `previous` "
                   "(the newest release before the checkout), a version (`0.3.0`), a tag or a commit. Its image is "
                   "named trainyard.local/controller:v<version> (or :<commit>), to try an upgrade from it."))) -> None:
    """Build a local image (cached) and import it into every real node of the cluster, like `kind load`."""
    from trainyard.errors import TrainyardError
    from trainyard.realnodes.image_loading import load_image as load

    try:
        record = load(name, image, echo=console.print, revision=revision)
    except TrainyardError as exc:  # the cluster's state, or the image build (names its log)
        fail(str(exc))
    console.print(f"loaded {record['ref']} (also {', '.join(record.get('aliases', []))}) into the real nodes "
                  f"of {name!r}", soft_wrap=True)


@cluster_app.command("node-down")
def node_down(node: str = typer.Argument(..., help="A node of the cluster (`kubectl get nodes`)."),
              name: str = NAME) -> None:
    """Make a node die, to drill what the platform does with work on it: a real node loses power (its kubelet,
    containerd and pods' processes killed), a simulated one is no longer kept alive by kwok."""
    from trainyard.errors import TrainyardError
    from trainyard.realnodes.node_power import power_off

    try:
        console.print(power_off(name, node, echo=console.print), soft_wrap=True)
    except TrainyardError as exc:
        fail(str(exc))
    typer.echo(f"the node controller marks it NotReady within its grace period; `trainyard cluster node-up {node}`"
               " brings it back")


@cluster_app.command("node-up")
def node_up(node: str = typer.Argument(..., help="A node `node-down` stopped."), name: str = NAME) -> None:
    """Bring back a node `node-down` stopped: a real one's containerd and kubelet start again (its labels and GPU
    capacity put back); a simulated one is kept alive by kwok again."""
    from trainyard.errors import TrainyardError
    from trainyard.realnodes.node_power import power_on

    try:
        console.print(power_on(name, node, echo=console.print), soft_wrap=True)
    except TrainyardError as exc:
        fail(str(exc))


def print_status(name: str) -> None:
    info = local.status(name)
    if not info.get("running"):
        console.print(f"cluster {name!r} is not running")
        return
    table = Table("process", "state", title=f"cluster {name} at {info['apiserver']}")
    for proc, state in sorted(info["processes"].items()):
        table.add_row(proc, state)
    console.print(table)
    console.print(f"trainjob controller: {info['trainjob_controller']}")
    console.print(f"kubeconfig: {info['kubeconfig']}\nlogs:       {info['logs']}")
    if info.get("prometheus"):
        console.print(f"usage:      {info['prometheus']} (Prometheus; `trainyard usage` reads it)", soft_wrap=True)
    console.print(f"try:        export KUBECONFIG={info['kubeconfig']}; kubectl get nodes -L nvidia.com/gpu.product")


def register_top_level(app: typer.Typer) -> None:
    """`trainyard up` / `trainyard down`: what `make up` / `make down` run."""
    from trainyard import main_job
    from trainyard.stack_deploy import LOCAL_STACK

    @app.command("up")
    def platform_up(name: str = NAME, port_base: int = PORT_BASE, feature_gates: str = FEATURE_GATES,
                    stack: str = typer.Option(LOCAL_STACK, help="Stack deployed on the cluster."),
                    real_nodes: int = REAL_NODES, monitoring: bool = MONITORING) -> None:
        """Start the local GPU cluster with its controllers, then `pulumi up` the local stack on it."""
        spec = make_spec(name=name, port_base=port_base, feature_gates=feature_gates, real_nodes=real_nodes,
                         monitoring=monitoring)
        start(spec)
        try:
            main_job.deploy(spec.name, stack, echo=console.print)
        except main_job.StackError as exc:
            fail(f"{exc}\nthe cluster is still running: fix the stack and run `trainyard up` again, "
                 f"or stop it with `trainyard down --name {name}`")
        typer.echo(main_job.closing_hint(spec.name, stack))  # plain: commands must survive copy and paste

    @app.command("down")
    def platform_down(name: str = NAME) -> None:
        """Stop everything `trainyard up` started; the local stack's state goes with its cluster."""
        local.down(name, echo=console.print, real_nodes=real_node_lifecycle())
