"""The usage PromQL evaluated by the pinned Prometheus engine (`promtool test rules`) on kube-state-metrics series
shaped as v2.18 writes them: every container that holds a GPU counts for as long as the pod holds it, and a pod
whose first container ended is not finished while another still runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from trainyard.cluster import monitoring as M
from trainyard.toolchain.versions import tool
from trainyard.usage import prometheus as P

pytestmark = pytest.mark.integration

NS = "team-a"
GPU = M.GPU_METRIC_RESOURCE


def requests(pod: str, container: str, gpus: int, init: bool = False, node: str = "gpu-node-0") -> dict:
    metric = "kube_pod_init_container_resource_requests" if init else "kube_pod_container_resource_requests"
    return {"series": f'{metric}{{namespace="{NS}",pod="{pod}",uid="u-{pod}",container="{container}",'
                      f'node="{node}",resource="{GPU}",unit="integer"}}', "values": f"{gpus}x20"}


def init_info(pod: str, container: str, restart_policy: str) -> dict:
    return {"series": f'kube_pod_init_container_info{{namespace="{NS}",pod="{pod}",uid="u-{pod}",container="{container}",'
                      f'image="busybox",restart_policy="{restart_policy}"}}', "values": "1x20"}


def phase(pod: str, running: bool) -> list[dict]:
    return [{"series": f'kube_pod_status_phase{{namespace="{NS}",pod="{pod}",uid="u-{pod}",phase="{name}"}}',
             "values": f"{int(value)}x20"}
            for name, value in (("Running", running), ("Succeeded", not running), ("Failed", False))]


# pod -> (its series, the GPUs it holds)
PODS = {
    "plain": ([requests("plain", "a", 4), requests("plain", "b", 4)], 8),
    "seen-pending": ([requests("seen-pending", "a", 8, node=""), requests("seen-pending", "a", 8)], 8),
    "gpu-sidecar": ([requests("gpu-sidecar", "proxy", 8, init=True), init_info("gpu-sidecar", "proxy", "Always")], 8),
    "both": ([requests("both", "trainer", 4), requests("both", "proxy", 4, init=True),
              init_info("both", "proxy", "Always")], 8),
    "setup-init": ([requests("setup-init", "trainer", 2), requests("setup-init", "warmup", 8, init=True),
                    init_info("setup-init", "warmup", "")], 8),
    "setup-small": ([requests("setup-small", "trainer", 8), requests("setup-small", "fetch", 1, init=True),
                     init_info("setup-small", "fetch", "")], 8),
}
RUNNING = {"plain": True, "seen-pending": True, "gpu-sidecar": True, "both": True, "setup-init": False,
           "setup-small": True}


def promtool_test(tmp_path: Path, rules: dict, series: list[dict], exprs: list[dict]) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({
        "rule_files": ["rules.yaml"], "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": series, "promql_expr_test": exprs}]}))
    run = subprocess.run([str(tool("prometheus").path("promtool")), "test", "rules", "test.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def placed(pod: str, node: str = "gpu-node-0") -> dict:
    return {"series": f'kube_pod_info{{namespace="{NS}",pod="{pod}",uid="u-{pod}",node="{node}",'
                      f'priority_class=""}}', "values": "1x20"}


def node_ready(node: str, ready: bool) -> list[dict]:
    return [{"series": f'kube_node_status_condition{{node="{node}",condition="Ready",status="{status}"}}',
             "values": f"{int(value)}x20"}
            for status, value in (("true", ready), ("false", False), ("unknown", not ready))]


def all_series() -> list[dict]:
    return ([s for pod, (series, _) in PODS.items() for s in series + phase(pod, RUNNING[pod]) + [placed(pod)]]
            + node_ready("gpu-node-0", True))


def test_usage_counts_native_sidecars_and_init_containers_by_the_engine(tmp_path):
    query = P.pod_span_queries(0, 300, [NS])["gpus"]
    promtool_test(tmp_path, {"groups": []}, all_series(), [{
        "expr": query, "eval_time": "4m",
        "exp_samples": [{"labels": f'{{namespace="{NS}",pod="{pod}",uid="u-{pod}"}}', "value": gpus}
                        for pod, (_, gpus) in PODS.items()]}])


def test_the_recording_rule_counts_the_same_gpus_for_running_pods_only_on_ready_nodes(tmp_path):
    """A pod on a lost node (Ready unknown: its kubelet stopped posting) still says Running, but holds nothing."""
    lost = [requests("on-lost-node", "a", 8, node="gpu-node-9"), *phase("on-lost-node", True),
            placed("on-lost-node", "gpu-node-9"), *node_ready("gpu-node-9", False)]
    promtool_test(tmp_path, M.recording_rules(), all_series() + lost, [{
        "expr": M.POD_GPUS, "eval_time": "4m",
        "exp_samples": [{"labels": f'{{__name__="{M.POD_GPUS}",namespace="{NS}",pod="{pod}"}}', "value": gpus}
                        for pod, (_, gpus) in PODS.items() if RUNNING[pod]]}])


def test_a_pod_is_finished_only_in_a_terminal_phase_not_when_its_first_container_ends(tmp_path):
    query = P.pod_span_queries(0, 300, [NS])["finished"]
    promtool_test(tmp_path, {"groups": []}, all_series(), [{
        "expr": query, "eval_time": "4m",
        "exp_samples": [{"labels": f'{{namespace="{NS}",pod="{pod}",uid="u-{pod}"}}', "value": 1}
                        for pod in PODS if not RUNNING[pod]]}])
