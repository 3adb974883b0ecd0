"""The local cluster's TrainJob controller: trainyard's, or Kubeflow Trainer's own as an oracle.

`cluster up --trainjob-controller upstream` runs the trainer-controller-manager built from the pinned
module in place of trainyard's, with upstream's CRDs and webhooks, so both can be compared on one cluster.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import urllib.request
from pathlib import Path

import yaml

from trainyard.cluster import certs, controller_configs
from trainyard.cluster.state import ClusterError, ClusterPaths, kubectl, read_state
from trainyard.cluster.processes import ProcessSpec, ProcessTable, pid_alive, port_in_use, wait_for_port
from trainyard.cluster.spec import ClusterSpec, pod_reachable_addresses
from trainyard.controller.feature_gates import parse_feature_gates
from trainyard.k8s import TRAINER_GROUP
from trainyard.toolchain.versions import tool
from trainyard.waiting import wait_for

PROCESS = "trainjob-controller"
UPSTREAM_BINARY = "trainer-controller-manager"
# The admission webhook configurations each controller registers (by name), removed when it stops: their
# failurePolicy is Fail, so a stopped controller's webhooks would refuse every write they match.
WEBHOOK_CONFIGURATIONS = {
    "upstream": (("mutatingwebhookconfiguration", f"defaulter.{TRAINER_GROUP}"),
                 ("validatingwebhookconfiguration", f"validator.{TRAINER_GROUP}")),
    "trainyard": (("validatingwebhookconfiguration", "trainyard-trainer-validator"),),
}


def check_built(spec: ClusterSpec) -> None:
    """Fail before anything starts when the chosen controller's binary is missing."""
    if spec.trainjob_controller == "upstream" and not tool("kubeflow-trainer").path(UPSTREAM_BINARY).is_file():
        raise ClusterError(f"--trainjob-controller upstream needs {UPSTREAM_BINARY}; build it with "
                           "`trainyard tools build kubeflow-trainer`")


def start_trainjob_controller(spec: ClusterSpec, paths: ClusterPaths, table: ProcessTable, kc, ca_pem: bytes,
                             echo=print) -> None:
    """Start the TrainJob controller `spec.trainjob_controller` names."""
    if spec.trainjob_controller == "upstream":
        start_upstream_controller(spec, paths, table, kc, echo)
    else:
        start_trainyard_controller(spec, paths, table, kc, ca_pem, echo)


def start_trainyard_controller(spec: ClusterSpec, paths: ClusterPaths, table: ProcessTable, kc, ca_pem: bytes,
                               echo=print) -> None:
    """Install trainyard's CRDs, run its controller as a local process and register its webhook by URL."""
    from trainyard.controller.crds import crd_objects
    from trainyard.controller.webhook_configuration import webhook_configuration

    echo(f"installing the {TRAINER_GROUP} CRDs and starting trainyard's TrainJob controller")
    crds = crd_objects()
    kc("apply", "--server-side", "--force-conflicts", "-f", "-", input_text=yaml.safe_dump_all(crds))
    kc("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{c['metadata']['name']}" for c in crds])
    kc("apply", "--server-side", "-f", "-", input_text=yaml.safe_dump(  # exists after a switch back
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "trainyard-system"}}))
    ports = spec.ports
    status_host = next(iter(pod_reachable_addresses(spec)), "127.0.0.1")  # real pods post trainerStatus there
    table.start(ProcessSpec(PROCESS, [
        sys.executable, "-m", "trainyard.cli.controller", "run", "--kubeconfig", str(paths.kubeconfig),
        "--lease-namespace", "trainyard-system",
        f"--metrics-address=127.0.0.1:{ports.port('controller_metrics')}",
        f"--health-address=127.0.0.1:{ports.port('controller_health')}",
        f"--webhook-address=127.0.0.1:{ports.port('controller_webhook')}", "--cert-dir", str(paths.certs),
        f"--webhook-client-ca={webhook_client_ca(paths)}",
        f"--feature-gates={spec.feature_gates}", f"--status-address={status_host}:{ports.port('controller_status')}",
        f"--status-url=https://{status_host}:{ports.port('controller_status')}",
        f"--kube-api-qps={spec.controller_qps}", f"--kube-api-burst={spec.controller_burst}",
        f"--start-estimates-every={spec.start_estimates_every}", f"--stalled-after={spec.stalled_after}",
        f"--gang-start-timeout={spec.gang_start_timeout}", f"--node-loss-release-after={spec.node_loss_release_after}",
        f"--reclaim={spec.reclaim}", "--reclaim-holds" if spec.reclaim_holds else "--no-reclaim-holds",
        *([f"--prometheus=http://127.0.0.1:{ports.port('prometheus')}", f"--budgets-every={spec.budgets_every}"]
          if spec.monitoring else [])]))
    if not wait_for_port(ports.port("controller_webhook"), 60, lambda: PROCESS in table.running()):
        raise ClusterError(f"the TrainJob controller did not start; see {table.log_dir / (PROCESS + '.log')}")
    config = webhook_configuration(certs.ca_bundle(ca_pem), url=f"https://127.0.0.1:{ports.port('controller_webhook')}")
    kc("apply", "--server-side", "--force-conflicts", "-f", "-", input_text=yaml.safe_dump(config))


