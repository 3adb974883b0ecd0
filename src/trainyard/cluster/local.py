"""`trainyard cluster up/down/status` for the kwok provider: the I/O side of cluster/spec.py and
controller_configs.py."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from trainyard import k8s as K
from trainyard.cluster import certs, controller_configs, spec as cluster_spec
from trainyard.cluster.processes import ProcessSpec, ProcessTable, pid_alive, port_in_use, wait_for_port
from trainyard.cluster.spec import ClusterSpec
from trainyard.platform import upstream
from trainyard.cluster import trainer_controllers
from trainyard.cluster.state import (REQUIRED_TOOLS, ClusterError, ClusterPaths, is_running, kubectl, kwok_env,  # noqa: F401
                                     read_state, run_logged, tool_binaries)
from trainyard.timestamps import now_time
from trainyard.toolchain.versions import tool
from trainyard.waiting import wait_for

def kubeconfig_document(cluster: str, server: str, ca_file: Path, cert_file: Path, key_file: Path, user: str) -> dict:
    context = f"{user}@{cluster}"
    return {"apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
            "users": [{"name": user, "user": {"client-certificate": str(cert_file), "client-key": str(key_file)}}],
            "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}]}


def user_kubeconfig(name: str, user: str, groups: tuple[str, ...]) -> Path:
    """A kubeconfig acting as `user` in `groups` (client certificate signed by the cluster's CA), to try a
    tenant's RBAC or the Kubeflow SDK as a data scientist would. Written under the cluster's users/."""
    state = read_state(name)
    if not state:
        raise ClusterError(f"cluster {name!r} does not exist; start it with `trainyard cluster up --name {name}`")
    paths = ClusterPaths.for_name(name)
    admin = yaml.safe_load(paths.kubeconfig.read_text())
    (cluster_entry,) = admin["clusters"]
    ca_file = Path(cluster_entry["cluster"]["certificate-authority"])
    ca_key = ca_file.with_name("ca.key")
    cert_pem, key_pem = certs.sign_client_certificate(ca_file.read_bytes(), ca_key.read_bytes(), user, groups)
    directory = paths.root / "users" / user
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file, kubeconfig = directory / "client.crt", directory / "client.key", directory / "kubeconfig.yaml"
    cert_file.write_bytes(cert_pem)
    key_file.write_bytes(key_pem)
    key_file.chmod(0o600)
    document = kubeconfig_document(cluster_entry["name"], cluster_entry["cluster"]["server"], ca_file, cert_file,
                                   key_file, user)
    kubeconfig.write_text(yaml.safe_dump(document, sort_keys=False))
    return kubeconfig


def _upstream_manifests() -> dict[str, list[Path]]:
    """JobSet's CRDs and webhook manifests from its pinned module (checked by go.sum); Volcano's CRDs come from
    `upstream.volcano_crds`, as the platform program installs them."""
    from trainyard.toolchain.modules import module_dir

    jobset_dir = module_dir(tool("jobset"), "sigs.k8s.io/jobset")
    return {
        "jobset-crds": sorted((jobset_dir / "config/components/crd/bases").glob("*.yaml")),
        "jobset-webhooks": [jobset_dir / "config/components/webhook/manifests.yaml"],
    }


def _kwok_stages(spec: ClusterSpec) -> list[dict]:
    """None (kwokctl's defaults) unless the cluster's pods run for the delay their annotation names."""
    if not spec.timed_pods:
        return []
    from trainyard.cluster import kwok_stages
    from trainyard.toolchain.modules import module_dir

    return kwok_stages.timed_stages(kwok_stages.read_upstream(module_dir(tool("kwok"), "sigs.k8s.io/kwok")))


def _check_ports_free(spec: ClusterSpec) -> None:
    busy = {name: port for name, port in spec.ports.all().items() if port_in_use(port)}
    if busy:
        listing = ", ".join(f"{name}={port}" for name, port in busy.items())
        raise ClusterError(
            f"ports already in use on 127.0.0.1: {listing}; stop what listens there or choose other ports "
            f"with `trainyard cluster up --port-base N` (now {spec.port_base})"
        )


def _webhook_client_files(paths: ClusterPaths) -> Path:
    """The API server's client certificate for its admission webhook calls (a CA of its own, which the TrainJob
    controller's webhook trusts alone: `trainer_controllers.webhook_client_ca`), and the AdmissionConfiguration
    that hands it over; returns the AdmissionConfiguration's path."""
    directory = paths.certs / "webhook-client"
    _, cert, key = certs.write_client_pair(directory, cluster_spec.WEBHOOK_CLIENT_USER, ())
    kubeconfig_file, config_file = directory / "kubeconfig.yaml", directory / "admission-config.yaml"
    config, kubeconfig = cluster_spec.webhook_admission_files(cert, key, kubeconfig_file)
    kubeconfig_file.write_text(yaml.safe_dump(kubeconfig))
    kubeconfig_file.chmod(0o600)
    config_file.write_text(yaml.safe_dump(config))
    return config_file


def _jobset_webhooks(ca_pem: bytes, spec: ClusterSpec, manifest: Path) -> list[dict]:
    base = f"https://127.0.0.1:{spec.ports.port('jobset_webhook')}"
    docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    out = []
    for doc in docs:
        hooked = controller_configs.url_webhook_configuration(doc, base, certs.ca_bundle(ca_pem))
        hooked["metadata"]["name"] = "jobset-" + hooked["metadata"]["name"]
        out.append(hooked)
    return out


@dataclass(frozen=True)
class RealNodeLifecycle:
    """How real kubelets join and leave a cluster (`trainyard.realnodes.nodes.LIFECYCLE`, which builds on this
    package): given by the caller, so the cluster package never imports the real nodes."""

    start: Callable[..., Any]  # (spec, paths, process table, kubectl, echo)
    stop: Callable[..., Any]  # (name, paths, process table, kubectl, spec)


def _real_nodes_or_refuse(real_nodes: RealNodeLifecycle | None) -> RealNodeLifecycle:
    if real_nodes is None:
        raise ClusterError("this cluster has real nodes: start and stop it with `trainyard cluster up/down` "
                           "(which pass trainyard.realnodes.nodes.LIFECYCLE)")
    return real_nodes


def up(spec: ClusterSpec, echo=print, controllers: bool = True, real_nodes: RealNodeLifecycle | None = None) -> dict:
    """Start the cluster and its controllers; a running cluster is left alone.

    `controllers=False` (`cluster up --bare`) stops after the control plane and the GPU nodes: a cluster to
    deploy an in-cluster stack onto (controllersRunLocally: false), whose pods kwok then runs.
    `real_nodes`: how real kubelets join, required when `spec.real_nodes` asks for some.
    """
    paths = ClusterPaths.for_name(spec.name)
    if is_running(spec.name):
        echo(f"cluster {spec.name!r} is already running (kubeconfig {paths.kubeconfig}); nothing changed")
        return read_state(spec.name) or {}
    binaries = tool_binaries()
    trainer_controllers.check_built(spec)
    _check_ports_free(spec)
    if paths.root.exists():  # leftovers of a crashed run: start clean
        down(spec.name, echo=lambda *_: None, real_nodes=real_nodes)
        shutil.rmtree(paths.root, ignore_errors=True)
    paths.root.mkdir(parents=True)
    env = kwok_env(paths, binaries)
    setup_log = paths.logs / "up.log"

    config_file = paths.root / "kwokctl.yaml"
    kubelet_client = None
    if spec.real_nodes:
        from trainyard.cluster.real_node_spec import KUBELET_CLIENT_GROUPS, KUBELET_CLIENT_USER

        _, client_cert, client_key = certs.write_client_pair(paths.certs / "kubelet-client", KUBELET_CLIENT_USER,
                                                             KUBELET_CLIENT_GROUPS)
        kubelet_client = (client_cert, client_key)
    documents = [cluster_spec.kwokctl_config(spec, binaries, kubelet_client, _webhook_client_files(paths)),
                 *_kwok_stages(spec)]
    config_file.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    echo(f"starting control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) on 127.0.0.1:{spec.ports.port('apiserver')}")
    run_logged([str(binaries["kwokctl"]), "create", "cluster", "--name", spec.name, "--config", str(config_file),
          "--kubeconfig", "", "--wait", "120s"], env, "kwokctl create cluster", setup_log)
    generated = paths.kwok_workdir / "clusters" / spec.name / "kubeconfig.yaml"
    shutil.copyfile(generated, paths.kubeconfig)
    paths.kubeconfig.chmod(0o600)
    state = {"name": spec.name, "provider": "kwok", "spec": asdict(spec), "ports": spec.ports.all(),
             "kubeconfig": str(paths.kubeconfig), "controllers": controllers,
             "trainjob_controller": spec.trainjob_controller,
             "created": now_time()}
    paths.state.write_text(json.dumps(state, indent=2))

    def kc(*args: str, input_text: str | None = None) -> str:
        return run_logged([str(binaries["kubectl"]), "--kubeconfig", str(paths.kubeconfig), *args], env,
                    f"kubectl {' '.join(args[:2])}", setup_log, input_text)

    echo(f"creating {spec.nodes} simulated GPU nodes ({spec.gpus_per_node}x {spec.gpu_product}, {spec.racks} racks, "
         f"{spec.spines} spine{'s' if spec.spines > 1 else ''})")
    kc("create", "-f", "-", input_text=yaml.safe_dump_all([*cluster_spec.gpu_nodes(spec),
                                                           cluster_spec.default_storage_class()]))
    if spec.real_nodes:
        _real_nodes_or_refuse(real_nodes).start(spec, paths, ProcessTable(paths.root), kc, echo)
    if not controllers:
        echo(f"cluster {spec.name!r} is up (bare: control plane and GPU nodes only)")
        return state

    manifests = _upstream_manifests()
    echo("installing JobSet and Volcano CRDs from the pinned modules")
    for path in manifests["jobset-crds"]:
        kc("apply", "--server-side", "--force-conflicts", "-f", str(path))
    # Volcano's as the platform program installs them (the PodGroup phase selectable: `upstream.with_selectable_phase`)
    kc("apply", "--server-side", "--force-conflicts", "-f", "-",
       input_text=yaml.safe_dump_all(upstream.volcano_crds()))
    kc("wait", "--for=condition=Established", "--timeout=60s", f"crd/{K.resource_name(K.JOBSETS, K.JOBSET_GROUP)}",
       f"crd/{K.resource_name(K.QUEUES, K.VOLCANO_GROUP)}", f"crd/{K.resource_name(K.PODGROUPS, K.VOLCANO_GROUP)}",
       f"crd/{K.resource_name('hypernodes', K.VOLCANO_TOPOLOGY_GROUP)}")
    kc("create", "namespace", cluster_spec.VOLCANO_NAMESPACE)

    ca_pem = certs.write_serving_pair(paths.certs, ip_addresses=cluster_spec.pod_reachable_addresses(spec))
    table = ProcessTable(paths.root)
    jobset_config = paths.root / "jobset-config.yaml"
    jobset_config.write_text(yaml.safe_dump(controller_configs.jobset_config(spec, paths.certs)))
    echo("starting the JobSet controller")
    table.start(ProcessSpec("jobset", [str(binaries["jobset"]), "--kubeconfig", str(paths.kubeconfig),
                                       "--config", str(jobset_config), "--zap-log-level=info"]))
    if not wait_for_port(spec.ports.port("jobset_webhook"), 60, lambda: "jobset" in table.running()):
        raise ClusterError(f"the JobSet controller did not start; see {table.log_dir / 'jobset.log'}")
    kc("apply", "--server-side", "--force-conflicts", "-f", "-",
       input_text=yaml.safe_dump_all(_jobset_webhooks(ca_pem, spec, manifests["jobset-webhooks"][0])))

    from trainyard.queues.scheduler_config import render as render_scheduler_conf

    paths.scheduler_conf.parent.mkdir(parents=True, exist_ok=True)
    paths.scheduler_conf.write_text(render_scheduler_conf())
    echo("starting Volcano (controller-manager, scheduler) and the scheduler-config sync")
    ports = spec.ports
    table.start(ProcessSpec("vc-controller-manager", [
        str(binaries["vc-controller-manager"]), f"--kubeconfig={paths.kubeconfig}", "--leader-elect=false",
        "--controllers=queue-controller,pg-controller", "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{ports.port('volcano_controller_healthz')}",
        f"--listen-address=127.0.0.1:{ports.port('volcano_controller_metrics')}", "-v=2"]))
    table.start(ProcessSpec("vc-scheduler", [
        str(binaries["vc-scheduler"]), f"--kubeconfig={paths.kubeconfig}", "--leader-elect=false",
        f"--scheduler-conf={paths.scheduler_conf}", "--schedule-period=500ms", "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{ports.port('volcano_scheduler_healthz')}", "--enable-metrics=true",
        f"--listen-address=127.0.0.1:{ports.port('volcano_scheduler_metrics')}", "-v=3"],
        env={"DEBUG_SOCKET_DIR": str(paths.root / "volcano" / "sockets")}))
    table.start(ProcessSpec("scheduler-conf-sync", [
        sys.executable, "-m", "trainyard.cluster.scheduler_conf_sync", "--kubeconfig", str(paths.kubeconfig),
        "--file", str(paths.scheduler_conf)]))
    for name, port in (("vc-scheduler", ports.port("volcano_scheduler_healthz")),
                       ("vc-controller-manager", ports.port("volcano_controller_healthz"))):
        if not wait_for_port(port, 90, lambda n=name: n in table.running()):
            raise ClusterError(f"{name} did not become healthy; see {table.log_dir / (name + '.log')}")
    _wait_queue_open(kc, "default", 90)
    trainer_controllers.start_trainjob_controller(spec, paths, table, kc, ca_pem, echo)
    if spec.monitoring:
        from trainyard.cluster import monitoring

        monitoring.start(spec.name, paths, ports, table, echo)
    echo(f"cluster {spec.name!r} is up")
    return state


def _wait_queue_open(kc, queue: str, timeout: float) -> None:
    def is_open() -> bool:
        try:
            return kc("get", "queue", queue, "-o", "jsonpath={.status.state}").strip() == "Open"
        except ClusterError:  # the API server or the queue not there yet
            return False

    if not wait_for(is_open, timeout, f"Volcano queue {queue!r} open", 1, error=None):
        raise ClusterError(f"Volcano queue {queue!r} did not open within {timeout:.0f}s; see the vc-* logs")


def kwok_processes(paths: ClusterPaths, name: str) -> dict[str, int]:
    """PIDs of the components kwokctl started (etcd, kube-apiserver, ...), by component name."""
    pid_dir = paths.kwok_workdir / "clusters" / name / "pids"
    found = {}
    for pid_file in sorted(pid_dir.glob("*.pid")) if pid_dir.exists() else []:
        try:
            found[pid_file.stem] = int(pid_file.read_text().strip())
        except ValueError:
            continue
    return found


def restart_control_plane_component(name: str, component: str = "kube-apiserver", downtime: float = 0.0) -> float:
    """Kill one of kwokctl's components (SIGKILL) and start it again with the same command line, working
    directory and environment, recording its new PID for `down`; returns seconds until it listens again.

    For chaos tests: an API-server restart under running controllers, as a control-plane upgrade does.
    """
    paths = ClusterPaths.for_name(name)
    pid_file = paths.kwok_workdir / "clusters" / name / "pids" / f"{component}.pid"
    pid = int(pid_file.read_text().strip())
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    cwd = os.readlink(f"/proc/{pid}/cwd")
    env = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in item)
    port = (read_state(name) or {}).get("ports", {}).get("apiserver") if component == "kube-apiserver" else None
    started = time.monotonic()
    os.kill(pid, 9)
    # no deadline: a SIGKILLed process goes, and its port with it
    wait_for(lambda: not (pid_alive(pid) or (port and port_in_use(port))), math.inf, f"{component} gone", 0.05)
    time.sleep(downtime)
    log = open(paths.kwok_workdir / "clusters" / name / "logs" / f"{component}.log", "ab")
    process = subprocess.Popen([a.decode() for a in argv], cwd=cwd, env=env, stdout=log, stderr=log,
                               start_new_session=True)
    pid_file.write_text(str(process.pid))
    if port and not wait_for_port(port, 60, lambda: process.poll() is None):
        raise ClusterError(f"{component} did not come back; see {log.name}")
    return time.monotonic() - started


def host_path_volumes(persistent_volumes: list[dict]) -> list[Path]:
    """The provisioner's directories among a cluster's PersistentVolumes (nothing else is ever removed)."""
    paths = []
    for pv in persistent_volumes:
        path = Path(((pv.get("spec") or {}).get("hostPath") or {}).get("path") or "/")
        if path.parent == cluster_spec.HOST_PATH_VOLUMES and path.name not in ("", ".", ".."):
            paths.append(path)
    return paths


def remove_host_path_volumes(name: str) -> None:
    """The directories of the volumes still bound when the cluster goes (their claims outlive it)."""
    try:
        listed = kubectl(name, "get", "persistentvolumes", "-o", "json", "--request-timeout=5s")
    except (ClusterError, OSError):
        return  # no API server (crashed, or never up): nothing bound there is known
    for path in host_path_volumes(json.loads(listed).get("items") or []):
        shutil.rmtree(path, ignore_errors=True)


def down(name: str, echo=print, real_nodes: RealNodeLifecycle | None = None) -> list[str]:
    """Stop every process `up` started (ours by PID, kwokctl's via kwokctl) and forget the cluster.
    `real_nodes`: how real kubelets leave, required when the cluster has some."""
    paths = ClusterPaths.for_name(name)
    if not paths.root.exists():
        echo(f"cluster {name!r} is not running")
        return []
    state = read_state(name)
    remove_host_path_volumes(name)
    if state and state.get("spec", {}).get("real_nodes"):
        _real_nodes_or_refuse(real_nodes).stop(name, paths, ProcessTable(paths.root),
                                               lambda *args: kubectl(name, *args), ClusterSpec(**state["spec"]))
    stopped = ProcessTable(paths.root).stop_all()
    kwok_components = kwok_processes(paths, name)
    stopped += list(kwok_components)
    kwokctl_bin = tool("kwok").path("kwokctl")
    if kwokctl_bin.exists() and (paths.kwok_workdir / "clusters" / name).exists():
        env = dict(os.environ, KWOK_WORKDIR=str(paths.kwok_workdir), KWOK_RUNTIME="binary")
        env["PATH"] = os.pathsep.join([str(tool("kubernetes").bin_dir), env.get("PATH", "")])
        subprocess.run([str(kwokctl_bin), "delete", "cluster", "--name", name, "--kubeconfig", ""], env=env,
                       capture_output=True, text=True)
    for pid in kwok_components.values():  # kwokctl delete stops them; make sure
        if pid_alive(pid):
            os.kill(pid, 9)
    if state:
        wait_for(lambda: not any(port_in_use(p) for p in state["ports"].values()), 10, "the cluster's ports free", 0.2,
                 error=None)
    shutil.rmtree(paths.root, ignore_errors=True)
    echo(f"cluster {name!r} stopped")
    return stopped


def status(name: str) -> dict:
    paths = ClusterPaths.for_name(name)
    state = read_state(name)
    if not state:
        return {"name": name, "running": False}
    table = ProcessTable(paths.root)
    processes = {proc: ("running" if pid_alive(pid) else "dead") for proc, pid in table.load().items()}
    found = {"name": name, "running": is_running(name), "kubeconfig": str(paths.kubeconfig),
             "apiserver": f"https://127.0.0.1:{state['ports']['apiserver']}", "processes": processes,
             "logs": str(paths.logs), "spec": state["spec"],
             "trainjob_controller": state.get("trainjob_controller", "trainyard")}
    if "prometheus" in processes and "prometheus" in state["ports"]:
        found["prometheus"] = f"http://127.0.0.1:{state['ports']['prometheus']}"
    return found
