"""Real nodes' names, addresses and config files: several kubelets on one host must share nothing by accident."""

import ipaddress
import tomllib
from pathlib import Path

import pytest

from trainyard.cluster.spec import ClusterSpec, gpu_nodes, kwokctl_config, real_node_patches
from trainyard.cluster import real_node_spec as S

BINARIES = {name: Path(f"/bin/{name}") for name in (
    "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "etcdctl", "kwok")}


def nodes(count: int = 3) -> list[S.RealNode]:
    return [S.RealNode("trainyard", i, Path("/c/clusters/trainyard"), Path("/c"), 26440 + i) for i in range(count)]


def test_each_node_has_its_own_address_range_dirs_socket_and_cgroup():
    many = nodes(S.MAX_REAL_NODES)
    for attribute in ("name", "ip", "pod_range", "directory", "run_dir", "containerd_root", "containerd_socket",
                      "cgroup_root", "healthz_port"):
        values = [getattr(n, attribute) for n in many]
        assert len(set(values)) == len(values), attribute
    network = ipaddress.ip_network(S.POD_CIDR)
    addresses = {ipaddress.ip_address(n.ip) for n in many} | {ipaddress.ip_address(a) for n in many for a in n.pod_range}
    assert all(a in network for a in addresses)
    assert ipaddress.ip_address(S.dns_address()) not in addresses
    ranges = sorted((ipaddress.ip_address(n.pod_range[0]), ipaddress.ip_address(n.pod_range[1])) for n in many)
    assert all(end < next_start for (_, end), (next_start, _) in zip(ranges, ranges[1:])), "ranges overlap"
    assert all(len(str(n.containerd_socket)) < 108 for n in many), "unix socket paths have 108 bytes"


@pytest.mark.parametrize("cluster", ["trainyard", "a-very-long-cluster-name-of-32-ch", "x"])
def test_bridge_name_fits_a_linux_interface_name(cluster):
    name = S.bridge_name(cluster)
    assert len(name) <= 15 and name.isalnum()
    assert name != S.bridge_name(cluster + "2")


def test_containerd_configs_share_no_path_and_keep_the_sandbox_oom_score():
    configs = [tomllib.loads(S.containerd_config(n, pause_ref="trainyard.local/pause:x", runc=Path("/r/runc"),
                                                 cni_bin=Path("/cni"))) for n in nodes()]
    for key in (lambda c: c["root"], lambda c: c["state"], lambda c: c["grpc"]["address"],
                lambda c: c["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["runc"]["options"]["Root"],
                lambda c: c["plugins"]["io.containerd.cri.v1.runtime"]["cni"]["conf_dir"]):
        assert len({key(c) for c in configs}) == len(configs)
    config = configs[0]
    assert config["version"] == 3
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True, "root lacks CAP_SYS_RESOURCE here: runc fails without it"
    assert runtime["netns_mounts_under_state_dir"] is True, "down finds network namespaces under the state dir"
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["BinaryName"] == "/r/runc"
    assert config["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == "trainyard.local/pause:x"
    assert "io.containerd.nri.v1.nri" in config["disabled_plugins"], "NRI's socket is one per host"


def test_cni_keeps_pod_traffic_on_the_bridge_but_for_services():
    node = nodes()[1]
    (plugin,) = S.cni_conflist(node, "tyb0")["plugins"]
    assert (plugin["type"], plugin["bridge"], plugin["isGateway"], plugin["ipMasq"]) == ("bridge", "tyb0", False, False)
    ((pod_range,),) = plugin["ipam"]["ranges"]
    assert (pod_range["subnet"], pod_range["rangeStart"], pod_range["rangeEnd"]) == (S.POD_CIDR, *node.pod_range)
    assert plugin["ipam"]["dataDir"].startswith(str(node.directory))
    assert plugin["ipam"]["routes"] == [{"dst": S.SERVICE_CIDR, "gw": S.dns_address()}], \
        "no default route: only ClusterIPs go through the host, where kube-proxy translates them"
    assert ipaddress.ip_address(S.dns_address()) in ipaddress.ip_network(S.POD_CIDR), "the gateway is on-link"
    assert not ipaddress.ip_network(S.SERVICE_CIDR).overlaps(ipaddress.ip_network(S.POD_CIDR))


def test_pods_reach_the_api_server_through_the_kubernetes_service():
    config = kwokctl_config(ClusterSpec(real_nodes=1), BINARIES, (Path("/c.crt"), Path("/c.key")))
    apiserver = {a["key"]: a for p in config["componentsPatches"] if p["name"] == "kube-apiserver"
                 for a in p["extraArgs"]}
    assert apiserver["bind-address"] == {"key": "bind-address", "value": "0.0.0.0", "override": True}
    assert apiserver["advertise-address"]["value"] == S.dns_address(), "the kubernetes Service's endpoint, on the bridge"
    assert apiserver["service-cluster-ip-range"]["value"] == S.SERVICE_CIDR
    sans = config["options"]["kubeApiserverCertSANs"]
    assert {S.kubernetes_service_address(), S.dns_address(), "kubernetes.default.svc"} <= set(sans), \
        "in-cluster clients verify the serving certificate against the ClusterIP they dial"
    assert S.kubernetes_service_address() == "10.0.0.1"
    assert "kubeApiserverCertSANs" not in kwokctl_config(ClusterSpec(), BINARIES)["options"], "make up unchanged"


def test_one_kube_proxy_serves_the_hosts_real_nodes_without_touching_conntrack():
    config = S.kube_proxy_config(kubeconfig=Path("/kc"), node_name="real-node-0", healthz_port=1, metrics_port=2)
    assert config["mode"] == "nftables", "one table of its own: --cleanup removes it whole"
    assert config["clusterCIDR"] == S.POD_CIDR and config["hostnameOverride"] == "real-node-0"
    assert config["healthzBindAddress"] == "127.0.0.1:1" and config["metricsBindAddress"] == "127.0.0.1:2"
    assert config["conntrack"]["maxPerCore"] == 0 and config["conntrack"]["tcpEstablishedTimeout"] == "0s", \
        "0 leaves the host's conntrack sysctls as they are"
    ports = ClusterSpec().ports
    assert {ports.port("kube_proxy_healthz"), ports.port("kube_proxy_metrics")} <= set(ports.all().values())


def test_kubelet_trusts_only_the_api_server_and_is_tainted():
    node = nodes()[0]
    config = S.kubelet_config(node, client_ca=Path("/ca.crt"), resolv_conf=Path("/resolv.conf"),
                              system_reserved_memory="1Gi")
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authentication"]["x509"]["clientCAFile"] == "/ca.crt"
    assert config["authorization"]["mode"] == "Webhook"
    assert config["address"] == node.ip and config["readOnlyPort"] == 0
    assert config["cgroupRoot"] == node.cgroup_root and config["failCgroupV1"] is False
    assert config["registerWithTaints"] == [{"key": S.REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}]
    assert config["clusterDNS"] == [S.dns_address()]
    assert config["imageGCHighThresholdPercent"] == 100, "imported images cannot be pulled again: never collect them"
    argv = S.kubelet_argv(node, kubelet=Path("/k"), config=Path("/k.yaml"), kubeconfig=Path("/kc"))
    assert f"--node-ip={node.ip}" in argv and f"--hostname-override={node.name}" in argv


@pytest.mark.parametrize("host_gib, nodes_on_host, reserved", [
    (24, 2, "15360Mi"),  # 18 GiB for pods, 9 GiB each: each kubelet keeps back 15 of the 24 it sees
    (24, 1, "6144Mi"),
    (64, 4, "53248Mi"),
])
def test_each_real_node_offers_its_share_of_the_host_and_enforces_it(host_gib, nodes_on_host, reserved):
    assert S.system_reserved_memory(host_gib * 2**30, nodes_on_host) == reserved
    config = S.kubelet_config(nodes()[0], client_ca=Path("/ca.crt"), resolv_conf=Path("/r"), system_reserved_memory=reserved)
    assert config["enforceNodeAllocatable"] == ["pods"] and config["systemReserved"] == {"memory": reserved}


def test_corefile_serves_the_cluster_domain_on_the_bridge_and_nothing_else():
    text = S.corefile(Path("/kc.yaml"))
    assert f"bind {S.dns_address()}" in text and "kubernetes cluster.local" in text and "kubeconfig /kc.yaml" in text
    assert "forward" not in text and "rcode NXDOMAIN" in text


def test_real_nodes_carry_the_simulated_nodes_gpu_labels_and_capacity():
    from trainyard.cluster.spec import gpu_node
    from trainyard.k8s import RACK_LABEL, SPINE_LABEL

    spec = ClusterSpec()
    simulated = gpu_node(0, spec)["metadata"]["labels"]
    real = S.node_labels(nodes()[0], gpus=8, gpu_product=spec.gpu_product, rack="rack-0", spine="spine-0",
                         zone=spec.zone, rack_label=RACK_LABEL, spine_label=SPINE_LABEL)
    shared = {k: v for k, v in simulated.items() if k not in ("kubernetes.io/hostname", "kubernetes.io/os",
                                                               "kubernetes.io/arch", "type", "kwok.x-k8s.io/node")}
    assert shared.items() <= real.items()
    assert real["type"] == "real" and "kwok.x-k8s.io/node" not in real, "kwok must leave a real kubelet's node alone"
    patch = S.gpu_capacity_patch(8)
    assert {op["path"] for op in patch} == {"/status/capacity/nvidia.com~1gpu", "/status/allocatable/nvidia.com~1gpu"}


def test_kwok_keeps_only_simulated_nodes_alive_and_the_api_server_reaches_kubelets_by_ip():
    """kwok manages the nodes annotated as simulated, with real nodes or without: a real kubelet's node is left
    alone, and a simulated node that loses the annotation dies (`cluster node-down`)."""
    assert real_node_patches(ClusterSpec(), None) == []
    config = kwokctl_config(ClusterSpec(real_nodes=2), BINARIES, (Path("/c.crt"), Path("/c.key")))
    patches = {p["name"]: {a["key"]: a for a in p["extraArgs"]} for p in config["componentsPatches"]}
    assert patches["kwok-controller"]["manage-all-nodes"] == {"key": "manage-all-nodes", "value": "false", "override": True}
    assert patches["kwok-controller"]["manage-nodes-with-label-selector"]["value"] == "kwok.x-k8s.io/node=fake"
    assert patches["kube-apiserver"]["kubelet-preferred-address-types"]["value"] == "InternalIP"
    assert patches["kube-apiserver"]["kubelet-client-certificate"]["value"] == "/c.crt"
    with pytest.raises(ValueError):
        kwokctl_config(ClusterSpec(real_nodes=1), BINARIES, None)
    simulated = kwokctl_config(ClusterSpec(), BINARIES)
    assert [p["name"] for p in simulated["componentsPatches"]] == ["kube-controller-manager", "kwok-controller"]
    assert {a["key"]: a["value"] for a in simulated["componentsPatches"][1]["extraArgs"]} == {
        "manage-all-nodes": "false", "manage-nodes-with-label-selector": "kwok.x-k8s.io/node=fake",
        "node-lease-duration-seconds": "40"}
    kcm = {a["key"]: a["value"] for a in simulated["componentsPatches"][0]["extraArgs"]}
    assert (kcm["node-monitor-grace-period"], kcm["node-monitor-period"]) == ("50s", "5s"), "a lost node seen in 50 s"
    large = kwokctl_config(ClusterSpec(nodes=1000), BINARIES)
    assert {a["key"]: a["value"] for a in large["componentsPatches"][1]["extraArgs"]}["node-lease-duration-seconds"] \
        == "200", "a thousand leases renewed every 10 s would load the control plane"
    assert all(n["metadata"]["labels"]["kwok.x-k8s.io/node"] == "fake" for n in gpu_nodes(ClusterSpec()))


@pytest.mark.parametrize("count,ok", [(0, True), (2, True), (S.MAX_REAL_NODES, True), (-1, False),
                                      (S.MAX_REAL_NODES + 1, False)])
def test_real_node_count_is_validated(count, ok):
    if ok:
        assert ClusterSpec(real_nodes=count).real_nodes == count
    else:
        with pytest.raises(ValueError, match="--real-nodes"):
            ClusterSpec(real_nodes=count)


def test_every_real_node_has_a_healthz_port_in_the_cluster_range():
    ports = ClusterSpec().ports
    healthz = [ports.port(f"kubelet_healthz_{i}") for i in range(S.MAX_REAL_NODES)]
    assert set(healthz) <= set(ports.all().values()), "checked free at up, waited for at down"
    assert len(set(ports.all().values())) == len(ports.all()), "no two listeners share a port"


def test_kubelet_config_uses_only_fields_of_the_pinned_kubelet():
    """The kubelet decodes its config leniently: a misspelt field is ignored with a log line (podLogsDirectory
    for podLogsDir once sent every node's logs to the shared /var/log/pods, where each kubelet deleted the
    others' as orphans). So check the names against the pinned module's KubeletConfiguration."""
    import re

    from trainyard.toolchain.modules import module_dir
    from trainyard.toolchain.versions import tool

    source = (module_dir(tool("kube-node"), "k8s.io/kubelet") / "config" / "v1beta1" / "types.go").read_text()
    body = source[source.index("type KubeletConfiguration struct"):]
    body = body[:body.index("\n}\n")]
    fields = set(re.findall(r'json:"([A-Za-z0-9]+)', body))
    config = S.kubelet_config(nodes()[0], client_ca=Path("/ca.crt"), resolv_conf=Path("/r"), system_reserved_memory="1Gi")
    assert set(config) - {"apiVersion", "kind"} <= fields, set(config) - fields - {"apiVersion", "kind"}


def test_kube_proxy_config_uses_only_fields_of_the_pinned_kube_proxy():
    """A misspelt field would be ignored or refused only at start; check the names against the pinned modules."""
    import re

    from trainyard.toolchain.modules import module_dir
    from trainyard.toolchain.versions import tool

    sources = [module_dir(tool("kube-node"), module) / "config" / "v1alpha1" / "types.go"
               for module in ("k8s.io/kube-proxy", "k8s.io/component-base")]  # clientConnection's type
    fields = {name for source in sources for name in re.findall(r'json:"([A-Za-z0-9]+)', source.read_text())}
    config = S.kube_proxy_config(kubeconfig=Path("/kc"), node_name="n", healthz_port=1, metrics_port=2)
    nested = {key for value in config.values() if isinstance(value, dict) for key in value}
    assert (set(config) - {"apiVersion", "kind"}) | nested <= fields, ((set(config) | nested) - fields)


def test_importing_a_new_build_drops_the_earlier_builds_of_that_image_only():
    from trainyard.realnodes.nodes import superseded_refs

    record = {"ref": "trainyard.local/training:new", "aliases": ["trainyard.local/training:local"]}
    refs = ["trainyard.local/training:old", "trainyard.local/training:local", "trainyard.local/training:new",
            "trainyard.local/controller:old", "trainyard.local/pause:x", "docker.io/library/training:old"]
    assert superseded_refs(refs, record) == ["trainyard.local/training:old"]


def test_a_rebound_socket_has_a_new_identity(tmp_path):
    """How `start` tells that the next kubelet may start: the shared device-plugin socket was bound anew."""
    import socket

    from trainyard.realnodes.nodes import socket_identity

    path = tmp_path / "kubelet.sock"
    assert socket_identity(path) is None
    identities = []
    for _ in range(2):
        path.unlink(missing_ok=True)  # what each kubelet does to the directory before it binds
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
            identities.append(socket_identity(path))
    assert None not in identities and identities[0] != identities[1]
