"""Pure parts of the local cluster: node objects, ports, config files."""

from pathlib import Path

import pytest

from trainyard.cluster import controller_configs as configs, spec as s


def test_defaults_match_the_contract():
    spec = s.ClusterSpec()
    assert (spec.nodes, spec.gpus_per_node, spec.racks, spec.spines, spec.timed_pods) == (4, 8, 2, 1, True)


@pytest.mark.parametrize("kwargs,field", [
    ({"nodes": 0}, "--nodes"),
    ({"racks": 5, "nodes": 4}, "--racks"),
    ({"name": "Bad_Name"}, "--name"),
    ({"port_base": 80}, "--port-base"),
    ({"port_base": 40000}, "ephemeral range"),
    ({"gpus_per_node": -1}, "--gpus-per-node"),
    ({"spines": 3, "racks": 2}, "--spines"),
    ({"spines": 0}, "--spines"),
])
def test_bad_options_name_the_option(kwargs, field):
    with pytest.raises(ValueError, match=field):
        s.ClusterSpec(**kwargs)


def test_gpu_node_labels_and_resources():
    spec = s.ClusterSpec(gpus_per_node=4, gpu_product="NVIDIA-A100-SXM4-80GB")
    node = s.gpu_node(0, spec)
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["nvidia.com/gpu.count"] == "4"
    assert labels["topology.kubernetes.io/zone"]
    for key in ("capacity", "allocatable"):
        assert node["status"][key]["nvidia.com/gpu"] == "4"
        assert int(node["status"][key]["cpu"]) > 0
    assert not node["spec"].get("taints"), "every pod here is simulated: no kwok taint"


@pytest.mark.parametrize("nodes,racks,expected", [
    (4, 2, ["rack-0", "rack-0", "rack-1", "rack-1"]),
    (5, 2, ["rack-0", "rack-0", "rack-0", "rack-1", "rack-1"]),
    (3, 3, ["rack-0", "rack-1", "rack-2"]),
    (2, 1, ["rack-0", "rack-0"]),
])
def test_nodes_are_spread_over_racks_in_blocks(nodes, racks, expected):
    spec = s.ClusterSpec(nodes=nodes, racks=racks)
    assert [n["metadata"]["labels"][s.RACK_LABEL] for n in s.gpu_nodes(spec)] == expected


@pytest.mark.parametrize("nodes,racks,spines,expected", [
    (4, 2, 1, ["spine-0"] * 4),
    (8, 4, 2, ["spine-0"] * 4 + ["spine-1"] * 4),
    (64, 8, 2, ["spine-0"] * 32 + ["spine-1"] * 32),
    (6, 3, 2, ["spine-0"] * 4 + ["spine-1"] * 2),
])
def test_racks_are_spread_over_spines_in_blocks(nodes, racks, spines, expected):
    spec = s.ClusterSpec(nodes=nodes, racks=racks, spines=spines)
    labels = [n["metadata"]["labels"] for n in s.gpu_nodes(spec)]
    assert [lab[s.SPINE_LABEL] for lab in labels] == expected
    spine_of_rack = {}
    for lab in labels:  # a rack never straddles two spines
        assert spine_of_rack.setdefault(lab[s.RACK_LABEL], lab[s.SPINE_LABEL]) == lab[s.SPINE_LABEL]


def test_ports_are_distinct_and_loopback_only():
    spec = s.ClusterSpec(port_base=20000)
    ports = spec.ports.all()
    assert len(set(ports.values())) == len(ports)
    cfg = s.kwokctl_config(spec, {b: Path(f"/x/{b}") for b in (
        "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "etcdctl", "kwok")})
    assert cfg["options"]["bindAddress"] == "127.0.0.1"
    assert cfg["options"]["runtime"] == "binary"
    assert cfg["options"]["kubeAuthorization"] is True
    assert cfg["options"]["kubeApiserverPort"] == 20000
    assert all(str(v).startswith("/x/") for k, v in cfg["options"].items() if k.endswith("Binary"))


def test_jobset_config_runs_out_of_cluster():
    cfg = configs.jobset_config(s.ClusterSpec(port_base=20000), Path("/certs"))
    assert cfg["leaderElection"]["leaderElect"] is False
    assert cfg["internalCertManagement"]["enable"] is False
    assert cfg["webhook"]["host"] == "127.0.0.1"
    assert cfg["metrics"]["bindAddress"].startswith("127.0.0.1:")


def test_webhook_configuration_is_pointed_at_a_url():
    manifest = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": "m"}, "webhooks": [{"name": "a", "clientConfig": {
                    "service": {"name": "svc", "namespace": "ns", "path": "/mutate-x"}}}]}
    out = configs.url_webhook_configuration(manifest, "https://127.0.0.1:1", "Q0E=")
    assert out["webhooks"][0]["clientConfig"] == {"url": "https://127.0.0.1:1/mutate-x", "caBundle": "Q0E="}
    assert manifest["webhooks"][0]["clientConfig"]["service"], "input is not mutated"


