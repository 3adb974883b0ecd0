"""The local usage record on the test cluster: kube-state-metrics and Prometheus from their pinned modules, the
configuration promtool accepts, and the GPUs a tenant really holds recorded with its queue."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request

import pytest

from trainyard.cluster import monitoring
from trainyard.cluster.state import ClusterPaths
from trainyard.toolchain.versions import tool

from builders import new_trainjob, tenant_spec
from tenant_helpers import (add_tenant, blocker_running, create, delete_cluster_object, priority_class, queued_blocker,
                            remove_tenant)

pytestmark = pytest.mark.integration


def query(cluster, promql: str) -> list[dict]:
    url = f"http://127.0.0.1:{cluster.spec.ports.port('prometheus')}/api/v1/query?" + urllib.parse.urlencode(
        {"query": promql})
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.load(answer)
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_promtool_accepts_the_configuration_and_its_rules(cluster):
    config = ClusterPaths.for_name(cluster.spec.name).root / "prometheus" / "prometheus.yaml"
    checked = subprocess.run([str(tool("prometheus").path("promtool")), "check", "config", str(config)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "4 rules found" in checked.stdout, checked.stdout


def test_every_scrape_target_is_up(cluster):
    up = cluster.wait(lambda: (found := query(cluster, "up")) and len(found) == 3 and found, timeout=60,
                      what="three scrape targets reported")
    assert {(s["metric"]["job"], s["value"][1]) for s in up} == {
        (job, "1") for job in monitoring.scrape_targets(cluster.spec.ports)}


def test_the_gpus_a_tenant_holds_are_recorded_with_its_queue(cluster, shared):
    tenant = add_tenant(cluster, tenant_spec(gpus=16))
    try:
        cluster.apply(*queued_blocker(tenant, "hold"))  # one 8-GPU pod, bound and running
        blocker_running(cluster, tenant.ns, "hold")
        series = cluster.wait(lambda: query(cluster, f'{monitoring.TENANT_GPUS}{{namespace="{tenant.ns}"}}'),
                              timeout=90, what="the tenant's GPUs recorded")
        (held,) = series
        assert held["value"][1] == "8"
        assert held["metric"]["label_trainyard_dev_queue"] == tenant.queue
        cluster.kubectl("delete", "replicaset,podgroup", "hold", "-n", tenant.ns)
        cluster.wait(lambda: not query(cluster, f'{monitoring.TENANT_GPUS}{{namespace="{tenant.ns}"}}'), timeout=90,
                     what="the tenant's GPUs gone from the record once its pod ended")
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_trainjobs_gpus_are_recorded_with_tenant_queue_priority_runtime_and_catalog_release(cluster, shared,
                                                                                              catalog_runtime):
    """Two pods of 8 GPUs that kwok keeps running for 2 min: the TrainJob's series carries every label usage groups by."""
    klass = f"usage-{tenant_suffix()}"
    cluster.apply(priority_class(klass, 100))
    spec = tenant_spec(gpus=16, priority_classes=(klass,), default_priority_class=klass)
    tenant = add_tenant(cluster, spec)
    runs = [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {
        "pod-complete.stage.kwok.x-k8s.io/delay": "120s"}}}]
    try:
        create(cluster, new_trainjob("timed", catalog_runtime, namespace=tenant.ns, nodes=2,
                                     podTemplateOverrides=runs), as_user=tenant.user)
        promql = f'{monitoring.TRAINJOB_GPUS}{{namespace="{tenant.ns}", trainjob="timed"}}'
        (series,) = cluster.wait(lambda: query(cluster, promql), timeout=90, what="the TrainJob's GPUs recorded")
        assert series["value"][1] == "16"
        labels = series["metric"]
        assert (labels["label_trainyard_dev_queue"], labels["priority_class"], labels["runtime"],
                labels["label_trainyard_dev_catalog_version"]) == (tenant.queue, klass, catalog_runtime,
                                                                   spec.catalog_version), labels
    finally:
        remove_tenant(cluster, tenant.spec)
        delete_cluster_object(cluster, "priorityclass", klass)


def tenant_suffix() -> str:
    import uuid

    return uuid.uuid4().hex[:6]