def webhook_client_ca(paths) -> Path:
    """The CA of the API server's webhook client certificate (`local._webhook_client_files`)."""
    return paths.certs / "webhook-client" / "ca.crt"


def upstream_manifests() -> dict[str, list[Path]]:
    """Kubeflow Trainer's CRDs and webhook manifests (with their kustomize patches) from the pinned module."""
    from trainyard.toolchain.modules import module_dir
    from trainyard.toolchain.recipes import TRAINER_MODULE

    base = module_dir(tool("kubeflow-trainer"), TRAINER_MODULE) / "manifests" / "base"
    return {
        "crds": sorted((base / "crds").glob(f"{TRAINER_GROUP}_*.yaml")),
        "webhooks": [base / "webhook" / "manifests.yaml"],
        "MutatingWebhookConfiguration": [base / "webhook" / "patch_mutating.yaml"],
        "ValidatingWebhookConfiguration": [base / "webhook" / "patch_validating.yaml"],
    }


def _load_all(path: Path) -> list:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _wait_ready(port: int, timeout: float, alive) -> bool:
    """Upstream registers its webhook handlers after the server listens; /readyz says when it serves."""
    def ready_or_dead() -> bool | str:
        if not alive():
            return "dead"  # truthy: ends the wait
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    return wait_for(ready_or_dead, timeout, f"{UPSTREAM_BINARY} ready", 0.5, error=None) is True