def test_local_stack_agrees_with_the_cluster_defaults():
    """stacks/Pulumi.local.yaml describes the cluster `trainyard cluster up` starts with its defaults (ClusterSpec)."""
    from trainyard import stack_deploy
    from trainyard.platform.stack_config import parse_stack_config, stack_values
    from trainyard.queues.resources import quantity

    spec = s.ClusterSpec()
    config, _ = parse_stack_config(stack_values(stack_deploy.read_stack_file(stack_deploy.LOCAL_STACK)), file="local")
    cluster = config.cluster
    assert (cluster.nodes, cluster.gpus_per_node, cluster.gpu_product) == (spec.nodes, spec.gpus_per_node, spec.gpu_product)
    assert quantity(cluster.cpu_per_node) == spec.cpu_per_node
    assert quantity(cluster.memory_per_node) == quantity(f"{spec.memory_gib_per_node}Gi")
    assert config.topology.rack_label == s.RACK_LABEL
    assert [rack.name for rack in config.topology.racks] == [s.rack_name(i) for i in range(spec.racks)]
    assert {rack.spine for rack in config.topology.racks} == {s.gpu_node(0, spec)["metadata"]["labels"][s.SPINE_LABEL]}
    assert config.kube_context == spec.kube_context == f"kwok-{stack_deploy.DEFAULT_CLUSTER}"
    assert config.kubeconfig.endswith(f"clusters/{spec.name}/kubeconfig.yaml")
    assert config.controller.webhook.url == f"https://127.0.0.1:{spec.ports.port('controller_webhook')}"
    assert config.controller.webhook.ca_bundle_file.endswith(f"clusters/{spec.name}/certs/ca.crt")
    assert config.controllers_run_locally


def test_cli_and_stack_deploy_take_their_defaults_from_the_spec():
    from trainyard import stack_deploy
    from trainyard.cli import cluster as commands

    spec = s.ClusterSpec()
    assert (commands.NAME.default, commands.PORT_BASE.default) == (spec.name, spec.port_base)
    assert stack_deploy.DEFAULT_CLUSTER == spec.name
    assert s.Ports(spec.port_base).port("apiserver") == spec.port_base


def test_claims_without_a_class_get_a_host_directory_that_goes_with_them():
    """The default StorageClass is the controller-manager's in-tree hostPath provisioner, switched on: a
    staged runtime's `initializer` claim binds at once (Volcano places no pod with an unbound claim)."""
    config = s.kwokctl_config(s.ClusterSpec(), {name: Path(name) for name in (
        "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "etcdctl", "kwok")})
    (kcm,) = [p for p in config["componentsPatches"] if p["name"] == "kube-controller-manager"]
    assert {"key": "enable-hostpath-provisioner", "value": "true"} in kcm["extraArgs"]
    storage_class = s.default_storage_class()
    assert storage_class["provisioner"] == "kubernetes.io/host-path"
    assert storage_class["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert (storage_class["reclaimPolicy"], storage_class["volumeBindingMode"]) == ("Delete", "Immediate")


@pytest.mark.parametrize("path,removed", [
    ("/tmp/hostpath_pv/0b6c", True),
    ("/tmp/hostpath_pv", False),  # the provisioner's root, shared by every local cluster
    ("/tmp/hostpath_pv/../etc", False),
    ("/tmp/other/0b6c", False),
    ("/data/0b6c", False),
    (None, False),  # not a hostPath volume
])
def test_down_removes_only_the_provisioners_directories(path, removed):
    from trainyard.cluster.local import host_path_volumes

    pv = {"spec": {"hostPath": {"path": path}} if path else {"local": {"path": "/x"}}}
    assert host_path_volumes([pv]) == ([Path(path)] if removed else [])


@pytest.mark.parametrize("real_nodes", [0, 1])
def test_the_api_server_presents_its_webhook_client_certificate_from_one_patch(real_nodes):
    """The local API server gets an AdmissionConfiguration (its client certificate for every admission webhook), in
    the one kube-apiserver patch kwokctl reads, beside the real-node flags when there are real nodes."""
    binaries = {name: Path(name) for name in (
        "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "etcdctl", "kwok")}
    client = (Path("/c.crt"), Path("/c.key")) if real_nodes else None
    config = s.kwokctl_config(s.ClusterSpec(real_nodes=real_nodes), binaries, client, Path("/certs/admission.yaml"))
    patches = [p for p in config["componentsPatches"] if p["name"] == "kube-apiserver"]
    assert len(patches) == 1
    assert {"key": "admission-control-config-file", "value": "/certs/admission.yaml"} in patches[0]["extraArgs"]
    assert any(a["key"] == "kubelet-client-certificate" for a in patches[0]["extraArgs"]) is bool(real_nodes)
    admission, kubeconfig = s.webhook_admission_files(Path("/w/c.crt"), Path("/w/c.key"), Path("/w/kubeconfig.yaml"))
    assert {p["name"] for p in admission["plugins"]} == {"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}
    assert {p["configuration"]["kubeConfigFile"] for p in admission["plugins"]} == {"/w/kubeconfig.yaml"}
    assert kubeconfig["users"] == [{"name": "*", "user": {"client-certificate": "/w/c.crt", "client-key": "/w/c.key"}}]


def test_real_pods_reach_the_status_server_on_the_bridge_and_its_certificate_names_it(tmp_path):
    """trainerStatus from a real node's pod (the checkpoint helper) goes to the pod bridge's first address: the
    controller listens there and its serving certificate is valid for it; without real nodes, loopback only."""
    import ipaddress

    from cryptography import x509

    from trainyard.cluster.certs import write_serving_pair
    from trainyard.cluster.real_node_spec import dns_address
    from trainyard.cluster.spec import ClusterSpec, pod_reachable_addresses

    assert pod_reachable_addresses(ClusterSpec()) == ()
    assert pod_reachable_addresses(ClusterSpec(real_nodes=2)) == (dns_address(),)
    write_serving_pair(tmp_path, ip_addresses=pod_reachable_addresses(ClusterSpec(real_nodes=2)))
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address("127.0.0.1"),
                                                              ipaddress.ip_address(dns_address())}
