"""Pure description of a local cluster: ports, nodes, and the config files its processes read.

`ClusterSpec`'s field defaults are the one declaration of the local cluster's defaults (name, port base,
node shape); the CLI options, `stack_deploy` and stacks/Pulumi.local.yaml (a unit test compares them)
follow it. Everything here returns plain dicts/strings so it can be tested without starting anything; the
configuration of the controllers that run beside the cluster (JobSet's, upstream Trainer's) is in
`controller_configs`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar
from pathlib import Path

from trainyard.controller.feature_gates import parse_feature_gates
from trainyard.controller.runtime.ratelimit import UPSTREAM_BURST, UPSTREAM_QPS
from trainyard.k8s import GPU_RESOURCE, KWOK_NODE_LABEL, RACK_LABEL, SPINE_LABEL
from trainyard.tenant_policy import DEFAULT_GANG_START_TIMEOUT_SECONDS, DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS, RECLAIM_CHOICES
from trainyard.cluster.real_node_spec import MAX_REAL_NODES, SERVICE_CIDR, apiserver_cert_sans, dns_address

VOLCANO_NAMESPACE = "volcano-system"
SCHEDULER_CONFIGMAP = "volcano-scheduler-configmap"
SCHEDULER_CONF_KEY = "volcano-scheduler.conf"
# Which TrainJob controller a local cluster runs: trainyard's, or Kubeflow Trainer's own (the oracle).
TRAINJOB_CONTROLLERS = ("trainyard", "upstream")
# How the cluster runs: kwok (the default, no container engine needed) or kind.
PROVIDERS = ("kwok", "kind")

_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")


@dataclass(frozen=True)
class Ports:
    """Explicit loopback ports for every listener, so two clusters never collide silently."""

    base: int

    OFFSETS: ClassVar[dict[str, int]] = {
        "apiserver": 0, "etcd": 1, "etcd_peer": 2, "kcm": 3, "scheduler": 4, "kwok": 5,
        "jobset_webhook": 10, "jobset_metrics": 11, "jobset_health": 12,
        "volcano_scheduler_metrics": 20, "volcano_scheduler_healthz": 21,
        "volcano_controller_healthz": 22, "volcano_controller_metrics": 23, "volcano_webhook": 24,
        "controller_metrics": 30, "controller_webhook": 31, "controller_health": 32, "controller_status": 33,
        "kube_proxy_healthz": 38, "kube_proxy_metrics": 39,
        "prometheus": 50, "kube_state_metrics": 51, "kube_state_metrics_telemetry": 52,
    }

    OFFSETS.update({f"kubelet_healthz_{i}": 40 + i for i in range(MAX_REAL_NODES)})  # one per real node

    def port(self, name: str) -> int:
        return self.base + self.OFFSETS[name]

    def all(self) -> dict[str, int]:
        return {name: self.base + offset for name, offset in self.OFFSETS.items()}


@dataclass(frozen=True)
class ClusterSpec:
    """What `trainyard cluster up` builds. Validated on construction."""

    name: str = "trainyard"
    nodes: int = 4
    gpus_per_node: int = 8
    gpu_product: str = "NVIDIA-H100-80GB-HBM3"
    racks: int = 2
    spines: int = 1
    """Racks are spread over spines in contiguous blocks, as nodes are over racks."""
    cpu_per_node: int = 96
    memory_gib_per_node: int = 1024
    port_base: int = 26400
    zone: str = "local-a"
    # The local platform tries alpha features upstream ships off: training code can report progress.
    feature_gates: str = "TrainJobStatus=true"
    trainjob_controller: str = "trainyard"
    # Client-side API limits of the TrainJob controller, either one: upstream's defaults; negative qps: none.
    controller_qps: float = UPSTREAM_QPS
    controller_burst: int = UPSTREAM_BURST
    start_estimates_every: float = 15.0
    """Seconds between the controller's rounds of start-estimate Events on waiting TrainJobs (0: none; the
    controller benchmarks turn it off, as upstream has nothing like it)."""
    budgets_every: float = 60.0
    """Seconds between the controller's rounds of tenant budget enforcement (with monitoring only: it reads the
    GPU-hours from the cluster's Prometheus; 0: none)."""
    stalled_after: float = 1800.0
    """Seconds a TrainJob may hold GPUs with no trainerStatus progress before the controller flags it stalled."""
    gang_start_timeout: float = DEFAULT_GANG_START_TIMEOUT_SECONDS
    """Seconds an admitted gang may hold its queue while its pods are refused for a reason that may pass."""
    node_loss_release_after: float = DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS
    """Seconds after its grace period before an evicted TrainJob pod of a lost node is deleted for good (-1: never)."""
    reclaim: str = "none"
    """The controller's gang-aware reclaim (`trainyard controller run --reclaim`): none, or its rule. It takes back
    what elastic queues lend, so it matters only once the stack's `scheduler.queuePlugin` is `capacity`."""
    reclaim_holds: bool = True
    monitoring: bool = True
    """kube-state-metrics and Prometheus with trainyard's usage rules (`cluster.monitoring`); benchmarks and the
    test clusters that do not read usage turn it off."""
    real_nodes: int = 0
    """Real kubelets (with containerd, CNI and CoreDNS) started beside the simulated GPU nodes (root only)."""
    timed_pods: bool = True
    """kwok completes a pod after the delay in its `pod-complete.stage.kwok.x-k8s.io/delay` annotation (any
    owner), not as soon as it runs (pods of Jobs only): benchmarks replay job durations with it, and on `make up`'s
    cluster a TrainJob given a run time that way holds its GPUs that long (what `trainyard usage` counts). A pod
    without the annotation completes at once either way."""
    extra: dict = field(default_factory=dict)

    @property
    def node_lease_seconds(self) -> int:
        """How long a simulated node's lease lasts (kwok renews it at a quarter of that): Kubernetes' 40 s, so a
        node that dies (`cluster node-down`) is NotReady within the node controller's grace of 50 s, as in a real
        cluster. Above SMALL_CLUSTER_NODES nodes kwokctl's 200 s: the renewals of a thousand nodes every 10 s
        would load a 2-core control plane."""
        return 40 if self.nodes <= SMALL_CLUSTER_NODES else 200

    def __post_init__(self) -> None:
        problems = []
        if not _NAME.match(self.name):
            problems.append(f"--name {self.name!r}: use lowercase letters, digits and '-', at most 32 characters")
        if self.nodes < 1:
            problems.append(f"--nodes {self.nodes}: a cluster needs at least 1 node")
        if self.gpus_per_node < 0:
            problems.append(f"--gpus-per-node {self.gpus_per_node}: must be 0 or more")
        try:
            parse_feature_gates(self.feature_gates)
        except ValueError as err:
            problems.append(f"--feature-gates: {err}")
        if self.trainjob_controller not in TRAINJOB_CONTROLLERS:
            problems.append(f"--trainjob-controller {self.trainjob_controller!r}: use one of "
                            f"{', '.join(TRAINJOB_CONTROLLERS)}")
        if self.reclaim not in RECLAIM_CHOICES:
            problems.append(f"--reclaim {self.reclaim!r}: use one of {', '.join(RECLAIM_CHOICES)}")
        if not 0 <= self.real_nodes <= MAX_REAL_NODES:
            problems.append(f"--real-nodes {self.real_nodes}: choose 0 to {MAX_REAL_NODES} (each runs a kubelet "
                            "and a containerd on this machine)")
        if self.racks < 1 or self.racks > self.nodes:
            problems.append(f"--racks {self.racks}: must be between 1 and the number of nodes ({self.nodes})")
        if self.spines < 1 or self.spines > self.racks:
            problems.append(f"--spines {self.spines}: must be between 1 and the number of racks ({self.racks})")
        low, high = ephemeral_port_range()
        last = self.port_base + max(Ports.OFFSETS.values()) + 10
        if not 1024 <= self.port_base <= 65000:
            problems.append(f"--port-base {self.port_base}: choose a port between 1024 and 65000")
        elif self.port_base <= high and last >= low:
            problems.append(f"--port-base {self.port_base}: ports {self.port_base}-{last} overlap the kernel's "
                            f"ephemeral range {low}-{high}, where client connections can take them; "
                            f"choose a base below {low - (last - self.port_base)} (default {ClusterSpec.port_base})")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def ports(self) -> Ports:
        return Ports(self.port_base)

    @property
    def kube_context(self) -> str:
        """The context kwokctl writes into the cluster's kubeconfig."""
        return kube_context(self.name)


