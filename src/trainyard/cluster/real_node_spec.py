"""Pure description of real nodes: names, addresses, directories and the config files their processes read.

One host runs N kubelets, each with its own containerd, so every per-node resource is named here: the kubelet's
root dir, healthz port and cgroup root; containerd's root, state, socket and runc root; a host-local IP range
on the shared bridge. Shared by all nodes of a cluster: the bridge, one CoreDNS on the bridge's first address,
the CNI binaries and the images (imported into each containerd).

Pods have no default route: their traffic stays on the host bridge, except for the Service range, which they
reach through the host (the bridge's first address). One kube-proxy (nftables mode) serves every real node, as
they share the host's network namespace: a ClusterIP that leads to the API server is delivered locally, one
that leads to a pod is forwarded back onto the bridge (IP forwarding is on while real nodes run, and restored
by `down`). The API server listens on every address and advertises the bridge's first address, so the
`kubernetes` Service works from pods as in any cluster.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from trainyard.k8s import GPU_RESOURCE, TRAINYARD_DOMAIN

POD_CIDR = "10.244.0.0/16"
SERVICE_CIDR = "10.0.0.0/24"
"""The API server's Service range (its default, passed explicitly so kube-proxy, the pods' route and the
host's route agree with it); the `kubernetes` Service is its first address."""
CLUSTER_DOMAIN = "cluster.local"
MAX_REAL_NODES = 8
REAL_NODE_LABEL = f"{TRAINYARD_DOMAIN}/real-node"
"""Label and NoSchedule taint of real nodes: only pods that ask (nodeSelector + toleration) land there, so the
platform's simulated workload never tries to run on a real kubelet."""
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
KUBELET_CLIENT_GROUPS = ("system:masters",)
RUN_DIR = Path("/run/trainyard")
"""Sockets and runtime state: short paths (a unix socket path has 108 bytes) on tmpfs."""


def real_node_name(index: int) -> str:
    return f"real-node-{index}"


def bridge_name(cluster: str) -> str:
    """A Linux interface name (at most 15 characters) unique to the cluster."""
    return "tyb" + hashlib.sha256(cluster.encode()).hexdigest()[:8]


def dns_address(cidr: str = POD_CIDR) -> str:
    """CoreDNS listens on the bridge's first address."""
    return str(ipaddress.ip_network(cidr)[1])


def kubernetes_service_address(service_cidr: str = SERVICE_CIDR) -> str:
    return str(ipaddress.ip_network(service_cidr)[1])


def apiserver_cert_sans(cidr: str = POD_CIDR, service_cidr: str = SERVICE_CIDR) -> list[str]:
    """Names and addresses pods use for the API server: in-cluster clients dial the `kubernetes` Service's
    ClusterIP and verify the serving certificate against it."""
    return [dns_address(cidr), kubernetes_service_address(service_cidr), "kubernetes", "kubernetes.default",
            "kubernetes.default.svc", f"kubernetes.default.svc.{CLUSTER_DOMAIN}"]


@dataclass(frozen=True)
class RealNode:
    """One real kubelet and its containerd."""

    cluster: str
    index: int
    cluster_root: Path  # the cluster's directory (per-node files under realnodes/<name>/)
    cache_root: Path  # ~/.cache/trainyard: containerd's root (imported images) outlives the cluster
    healthz_port: int
    cidr: str = POD_CIDR

    @property
    def name(self) -> str:
        return real_node_name(self.index)

    @property
    def _network(self) -> ipaddress.IPv4Network:
        network = ipaddress.ip_network(self.cidr)
        assert isinstance(network, ipaddress.IPv4Network)
        return network

    @property
    def ip(self) -> str:
        """The node's address (kubelet API, InternalIP): a secondary address on the bridge, x.y.<index+1>.1."""
        return str(self._network[(self.index + 1) * 256 + 1])

    @property
    def pod_range(self) -> tuple[str, str]:
        base = (self.index + 1) * 256
        return str(self._network[base + 10]), str(self._network[base + 250])

    @property
    def directory(self) -> Path:
        return self.cluster_root / "realnodes" / self.name

    @property
    def run_dir(self) -> Path:
        return RUN_DIR / self.cluster / self.name

    @property
    def containerd_root(self) -> Path:
        """Persistent across clusters, so an image is imported once per node name, not once per `cluster up`."""
        return self.cache_root / "containerd" / self.name

    @property
    def containerd_socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def cgroup_root(self) -> str:
        return f"/trainyard-{self.cluster}-{self.name}"


