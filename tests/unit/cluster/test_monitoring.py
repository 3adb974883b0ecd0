"""The local usage record's configuration (pure): what kube-state-metrics exposes, what Prometheus scrapes and
records. tests/integration/test_usage_record.py checks the same files with promtool and against real series."""

from __future__ import annotations

from pathlib import Path

import yaml

from trainyard.cluster import monitoring as M
from trainyard.cluster.spec import ClusterSpec


def test_prometheus_scrapes_the_local_components_on_the_clusters_own_ports(tmp_path):
    ports = ClusterSpec(port_base=30000).ports
    config = yaml.safe_load(M.write_files(tmp_path, ports).read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    assert targets == {"kube-state-metrics": ["127.0.0.1:30051"], "volcano-scheduler": ["127.0.0.1:30020"],
                       "trainyard-controller": ["127.0.0.1:30030"]}
    assert config["global"]["scrape_interval"] == "15s"
    rules = yaml.safe_load(Path(config["rule_files"][0]).read_text())
    assert [r["record"] for r in rules["groups"][0]["rules"]] == [M.POD_GPUS, M.TENANT_GPUS, M.TRAINJOB_GPUS,
                                                                  M.QUEUE_ENTITLED]
    trainjobs = yaml.safe_load((tmp_path / "prometheus" / "trainjob-metrics.yaml").read_text())
    assert [r["groupVersionKind"] for r in trainjobs["spec"]["resources"]] == [
        {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
        {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "Queue"},
        {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "PodGroup"}]


def test_the_rules_count_gpu_requests_of_running_pods_and_carry_the_namespaces_queue():
    pod_rule, tenant_rule, trainjob_rule, _ = M.recording_rules()["groups"][0]["rules"]
    assert 'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}' in pod_rule["expr"]
    assert 'kube_pod_status_phase{phase="Running"}' in pod_rule["expr"]
    assert "label_trainyard_dev_queue" in tenant_rule["expr"] and "kube_namespace_labels" in tenant_rule["expr"]
    for label in ("label_jobset_sigs_k8s_io_jobset_name", "priority_class", "runtime",
                  "label_trainyard_dev_catalog_version", "trainyard_trainjob_info"):
        assert label in trainjob_rule["expr"], label


def test_kube_state_metrics_exposes_the_labels_the_rules_join_on():
    args = M.kube_state_metrics_args(Path("/k"), 1, 2, Path("/t.yaml"))
    assert "--custom-resource-state-config-file=/t.yaml" in args
    assert "--resources=pods,namespaces,nodes,resourcequotas" in args
    allow = next(a for a in args if a.startswith("--metric-labels-allowlist="))
    assert "pods=[jobset.sigs.k8s.io/jobset-name," in allow and "namespaces=[trainyard.dev/tenant,trainyard.dev/queue," in allow


def test_prometheus_keeps_its_data_outside_the_clusters_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINYARD_CACHE", str(tmp_path))
    args = M.prometheus_args(Path("/c.yaml"), M.data_dir("demo"), 9090)
    assert f"--storage.tsdb.path={M.data_dir('demo')}" in args and "--storage.tsdb.retention.time=30d" in args
    assert "usage/demo/prometheus" in str(M.data_dir("demo")) and "clusters" not in str(M.data_dir("demo"))


def test_a_queues_entitlement_is_its_deserved_gpus_else_its_weight_share_among_tenant_queues():
    entitled = M.recording_rules()["groups"][0]["rules"][3]
    assert entitled["record"] == "trainyard:queue_gpus:entitled"
    deserved, weight_share = entitled["expr"].split(" or ")
    assert "trainyard_queue_deserved_gpus" in deserved and "label_trainyard_dev_queue" in deserved
    assert "trainyard_queue_weight" in weight_share
    assert 'kube_node_status_allocatable{resource="nvidia_com_gpu"}' in weight_share


def test_queue_metrics_read_weight_and_the_gpus_of_deserved_and_capability():
    queue = M.trainjob_metrics()["spec"]["resources"][1]
    paths = {m["name"]: (m["each"]["gauge"]["path"], m["each"]["gauge"]["valueFrom"]) for m in queue["metrics"]}
    assert paths == {"weight": (["spec"], ["weight"]),
                     "deserved_gpus": (["spec", "deserved"], ["nvidia.com/gpu"]),
                     "capability_gpus": (["spec", "capability"], ["nvidia.com/gpu"])}


def test_a_platforms_own_prometheus_gets_the_same_rules_and_kube_state_metrics_the_same_selection(tmp_path):
    """`trainyard platform usage-config`: what dev/prod's Prometheus and kube-state-metrics need; promtool accepts
    the rules."""
    import subprocess

    from typer.testing import CliRunner

    from trainyard.cli.main import app
    from trainyard.toolchain.build import ensure_built
    from trainyard.toolchain.versions import tool

    result = CliRunner().invoke(app, ["platform", "usage-config", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load((tmp_path / "kube-state-metrics-custom-resources.yaml").read_text()) == M.trainjob_metrics()
    flags = (tmp_path / "kube-state-metrics-flags.txt").read_text().splitlines()[1:]
    assert flags == M.selection_args(M.IN_CLUSTER_CRS_PATH)
    role = yaml.safe_load((tmp_path / "kube-state-metrics-clusterrole.yaml").read_text())
    assert {r for rule in role["rules"] for r in rule["resources"]} >= {"trainjobs", "queues", "podgroups"}
    ensure_built("prometheus")
    checked = subprocess.run([str(tool("prometheus").path("promtool")), "check", "rules",
                              str(tmp_path / "prometheus-rules.yaml")], capture_output=True, text=True)
    assert checked.returncode == 0 and "4 rules found" in checked.stdout, checked.stdout + checked.stderr