def start_upstream_controller(spec: ClusterSpec, paths: ClusterPaths, table: ProcessTable, kc, echo=print) -> None:
    """Run Kubeflow Trainer's trainer-controller-manager out of cluster with upstream's CRDs and webhooks.

    Its webhook server has no certDir option and reads $TMPDIR/k8s-webhook-server/serving-certs, so the
    process gets a TMPDIR inside the cluster's directory. Gates it cannot serve out of cluster are turned
    off (`trainer_feature_gates`), and said so.
    """
    manifests = upstream_manifests()
    binary = tool("kubeflow-trainer").path(UPSTREAM_BINARY)
    echo(f"installing Kubeflow Trainer {tool('kubeflow-trainer').version}'s CRDs and starting its "
         f"{UPSTREAM_BINARY} (the upstream TrainJob controller)")
    for path in manifests["crds"]:
        kc("apply", "--server-side", "--force-conflicts", "-f", str(path))
    names = [doc["metadata"]["name"] for path in manifests["crds"] for doc in _load_all(path)]
    kc("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{name}" for name in names])

    tmp_dir = paths.root / "tmp"
    cert_dir = controller_configs.trainer_cert_dir(tmp_dir)
    ca_pem = certs.write_serving_pair(cert_dir)
    gates = controller_configs.trainer_feature_gates(spec)
    dropped = sorted(n for n, on in parse_feature_gates(spec.feature_gates).items() if on and not gates[n])
    if dropped:
        echo(f"feature gates off for the upstream controller out of cluster: {', '.join(dropped)} (its status "
             "server needs the in-cluster service-account token)")
    config_file = paths.root / "trainer-config.yaml"
    config_file.write_text(yaml.safe_dump(controller_configs.trainer_config(spec), sort_keys=False))
    table.start(ProcessSpec(PROCESS, [str(binary), "--config", str(config_file), "--kubeconfig",
                                      str(paths.kubeconfig), "--zap-log-level=info"], env={"TMPDIR": str(tmp_dir)}))
    ports = spec.ports
    alive = lambda: PROCESS in table.running()  # noqa: E731
    if not (wait_for_port(ports.port("controller_webhook"), 60, alive)
            and _wait_ready(ports.port("controller_health"), 60, alive)):
        raise ClusterError(f"{UPSTREAM_BINARY} did not become ready; see {table.log_dir / (PROCESS + '.log')}")
    patches = {kind: yaml.safe_load(manifests[kind][0].read_text())
               for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")}
    hooks = controller_configs.trainer_webhook_configurations(
        _load_all(manifests["webhooks"][0]), patches, f"https://127.0.0.1:{ports.port('controller_webhook')}",
        certs.ca_bundle(ca_pem))
    kc("apply", "--server-side", "--force-conflicts", "-f", "-", input_text=yaml.safe_dump_all(hooks))



def stop_trainjob_controller(cluster_name: str, timeout: float = 30.0) -> None:
    """Stop a running local cluster's TrainJob controller (whichever runs) and remove both controllers'
    webhook configurations; CRDs and every object stay."""
    paths = ClusterPaths.for_name(cluster_name)
    state = read_state(cluster_name)
    if not state:
        raise ClusterError(f"cluster {cluster_name!r} does not exist")
    table = ProcessTable(paths.root)
    pid = table.load().get(PROCESS)
    if pid and pid_alive(pid):
        table.kill(PROCESS, signal.SIGTERM)
        if pid_alive(pid):
            table.kill(PROCESS, signal.SIGKILL)
    port = ClusterSpec(**state["spec"]).ports.port("controller_webhook")
    wait_for(lambda: not port_in_use(port), timeout, f"port {port} free", 0.1, error=None)
    for kind, name in (item for items in WEBHOOK_CONFIGURATIONS.values() for item in items):
        kubectl(cluster_name, "delete", kind, name, "--ignore-not-found")


def switch_trainjob_controller(cluster_name: str, which: str, echo=print, client_limits: tuple[float, int] | None = None
                              ) -> None:
    """Stop the running cluster's TrainJob controller, install `which` one's CRDs and webhooks, start it.

    For differential tests: the same TrainJobs reconciled by Kubeflow Trainer's controller and by trainyard's
    on one cluster, in turn; `client_limits` (qps, burst) overrides the controller's client-side API limits.
    The CRDs are applied by the same field manager, so the other's versions and
    schemas are replaced, not merged.
    """
    changes: dict = {"trainjob_controller": which}
    if client_limits is not None:  # (qps, burst); qps < 0: no limit (benchmarks)
        changes.update(controller_qps=client_limits[0], controller_burst=client_limits[1])
    restart_trainjob_controller(cluster_name, echo, **changes)


def restart_trainjob_controller(cluster_name: str, echo=print, **changes) -> None:
    """Restart the running cluster's TrainJob controller with `changes` to its ClusterSpec (e.g. `reclaim`),
    kept in the cluster's state for later restarts."""
    state = read_state(cluster_name)
    if not state:
        raise ClusterError(f"cluster {cluster_name!r} does not exist")
    spec = dataclasses.replace(ClusterSpec(**state["spec"]), **changes)  # validates the changes
    which = spec.trainjob_controller
    check_built(spec)
    paths = ClusterPaths.for_name(cluster_name)
    stop_trainjob_controller(cluster_name)

    def kc(*args: str, input_text: str | None = None) -> str:
        return kubectl(cluster_name, *args, input_text=input_text)

    ca_pem = (paths.certs / "ca.crt").read_bytes()
    start_trainjob_controller(spec, paths, ProcessTable(paths.root), kc, ca_pem, echo)
    state["spec"] = dataclasses.asdict(spec)
    state["trainjob_controller"] = which
    paths.state.write_text(json.dumps(state, indent=2))
