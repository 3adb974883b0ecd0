"""Tenant budgets on the test cluster: the controller's budget loop reads the tenant's GPU-hours from the cluster's
Prometheus, closes its Volcano queue once the budget is spent (the running gang goes on, a new one is not admitted),
warns its TrainJobs, and the next period reopens the queue (the loop run in this process with a clock a month on,
the controller stopped so its own loop does not close the queue again)."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from trainyard.tenant_policy import BudgetStatus
from trainyard.cluster import local
from trainyard.cluster.processes import ProcessTable, wait_for_port
from trainyard.controller.runtime.apiserver import ApiServer
from trainyard.platform.stack_model import TenantBudget
from trainyard.timestamps import utc_now
from trainyard.usage.budget_enforcer import REASON, BudgetEnforcer
from trainyard.usage.prometheus import Prometheus

from builders import new_trainjob, tenant_spec
from tenant_helpers import add_tenant, create, podgroup, remove_tenant

pytestmark = pytest.mark.integration

BUDGET_GPU_HOURS = 0.02
"""72 GPU-seconds: an 8-GPU pod spends it in 9 s."""


def timed(seconds: int) -> list[dict]:
    return [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {
        "pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds}s"}}}]


def budget_status(cluster, ns: str) -> BudgetStatus | None:
    found = cluster.core.read_namespace(ns).metadata.annotations or {}
    return BudgetStatus.from_annotation(found.get("trainyard.dev/budget-status"))


def queue_state(cluster, name: str) -> str:
    queue = cluster.get_object("scheduling.volcano.sh", "v1beta1", "queues", name, None) or {}
    return (queue.get("status") or {}).get("state", "")


def running_pods(cluster, ns: str, trainjob: str) -> list:
    return [p for p in cluster.core.list_namespaced_pod(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={trainjob}").items
            if p.status.phase == "Running"]


def test_a_spent_budget_closes_the_queue_and_the_next_period_reopens_it(cluster, shared, catalog_runtime):
    spec = replace(tenant_spec(gpus=16), budget=TenantBudget(gpu_hours=BUDGET_GPU_HOURS, action="closeQueue"))
    tenant = add_tenant(cluster, spec)
    table = ProcessTable(local.ClusterPaths.for_name(cluster.name).root)
    try:
        create(cluster, new_trainjob("first", catalog_runtime, namespace=tenant.ns, nodes=1,
                                     podTemplateOverrides=timed(600)), as_user=tenant.user)
        cluster.wait(lambda: running_pods(cluster, tenant.ns, "first"), timeout=90, what="the first gang running")
        spent = cluster.wait(lambda: (s := budget_status(cluster, tenant.ns)) and s.state == "exhausted" and s,
                             timeout=180, interval=3, what="the controller to find the budget spent")
        assert spent.action == "closeQueue" and spent.gpu_hours >= BUDGET_GPU_HOURS, spent
        told = subprocess.run([sys.executable, "-m", "trainyard.cli", "usage", "--name", cluster.name, "--since", "1h",
                               "-o", "json"], capture_output=True, text=True, timeout=120)
        assert told.returncode == 0, told.stderr
        (mine,) = [row for row in json.loads(told.stdout) if row["group"] == spec.name]
        assert mine["budget"]["state"] == "exhausted" and mine["budget"]["spent_gpu_hours"] >= BUDGET_GPU_HOURS, mine
        cluster.wait(lambda: queue_state(cluster, tenant.queue) in ("Closing", "Closed"), timeout=60,
                     what="Volcano to close the tenant's queue")
        assert running_pods(cluster, tenant.ns, "first"), "the running gang goes on"
        warning = cluster.wait(lambda: [e for e in cluster.core.list_namespaced_event(tenant.ns).items
                                        if e.reason == REASON and e.involved_object.name == "first"],
                               timeout=60, what="a budget Warning on the running TrainJob")
        assert warning[0].type == "Warning" and "queue " + tenant.queue + " is closed" in warning[0].message

        create(cluster, new_trainjob("second", catalog_runtime, namespace=tenant.ns, nodes=1,
                                     podTemplateOverrides=timed(60)), as_user=tenant.user)
        cluster.wait(lambda: podgroup(cluster, "second", tenant.ns), timeout=60, what="the second gang's PodGroup")
        for _ in range(3):  # several scheduling cycles: still not admitted, no pod
            time.sleep(5)
            assert (podgroup(cluster, "second", tenant.ns).get("status") or {}).get("phase", "Pending") == "Pending"
            assert not cluster.core.list_namespaced_pod(tenant.ns, label_selector="jobset.sigs.k8s.io/jobset-name=second").items

        table.kill("trainjob-controller", signal.SIGTERM)  # its own loop would close the queue again: still spent
        try:
            api = ApiServer.from_kubeconfig(cluster.kubeconfig)
            next_month = lambda: utc_now() + dt.timedelta(days=32)  # noqa: E731
            prometheus = Prometheus(f"http://127.0.0.1:{cluster.spec.ports.port('prometheus')}")
            decisions = BudgetEnforcer(api, prometheus, clock=next_month).step()
            assert decisions[tenant.ns].open_queue and decisions[tenant.ns].status.state == "ok", decisions
            cluster.wait(lambda: queue_state(cluster, tenant.queue) == "Open", timeout=60,
                         what="Volcano to reopen the queue in the next period")
            cluster.wait(lambda: (podgroup(cluster, "second", tenant.ns).get("status") or {}).get("phase")
                         in ("Inqueue", "Running"), timeout=60, what="the waiting gang admitted once the queue is open")
            assert budget_status(cluster, tenant.ns).state == "ok"
        finally:
            table.restart("trainjob-controller")
            assert wait_for_port(cluster.spec.ports.port("controller_webhook"), 60), "the controller back"
    finally:
        remove_tenant(cluster, tenant.spec)