def kube_context(cluster: str) -> str:
    return f"kwok-{cluster}"


def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (listeners there can lose their port)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            low, high = handle.read().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def node_name(index: int) -> str:
    return f"gpu-node-{index}"


def rack_name(rack: int) -> str:
    return f"rack-{rack}"


def spine_name(spine: int) -> str:
    return f"spine-{spine}"


def block_of(index: int, items: int, blocks: int) -> int:
    """The block item `index` falls in when `items` are spread over `blocks` in contiguous blocks of equal size (the
    last one shorter): how the local cluster puts nodes in racks and racks under spines."""
    return index // -(-items // blocks)


def rack_of(index: int, spec: ClusterSpec) -> int:
    """Nodes are spread over racks in contiguous blocks (rack-0 gets the first nodes)."""
    return block_of(index, spec.nodes, spec.racks)


def spine_of_rack(rack: int, spec: ClusterSpec) -> int:
    """Racks are spread over spines in contiguous blocks (spine-0 gets the first racks)."""
    return block_of(rack, spec.racks, spec.spines)


def gpu_node(index: int, spec: ClusterSpec) -> dict:
    """A simulated GPU node; status is set on create (the API server allows it for Nodes)."""
    name = node_name(index)
    resources = {
        "cpu": str(spec.cpu_per_node),
        "memory": f"{spec.memory_gib_per_node}Gi",
        "pods": "110",
        "ephemeral-storage": "2Ti",
        GPU_RESOURCE: str(spec.gpus_per_node),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1],
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": spec.gpu_product,
                "nvidia.com/gpu.count": str(spec.gpus_per_node),
                "topology.kubernetes.io/region": "local",
                "topology.kubernetes.io/zone": spec.zone,
                RACK_LABEL: rack_name(rack_of(index, spec)),
                SPINE_LABEL: spine_name(spine_of_rack(rack_of(index, spec), spec)),
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "fake"},
            "phase": "Running",
        },
    }


