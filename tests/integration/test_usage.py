"""`trainyard usage` against the test cluster's own Prometheus: TrainJobs whose kwok pods run for known times, with
Prometheus killed and the controller restarted while they run; the command's figures equal the arithmetic."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable

from builders import new_trainjob, tenant_spec
from tenant_helpers import add_tenant, create, get_trainjob, remove_tenant

pytestmark = pytest.mark.integration

RUNS_S = {"short": 120, "long": 180}
"""Each TrainJob: one pod of 8 GPUs that kwok completes this long after it runs."""
GPUS = 8
DESERVED = 8


def usage(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainyard.cli", "usage", "--name", cluster.name, *args],
                          capture_output=True, text=True, timeout=120)


def usage_json(cluster, by: str) -> dict[str, dict]:
    answer = usage(cluster, "--since", "30m", "--by", by, "-o", "json")
    assert answer.returncode == 0, answer.stderr
    return {row["group"]: row for row in json.loads(answer.stdout)}


def pod_spans(cluster, ns: str) -> dict[str, tuple[float, float]]:
    """TrainJob -> its pod's startTime and its container's finishedAt (epoch seconds), as the API server has them."""
    out = {}
    for pod in cluster.core.list_namespaced_pod(ns).items:
        finished = pod.status.container_statuses[0].state.terminated.finished_at
        out[pod.metadata.labels["jobset.sigs.k8s.io/jobset-name"]] = (pod.status.start_time.timestamp(),
                                                                       finished.timestamp())
    return out


def created_at(cluster, ns: str, name: str) -> float:
    from trainyard.timestamps import parse_time

    return parse_time(get_trainjob(cluster, name, ns)["metadata"]["creationTimestamp"]).timestamp()


def complete(cluster, ns: str, name: str) -> bool:
    found = get_trainjob(cluster, name, ns) or {}
    return any(c["type"] == "Complete" and c["status"] == "True" for c in found.get("status", {}).get("conditions", []))


def test_usage_equals_the_arithmetic_of_timed_pods_across_a_prometheus_crash_and_a_controller_restart(
        cluster, shared, catalog_runtime):
    spec = tenant_spec(gpus=16)
    spec = replace(spec, queue=replace(spec.queue, deserved={"nvidia.com/gpu": DESERVED}))
    tenant = add_tenant(cluster, spec)
    table = ProcessTable(local.ClusterPaths.for_name(cluster.name).root)
    try:
        for name, seconds in RUNS_S.items():
            runs = [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {
                "pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds}s"}}}]
            create(cluster, new_trainjob(name, catalog_runtime, namespace=tenant.ns, nodes=1,
                                         podTemplateOverrides=runs), as_user=tenant.user)
        cluster.wait(lambda: len([p for p in cluster.core.list_namespaced_pod(tenant.ns).items
                                  if p.status.phase == "Running"]) == 2, timeout=90, what="both pods running")
        time.sleep(20)  # at least one scrape sees them running
        table.kill("prometheus")  # a crash: what it had not yet written to disk is in its write-ahead log
        table.restart("trainjob-controller")
        time.sleep(30)
        table.restart("prometheus")
        cluster.wait(lambda: all(complete(cluster, tenant.ns, name) for name in RUNS_S), timeout=max(RUNS_S.values()) + 90,
                     interval=5, what="both TrainJobs complete")
        rows = cluster.wait(lambda: (found := usage_json(cluster, "tenant")).get(spec.name, {}).get("completed") == 2
                            and found, timeout=90, interval=5, what="usage to see both TrainJobs complete")
        row = rows[spec.name]
        expected_gpu_s = sum(GPUS * seconds for seconds in RUNS_S.values())
        assert row["gpu_hours"] * 3600 == pytest.approx(expected_gpu_s, rel=0.01), row
        # 16 held against 8 deserved while both ran: 8 GPUs borrowed for that long (from the pods' own times: on
        # a busy cluster the two need not start together)
        spans = pod_spans(cluster, tenant.ns)
        overlap = min(end for _, end in spans.values()) - max(start for start, _ in spans.values())
        assert row["gpu_hours_borrowed"] * 3600 == pytest.approx((2 * GPUS - DESERVED) * max(0.0, overlap),
                                                                 rel=0.02, abs=2 * GPUS), (row, spans)
        assert (row["started"], row["waiting"], row["completed"], row["failed"]) == (2, 0, 2, 0), row
        waits = sorted(spans[name][0] - created_at(cluster, tenant.ns, name) for name in RUNS_S)
        assert (row["wait_p50_s"], row["wait_p95_s"]) == (pytest.approx(sum(waits) / 2, abs=1.5),
                                                          pytest.approx(waits[0] + 0.95 * (waits[1] - waits[0]),
                                                                        abs=1.5)), (row, waits)
        assert usage_json(cluster, "runtime")[catalog_runtime]["gpu_hours"] >= row["gpu_hours"]
        table_text = usage(cluster, "--since", "30m").stdout
        assert any(line.startswith(spec.name) for line in table_text.splitlines()), table_text
        assert any(line.startswith("total ") for line in table_text.splitlines()), table_text
    finally:
        remove_tenant(cluster, tenant.spec)


def test_bad_options_are_refused_naming_the_option(cluster):
    for args, words in ((("--since", "seven"), "--since 'seven' is not a duration"),
                        (("--by", "team"), "--by 'team': use one of tenant, queue, runtime, priority"),
                        (("-o", "xml"), "-o 'xml': use one of table, json, csv"),
                        (("--prometheus", "http://127.0.0.1:9"), "cannot reach Prometheus at http://127.0.0.1:9")):
        answer = usage(cluster, *args)
        assert answer.returncode == 2 and words in answer.stderr, (args, answer.stderr)
