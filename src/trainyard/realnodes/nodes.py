"""Start and stop a cluster's real nodes: bridge, CoreDNS, kube-proxy, one containerd and one kubelet per node.

`cluster up --real-nodes N` calls `start` after the control plane is up; `cluster down` calls `stop` before it
stops anything else, so pods are torn down by their kubelets (CNI DEL, unmounts) while the API server still
answers, and what a crash left behind is then removed by hand. `leftovers` reports anything that survived.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import yaml

from trainyard import k8s as K
from trainyard.cluster.processes import ProcessSpec, ProcessTable, pid_alive, wait_for_port
from trainyard.cluster.spec import ClusterSpec, rack_name, spine_name, spine_of_rack
from trainyard.cluster.local import RealNodeLifecycle
from trainyard.cluster.state import ClusterError, ClusterPaths
from trainyard.paths import cache_dir
from trainyard.realnodes import host, network_policy
from trainyard.cluster import real_node_spec as node_spec
from trainyard.cluster.real_node_spec import RealNode
from trainyard.toolchain.versions import tool, tools_in_group
from trainyard.waiting import wait_for

LOCK = node_spec.RUN_DIR / "real-nodes.owner"
"""Names the one cluster whose real nodes run here: they share the pod CIDR and the persistent containerd roots."""


def real_nodes(spec: ClusterSpec, paths: ClusterPaths) -> list[RealNode]:
    return [RealNode(spec.name, i, paths.root, cache_dir(), spec.ports.port(f"kubelet_healthz_{i}"))
            for i in range(spec.real_nodes)]


KUBE_PROXY = "kube-proxy"
NETWORK_POLICY = "network-policy"
HOST_PACKAGES = ("nftables",)
"""Debian packages real nodes need on the host: kube-proxy's nftables mode runs the `nft` command."""


def _forwarding_saved(paths: ClusterPaths) -> Path:
    return paths.root / "realnodes" / "ip_forward.before"


def _kube_proxy_config(paths: ClusterPaths) -> Path:
    return paths.root / "realnodes" / "kube-proxy.yaml"