def containerd_config(node: RealNode, *, pause_ref: str, runc: Path, cni_bin: Path) -> str:
    """containerd 2.x config (version 3): every path of its own, NRI off (one shared socket otherwise), the
    CRI with the locally built pause image, runc by path, and netns files under its state dir so `down` finds them.

    restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and runc fails to lower a sandbox's oom_score_adj.
    """
    return f"""version = 3
root = "{node.containerd_root}"
state = "{node.run_dir / 'containerd'}"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{node.containerd_socket}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause_ref}"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{node.run_dir / 'runc'}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{node.directory / 'cni'}"

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def cni_conflist(node: RealNode, bridge: str, service_cidr: str = SERVICE_CIDR) -> dict:
    """bridge + host-local on the shared bridge, this node's own range and lease dir; no default gateway, no
    masquerade; one route, to the Service range through the host, where kube-proxy translates ClusterIPs."""
    start, end = node.pod_range
    return {
        "cniVersion": "1.0.0",
        "name": "trainyard",
        "plugins": [{
            "type": "bridge", "bridge": bridge, "isGateway": False, "ipMasq": False, "hairpinMode": True,
            "ipam": {"type": "host-local", "dataDir": str(node.directory / "ipam"),
                     "ranges": [[{"subnet": node.cidr, "rangeStart": start, "rangeEnd": end}]],
                     "routes": [{"dst": service_cidr, "gw": dns_address(node.cidr)}]},
        }],  # containerd sets up the pods' loopback itself (with the `loopback` binary from bin_dirs)
    }


POD_MEMORY_SHARE = 0.75
"""Of the host's memory, what the real nodes' pods may use together; the rest stays for the host, the control
plane and the simulated nodes."""


def system_reserved_memory(host_memory_bytes: int, nodes_on_host: int) -> str:
    """What each kubelet reserves so that its pods together get their share of the host: every real node reads
    the whole host as its capacity, so without a reservation N nodes would each offer all of it."""
    per_node = int(host_memory_bytes * POD_MEMORY_SHARE) // max(1, nodes_on_host)
    return f"{max(0, host_memory_bytes - per_node) // 2**20}Mi"


def kubelet_config(node: RealNode, *, client_ca: Path, resolv_conf: Path, system_reserved_memory: str) -> dict:
    """KubeletConfiguration: cgroup v1 with cgroupfs under the node's own cgroup root; the API server is the
    only client it trusts (client certificate from its own CA, requests authorized by the API server). Node
    allocatable is reserved and enforced (the pods' cgroup is capped at it), as on a production node."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": True,
        "cgroupRoot": node.cgroup_root,
        "enforceNodeAllocatable": ["pods"],
        "systemReserved": {"memory": system_reserved_memory},
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "address": node.ip,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": node.healthz_port,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(client_ca)}},
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [dns_address(node.cidr)],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv_conf),
        "failSwapOn": False,
        "podLogsDir": str(node.directory / "pod-logs"),  # each kubelet removes pod logs it does not own
        "volumePluginDir": str(node.directory / "volume-plugins"),
        "registerWithTaints": [{"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}],
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "maxPods": 32,
    }


def kubelet_argv(node: RealNode, *, kubelet: Path, config: Path, kubeconfig: Path) -> list[str]:
    return [str(kubelet), f"--config={config}", f"--kubeconfig={kubeconfig}", f"--root-dir={node.directory / 'kubelet'}",
            f"--cert-dir={node.directory / 'kubelet' / 'pki'}", f"--hostname-override={node.name}",
            f"--node-ip={node.ip}", f"--node-labels={REAL_NODE_LABEL}=true", "--v=2"]


def kube_proxy_config(*, kubeconfig: Path, node_name: str, healthz_port: int, metrics_port: int,
                      cidr: str = POD_CIDR) -> dict:
    """KubeProxyConfiguration for the one kube-proxy of the host's real nodes: nftables mode (one table of its
    own, which `--cleanup` removes whole), health and metrics on loopback, and no conntrack sysctl changes
    (0 = leave the host's values as they are)."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "mode": "nftables",
        "clusterCIDR": cidr,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }


def corefile(kubeconfig: Path, cidr: str = POD_CIDR) -> str:
    """CoreDNS on the bridge: the cluster domain (and reverse zones) from the API server; any other name
    NXDOMAIN, as there is no upstream here. Two server blocks: CoreDNS runs its plugins in a fixed order
    (`template` before `kubernetes`), so a catch-all in the cluster's block would answer every name."""
    address = dns_address(cidr)
    return f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{
    bind {address}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        ttl 5
    }}
}}
.:53 {{
    bind {address}
    errors
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
"""


def node_labels(node: RealNode, *, gpus: int, gpu_product: str, rack: str, spine: str, zone: str,
                rack_label: str, spine_label: str) -> dict[str, str]:
    """The labels kwok's GPU nodes carry, with `type: real`, so Volcano's topology and selectors treat both alike."""
    return {
        REAL_NODE_LABEL: "true",
        "type": "real",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": gpu_product,
        "nvidia.com/gpu.count": str(gpus),
        "topology.kubernetes.io/region": "local",
        "topology.kubernetes.io/zone": zone,
        rack_label: rack,
        spine_label: spine,
    }


def gpu_capacity_patch(gpus: int) -> list[dict]:
    """A JSON patch of the node's status advertising `gpus` GPUs (the documented way to advertise an extended
    resource without a device plugin: the kubelet keeps capacity it does not manage). Containers get no device:
    pods asking for GPUs are admitted and run on CPU."""
    key = GPU_RESOURCE.replace("/", "~1")
    return [{"op": "add", "path": f"/status/capacity/{key}", "value": str(gpus)},
            {"op": "add", "path": f"/status/allocatable/{key}", "value": str(gpus)}]