def gpu_nodes(spec: ClusterSpec) -> list[dict]:
    return [gpu_node(i, spec) for i in range(spec.nodes)]


QUOTA_RESYNC = "10s"
"""kube-controller-manager's ResourceQuota resync (default 5m). A quota created before the controller has
discovered a new CRD (it looks every 30 s) has no usage for `count/<crd>` until the next resync, and the API
server refuses every TrainJob in that namespace until then ("status unknown for quota"). `platform up`
waits for every tenant quota's usage, so on a fresh cluster this bounds the wait."""


HOST_PATH_VOLUMES = Path("/tmp/hostpath_pv")
"""Where kube-controller-manager's in-tree hostPath provisioner (`--enable-hostpath-provisioner`, the one
`hack/local-up-cluster.sh` uses) makes a directory per volume, and the only place its deleter removes them from.
Every node of a local cluster is on this host, so a volume is the same directory wherever its pods run."""
STORAGE_CLASS = "standard"


def default_storage_class() -> dict:
    """The local cluster's default StorageClass (named like kind's): PVCs without a class, such as the
    `initializer` volume a staged runtime's `volumeClaimPolicies` asks JobSet for, are bound at once to a
    fresh host directory and removed with their claim."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}


WEBHOOK_CLIENT_USER = "kube-apiserver-webhook-client"


def webhook_admission_files(cert: Path, key: Path, kubeconfig_file: Path) -> tuple[dict, dict]:
    """(AdmissionConfiguration, kubeconfig to write at `kubeconfig_file`) that make the API server present `cert` to
    every admission webhook it calls ("*": trainyard's, and JobSet's, which ignore it), so trainyard's webhook can
    answer the API server alone (`trainyard controller run --webhook-client-ca`)."""
    kubeconfig = {"apiVersion": "v1", "kind": "Config",
                  "users": [{"name": "*", "user": {"client-certificate": str(cert), "client-key": str(key)}}]}
    config = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": [
        {"name": name, "configuration": {"apiVersion": "apiserver.config.k8s.io/v1",
                                         "kind": "WebhookAdmissionConfiguration", "kubeConfigFile": str(kubeconfig_file)}}
        for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")]}
    return config, kubeconfig


def kwokctl_config(spec: ClusterSpec, binaries: dict[str, Path], kubelet_client: tuple[Path, Path] | None = None,
                   admission_config: Path | None = None) -> dict:
    """KwokctlConfiguration for the binary runtime: local binaries only, everything on 127.0.0.1.
    `admission_config`: the API server's AdmissionConfiguration file (its webhook client certificate)."""
    ports = spec.ports
    return {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": {
            "runtime": "binary",
            "bindAddress": "127.0.0.1",
            "securePort": True,
            "kubeAuthorization": True,
            "kubeAdmission": True,
            "quietPull": True,
            "kubeApiserverPort": ports.port("apiserver"),
            "etcdPort": ports.port("etcd"),
            "etcdPeerPort": ports.port("etcd_peer"),
            "kubeControllerManagerPort": ports.port("kcm"),
            "kubeSchedulerPort": ports.port("scheduler"),
            "kwokControllerPort": ports.port("kwok"),
            "kubeApiserverBinary": str(binaries["kube-apiserver"]),
            "kubeControllerManagerBinary": str(binaries["kube-controller-manager"]),
            "kubeSchedulerBinary": str(binaries["kube-scheduler"]),
            "kubectlBinary": str(binaries["kubectl"]),
            "etcdBinary": str(binaries["etcd"]),
            "etcdctlBinary": str(binaries["etcdctl"]),
            "kwokControllerBinary": str(binaries["kwok"]),
            **({"kubeApiserverCertSANs": apiserver_cert_sans()} if spec.real_nodes else {}),
        },
        "componentsPatches": [{"name": "kube-controller-manager", "extraArgs": [
            {"key": "resource-quota-sync-period", "value": QUOTA_RESYNC},
            {"key": "enable-hostpath-provisioner", "value": "true"},
            # kwokctl sets 25 s and 3m20s for its 200 s leases; these follow the lease (Kubernetes: 5 s, 50 s)
            {"key": "node-monitor-period", "value": "5s", "override": True},
            {"key": "node-monitor-grace-period", "value": f"{spec.node_lease_seconds + 10}s", "override": True}]},
            {"name": "kwok-controller", "extraArgs": [
                *KWOK_MANAGES_ANNOTATED_NODES,
                {"key": "node-lease-duration-seconds", "value": str(spec.node_lease_seconds), "override": True}]},
            *merged_apiserver_patches(real_node_patches(spec, kubelet_client), admission_config)],
    }