def host_memory_bytes() -> int:
    """MemTotal of the host (every kubelet on it reads this as its node's memory capacity)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise ClusterError("/proc/meminfo has no MemTotal line")


def process_name(kind: str, node: RealNode) -> str:
    return f"{kind}-{node.name}"


def _ctr(node: RealNode, *args: str, stdin=None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool("containerd").path("ctr")), "--address", str(node.containerd_socket),
                           "--namespace", "k8s.io", *args], stdin=stdin, capture_output=True, text=True,
                          timeout=timeout)


def _images_marker(node: RealNode) -> Path:
    return node.containerd_root / "trainyard-images.json"


def _image_digests(images: dict[str, dict]) -> list[str]:
    return sorted(record["digest"] for record in images.values())


def _drop_root_of_other_images(node: RealNode, images: dict[str, dict]) -> None:
    """A node's containerd root holds the images it was last given; when a build changed, start from an empty
    root (an import costs ~40 s) rather than let old snapshots pile up, gigabytes each (containerd does not
    collect an unpacked image's snapshots reliably once its layers were discarded)."""
    marker = _images_marker(node)
    if node.containerd_root.exists() and (not marker.is_file() or json.loads(marker.read_text()) != _image_digests(images)):
        host.remove_tree(node.containerd_root)


def containerd_answers(node: RealNode) -> Callable[[], bool]:
    return lambda: _ctr(node, "version", timeout=5).returncode == 0


def _no_running_tasks(node: RealNode) -> Callable[[], bool]:
    """True once no container of the node runs (the kubelet stopped them; stopped sandboxes stay until GC)."""
    def check() -> bool:
        rows = _ctr(node, "tasks", "ls", timeout=10).stdout.splitlines()[1:]
        return not any(row.split()[-1] == "RUNNING" for row in rows if row.split())
    return check


def cgroup_empty(node: RealNode) -> Callable[[], bool]:
    return lambda: not host.pids_in_cgroup(node.cgroup_root)


def require_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError("real nodes need root (a kubelet and containerd manage mounts, cgroups and network "
                           "namespaces); run `trainyard cluster up --real-nodes N` as root")


def _check_host_free(spec: ClusterSpec) -> None:
    if LOCK.exists():
        owner = LOCK.read_text().strip()
        if owner != spec.name and (cache_dir() / "clusters" / owner).exists():
            raise ClusterError(f"cluster {owner!r} runs real nodes on this machine; only one cluster can "
                               f"(`trainyard cluster down --name {owner}` first)")
    taken = host.addresses_in(node_spec.POD_CIDR)
    if taken:
        raise ClusterError(f"the real nodes' pod network {node_spec.POD_CIDR} is already on this host "
                           f"({'; '.join(taken)}); remove it (`ip addr del ...`) or stop what uses it")


def import_image(node: RealNode, record: dict, echo: Callable[[str], None]) -> bool:
    """Import the image into the node's containerd unless it holds it already; True if imported. Its aliases
    (`<name>:local`) are pointed at it either way."""
    listed = _ctr(node, "images", "ls", "--quiet")
    if record["ref"] in listed.stdout.split():
        for alias in record.get("aliases", []):
            _ctr(node, "images", "tag", "--force", record["ref"], alias)
        return False
    echo(f"importing {record['ref']} into {node.name} ({record['size'] / 2**30:.1f} GiB, once per node)")
    tar = subprocess.Popen(["tar", "-C", record["layout"], "-cf", "-", "."], stdout=subprocess.PIPE)
    done = _ctr(node, "images", "import", "--local", "--discard-unpacked-layers", "--snapshotter", "overlayfs", "-",
                stdin=tar.stdout)
    tar.wait()
    if done.returncode or tar.returncode:
        raise ClusterError(f"importing {record['ref']} into {node.name} failed: {done.stderr.strip()[-500:]}")
    older = superseded_refs(listed.stdout.split(), record)
    if older:  # earlier builds of this image: gigabytes per node (containerd keeps what a container still uses)
        _ctr(node, "images", "rm", "--sync", *older)
    return True


def superseded_refs(refs: list[str], record: dict) -> list[str]:
    """Refs of earlier builds of the image `record` describes (same repository, another tag)."""
    repository = record["ref"].rsplit(":", 1)[0]
    keep = {record["ref"], *record.get("aliases", [])}
    return [ref for ref in refs if ref.rsplit(":", 1)[0] == repository and ref not in keep]


def start(spec: ClusterSpec, paths: ClusterPaths, table: ProcessTable, kc, echo: Callable[[str], None]) -> list[str]:
    """Bring up `spec.real_nodes` real nodes and wait until they are Ready with their GPU labels and capacity."""
    if not spec.real_nodes:
        return []
    require_root()
    from trainyard.images.build import build_images
    from trainyard.toolchain.host_packages import ensure_host_packages
    from trainyard.toolchain.build import build_tool

    for item in tools_in_group("real-nodes"):
        if not item.is_built():
            echo(f"building {item.name} {item.version} (real nodes)")
            build_tool(item)
    ensure_host_packages(HOST_PACKAGES, echo=echo)
    images = build_images(echo=echo)
    _check_host_free(spec)
    nodes = real_nodes(spec, paths)
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    LOCK.write_text(spec.name)
    prefix = ipaddress.ip_network(node_spec.POD_CIDR).prefixlen
    bridge = node_spec.bridge_name(spec.name)
    echo(f"starting {len(nodes)} real node(s): bridge {bridge} ({node_spec.POD_CIDR}), CoreDNS, kube-proxy, "
         "containerd, kubelet")
    shared = paths.root / "realnodes"
    shared.mkdir(parents=True, exist_ok=True)
    host.create_bridge(bridge, [node_spec.dns_address(), *(n.ip for n in nodes)], prefix)
    # Services: the host routes the Service range onto the bridge (its replies to pods leave from the bridge's
    # address) and forwards what kube-proxy translated to a pod back onto the bridge.
    host.add_route(node_spec.SERVICE_CIDR, bridge, node_spec.dns_address())
    host.enable_ip_forwarding(_forwarding_saved(paths))

    (shared / "Corefile").write_text(node_spec.corefile(paths.kubeconfig))
    (shared / "resolv.conf").write_text(f"nameserver {node_spec.dns_address()}\n")
    table.start(ProcessSpec("coredns", [str(tool("coredns").path("coredns")), "-conf", str(shared / "Corefile")]))

    path_env = {"PATH": os.pathsep.join([str(tool("containerd").bin_dir), "/usr/local/sbin", "/usr/local/bin",
                                         "/usr/sbin", "/usr/bin", "/sbin", "/bin"])}
    for node in nodes:
        _drop_root_of_other_images(node, images)
        for directory in (node.directory / "cni", node.run_dir, node.containerd_root):
            directory.mkdir(parents=True, exist_ok=True)
        host.create_cgroup_root(node.cgroup_root)
        (node.directory / "containerd.toml").write_text(node_spec.containerd_config(
            node, pause_ref=images["pause"]["ref"], runc=tool("runc").path("runc"),
            cni_bin=tool("cni-plugins").bin_dir))
        (node.directory / "cni" / "10-trainyard.conflist").write_text(
            json.dumps(node_spec.cni_conflist(node, bridge), indent=2))
        table.start(ProcessSpec(process_name("containerd", node), [
            str(tool("containerd").path("containerd")), "--config", str(node.directory / "containerd.toml")],
            env=path_env))
    for node in nodes:
        if not wait_for(containerd_answers(node), 60, f"containerd of {node.name}", 0.2, error=None):
            raise ClusterError(f"containerd of {node.name} did not start; see "
                               f"{table.log_dir / (process_name('containerd', node) + '.log')}")
        for record in images.values():
            import_image(node, record, echo)
        _images_marker(node).write_text(json.dumps(_image_digests(images)))

    client_ca = paths.certs / "kubelet-client" / "ca.crt"
    reserved = node_spec.system_reserved_memory(host_memory_bytes(), len(nodes))
    for node in nodes:
        config = node.directory / "kubelet.yaml"
        config.write_text(yaml.safe_dump(node_spec.kubelet_config(node, client_ca=client_ca,
                                                                  resolv_conf=shared / "resolv.conf",
                                                                  system_reserved_memory=reserved)))
        before = socket_identity(DEVICE_PLUGIN_SOCKET)
        table.start(ProcessSpec(process_name("kubelet", node), node_spec.kubelet_argv(
            node, kubelet=tool("kube-node").path("kubelet"), config=config, kubeconfig=paths.kubeconfig)))
        # one at a time: each kubelet empties the host-wide device-plugin directory, then binds its socket there
        # (a fixed path, no flag moves it); two starting together race, and the loser never starts its
        # container manager (seen in CI: "bind: address already in use", the node never registers)
        wait_for(lambda: socket_identity(DEVICE_PLUGIN_SOCKET) not in (None, before), 60,
                 f"the kubelet of {node.name} to bind its device-plugin socket", 0.2, error=None)
    for node in nodes:
        label_and_wait_ready(spec, node, kc, table)
    _start_kube_proxy(spec, paths, table, nodes[0])
    table.start(ProcessSpec(NETWORK_POLICY, [sys.executable, "-m", "trainyard.realnodes.network_policy_enforcer",
                                             "--kubeconfig", str(paths.kubeconfig),
                                             "--table", network_policy.table_name(spec.name)]))
    echo(f"real nodes ready: {', '.join(n.name for n in nodes)}")
    return [n.name for n in nodes]


DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
"""The kubelet's device-plugin registration socket: the same path for every kubelet of the host (k8s.io/kubelet's
`pluginapi.KubeletSocket`, not under --root-dir)."""


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(inode, ctime) of the socket file, None when absent: a new bind makes a new file."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_ctime_ns


def _start_kube_proxy(spec: ClusterSpec, paths: ClusterPaths, table: ProcessTable, first: RealNode) -> None:
    """One kube-proxy for all real nodes (they share the host's network namespace, so one rule set serves
    them all), named after the first node, whose address it uses for NodePorts."""
    config = _kube_proxy_config(paths)
    config.write_text(yaml.safe_dump(node_spec.kube_proxy_config(
        kubeconfig=paths.kubeconfig, node_name=first.name, healthz_port=spec.ports.port("kube_proxy_healthz"),
        metrics_port=spec.ports.port("kube_proxy_metrics"))))
    table.start(ProcessSpec(KUBE_PROXY, [str(tool("kube-node").path("kube-proxy")), f"--config={config}", "--v=2"]))
    if not wait_for_port(spec.ports.port("kube_proxy_healthz"), 60, lambda: KUBE_PROXY in table.running()):
        raise ClusterError(f"kube-proxy did not start; see {table.log_dir / (KUBE_PROXY + '.log')}")


def _stop_kube_proxy(paths: ClusterPaths, table: ProcessTable) -> None:
    """Stop kube-proxy, then remove its rules (`kube-proxy --cleanup` drops its nftables tables and any
    iptables chains an earlier mode left)."""
    table.stop(KUBE_PROXY)
    config = _kube_proxy_config(paths)
    if config.exists():
        subprocess.run([str(tool("kube-node").path("kube-proxy")), f"--config={config}", "--cleanup"],
                       capture_output=True, timeout=60)


def label_and_wait_ready(spec: ClusterSpec, node: RealNode, kc, table: ProcessTable) -> None:
    log = table.log_dir / f"{process_name('kubelet', node)}.log"

    def registered() -> bool:
        try:
            kc("get", "node", node.name, "-o", "name")
            return True
        except ClusterError:
            return False

    if not wait_for(registered, 90, f"{node.name} registered", 0.5, error=None):
        raise ClusterError(f"the kubelet of {node.name} did not register; see {log}")
    rack = spec.racks - 1  # all real nodes in one rack: a same-rack (tier-1) gang of real pods can place
    labels = node_spec.node_labels(node, gpus=spec.gpus_per_node, gpu_product=spec.gpu_product,
                                   rack=rack_name(rack), spine=spine_name(spine_of_rack(rack, spec)), zone=spec.zone,
                                   rack_label=K.RACK_LABEL, spine_label=K.SPINE_LABEL)
    kc("label", "node", node.name, "--overwrite", *(f"{k}={v}" for k, v in labels.items()))
    kc("patch", "node", node.name, "--subresource=status", "--type=json", "-p",
       json.dumps(node_spec.gpu_capacity_patch(spec.gpus_per_node)))

    def ready() -> bool:
        try:
            return kc("get", "node", node.name, "-o",
                      "jsonpath={.status.conditions[?(@.type=='Ready')].status}").strip() == "True"
        except ClusterError:
            return False

    if not wait_for(ready, 90, f"{node.name} Ready", 0.5, error=None):
        raise ClusterError(f"{node.name} did not become Ready; see {log}")


def stop(name: str, paths: ClusterPaths, table: ProcessTable, kc, spec: ClusterSpec) -> None:
    """Tear the real nodes down and remove everything they made on the host (see `leftovers`)."""
    nodes = real_nodes(spec, paths)
    if not nodes:
        return
    running = table.running()
    for node in nodes:  # the kubelet stops its pods properly (CNI DEL, volume unmounts) while it can;
        if process_name("kubelet", node) in running:  # cordoned first, so no replacement lands there
            try:
                kc("cordon", node.name)
                kc("delete", "pods", "--all-namespaces", "--field-selector", f"spec.nodeName={node.name}",
                   "--grace-period=0", "--force", "--wait=false")
            except ClusterError:
                pass
    for node in nodes:
        if process_name("containerd", node) in running:
            wait_for(_no_running_tasks(node), 30, f"{node.name}'s containers stopped", 0.5, error=None)
    for node in nodes:
        table.stop(process_name("kubelet", node))
    for node in nodes:  # what the kubelet did not stop: kill the tasks, drop the containers
        if process_name("containerd", node) in running:
            for task in _ctr(node, "tasks", "ls", "--quiet", timeout=10).stdout.split():
                _ctr(node, "tasks", "kill", "--signal", "SIGKILL", task, timeout=10)
                _ctr(node, "tasks", "delete", "--force", task, timeout=10)
            containers = _ctr(node, "containers", "ls", "--quiet", timeout=10).stdout.split()
            if containers:
                _ctr(node, "containers", "delete", *containers, timeout=30)
        table.stop(process_name("containerd", node))
    table.stop("coredns")
    _stop_kube_proxy(paths, table)
    table.stop(NETWORK_POLICY)  # it removes its table on the way out; a killed one's goes here
    subprocess.run(["nft", "-f", "-"], input=network_policy.removal(network_policy.table_name(name)),
                   capture_output=True, text=True, timeout=30)
    host.remove_kubelet_chains()
    host.restore_ip_forwarding(_forwarding_saved(paths))
    for node in nodes:  # shims outlive containerd by design; after a crash, containers outlive their shims
        for pid in [*host.processes_matching(str(node.containerd_socket), str(node.run_dir)),
                    *host.pids_in_cgroup(node.cgroup_root)]:
            if pid_alive(pid):
                os.kill(pid, 9)
        wait_for(cgroup_empty(node), 10, f"{node.name}'s processes gone", 0.1, error=None)
        host.unmount_all(node.run_dir, node.directory, node.containerd_root)
    wait_for(lambda: not host.veths_on(node_spec.bridge_name(name)), 10, "pod veths gone", 0.2, error=None)
    host.delete_link(node_spec.bridge_name(name))
    for link in host.log_links_into(paths.root / "realnodes"):
        link.unlink(missing_ok=True)
    for node in nodes:
        host.remove_cgroup_root(node.cgroup_root)
        host.remove_tree(node.run_dir)
    host.remove_tree(node_spec.RUN_DIR / name)
    if LOCK.exists() and LOCK.read_text().strip() == name:
        LOCK.unlink()


def leftovers(name: str, paths: ClusterPaths, count: int) -> dict[str, list[str]]:
    """What real nodes of cluster `name` left on the host; every list empty after a clean `down`."""
    nodes = [RealNode(name, i, paths.root, cache_dir(), 0) for i in range(count)]
    run_dirs = [node_spec.RUN_DIR / name, *(n.run_dir for n in nodes)]
    bridge = node_spec.bridge_name(name)
    return {
        "processes": [f"{pid} {cmd[:120]}" for pid, cmd in host.processes_matching(
            *(str(d) for d in run_dirs), str(paths.root / "realnodes")).items()]
        + [f"{pid} (in {n.cgroup_root})" for n in nodes for pid in host.pids_in_cgroup(n.cgroup_root)],
        "mounts": host.mounts_under(*run_dirs, *(n.directory for n in nodes), *(n.containerd_root for n in nodes)),
        "network_namespaces": [str(p) for d in run_dirs if d.exists() for p in d.rglob("cni-*")],
        "links": [bridge, *host.veths_on(bridge)] if host.link_exists(bridge) else [],
        "cgroups": [c for n in nodes for c in host.cgroup_roots_left(n.cgroup_root)],
        "iptables_rules": host.iptables_rules_mentioning(bridge, "CNI-", "KUBE-", "kube-proxy",
                                                         network_policy.table_name(name)),
        "container_log_links": [str(p) for p in host.log_links_into(paths.root / "realnodes")],
    }


LIFECYCLE = RealNodeLifecycle(start=start, stop=stop)
"""What `cluster.local.up/down` are given to start and stop a cluster's real nodes."""