KWOK_MANAGES_ANNOTATED_NODES = [
    {"key": "manage-all-nodes", "value": "false", "override": True},
    {"key": "manage-nodes-with-label-selector", "value": "=".join(KWOK_NODE_LABEL)}]
"""kwok keeps alive only the nodes annotated as simulated: real kubelets' nodes are left alone, and a simulated
node that loses the annotation dies (`cluster node-down`)."""
SMALL_CLUSTER_NODES = 128


def merged_apiserver_patches(patches: list[dict], admission_config: Path | None) -> list[dict]:
    """`patches` with the admission config flag in their kube-apiserver patch (one patch per component)."""
    if admission_config is None:
        return patches
    flag = {"key": "admission-control-config-file", "value": str(admission_config)}
    out = [dict(p) for p in patches]
    for patch in out:
        if patch["name"] == "kube-apiserver":
            patch["extraArgs"] = [*patch["extraArgs"], flag]
            return out
    return out + [{"name": "kube-apiserver", "extraArgs": [flag]}]


def pod_reachable_addresses(spec: ClusterSpec) -> tuple[str, ...]:
    """Host addresses pods on real nodes reach (the pod bridge's first address), where the controller's status
    server listens for them and which its serving certificate names; none without real nodes (kwok's pods post
    nothing)."""
    return (dns_address(),) if spec.real_nodes else ()


def real_node_patches(spec: ClusterSpec, kubelet_client: tuple[Path, Path] | None) -> list[dict]:
    """With real nodes (which kwok leaves alone: it manages only nodes annotated as simulated): the API server
    reaches kubelets by InternalIP (node names do not resolve here) with a client certificate the kubelets trust;
    and pods reach the API server: it listens on every address and advertises the pod bridge's first address as
    the `kubernetes` Service's endpoint."""
    if not spec.real_nodes:
        return []
    if kubelet_client is None:
        raise ValueError("a cluster with real nodes needs the API server's kubelet client certificate")
    cert, key = kubelet_client
    return [
        {"name": "kube-apiserver", "extraArgs": [
            {"key": "kubelet-preferred-address-types", "value": "InternalIP"},
            {"key": "kubelet-client-certificate", "value": str(cert)},
            {"key": "kubelet-client-key", "value": str(key)},
            {"key": "bind-address", "value": "0.0.0.0", "override": True},
            {"key": "advertise-address", "value": dns_address()},
            {"key": "service-cluster-ip-range", "value": SERVICE_CIDR}]},
    ]
