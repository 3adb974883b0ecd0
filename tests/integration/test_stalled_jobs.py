"""Stalled TrainJobs on the test cluster (its controller flags 20 s without progress): two TrainJobs hold 8 GPUs each,
one's trainer keeps reporting progress (trainerStatus, as the status server writes it), another's stops, a third's
keeps reporting the same percentage. The two stalled ones get `TrainJobStalled`, are recorded on their namespace and
listed by `trainyard report`; the same loop with the action `suspend` (run here, with no memory of its own: it knows
the steady one is stalled only from the record) gives their GPUs back, leaves the moving one alone and records them
as suspended."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid

import pytest

from trainyard.controller.runtime.apiserver import RESOURCES, ApiServer
from trainyard.controller.runtime.cache import CachedReads, Store
from trainyard.k8s import NAMESPACE_STALLED_ANNOTATION
from trainyard.tenant_policy import stalled_from_annotation
from trainyard.timestamps import now_time
from trainyard.usage.stall_watcher import StallWatcher
from trainyard.usage.stalls import REASON

from builders import new_trainjob, torch_runtime
from tenant_helpers import GROUP, VERSION, create, delete_cluster_object

pytestmark = pytest.mark.integration


def timed(seconds: int) -> list[dict]:
    return [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {
        "pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds}s"}}}]


def report_progress(cluster, ns: str, name: str, percentage: int) -> None:
    cluster.custom.patch_namespaced_custom_object_status(GROUP, VERSION, ns, "trainjobs", name, {"status": {
        "trainerStatus": {"progressPercentage": percentage, "lastUpdatedTime": now_time()}}})


def running(cluster, ns: str, name: str) -> list:
    return [p for p in cluster.core.list_namespaced_pod(ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}").items
            if p.status.phase == "Running"]


def stalled_events(cluster, ns: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for event in cluster.core.list_namespaced_event(ns).items:
        if event.reason == REASON:
            found.setdefault(event.involved_object.name, []).append(event)
    return found


def recorded(cluster, ns: str) -> dict:
    """The namespace's stalled TrainJobs as the stall loop recorded them, by name."""
    annotations = cluster.core.read_namespace(ns).metadata.annotations or {}
    return {e.trainjob: e for e in stalled_from_annotation(annotations.get(NAMESPACE_STALLED_ANNOTATION))}


@pytest.fixture
def runtime(cluster):
    name = f"torch-{uuid.uuid4().hex[:6]}"
    create(cluster, torch_runtime(name, gpus=8, queue="default"))
    yield name
    delete_cluster_object(cluster, "clustertrainingruntime", name)


def synced_reads(api: ApiServer) -> CachedReads:
    """Reads as the controller gives its loops: TrainJobs from a listed store (its informer's), the rest from `api`."""
    store = Store(RESOURCES["TrainJob"])
    store.replace(api.list(RESOURCES["TrainJob"])["items"])
    return CachedReads(api, {RESOURCES["TrainJob"]: store}, fresh_on_miss=True)


def test_a_trainjob_whose_progress_stops_is_flagged_and_one_that_progresses_is_not(cluster, runtime):
    ns = cluster.namespace("stalls")
    names = ("stuck", "moving", "steady")
    for name in names:
        create(cluster, new_trainjob(name, runtime, namespace=ns, nodes=1, podTemplateOverrides=timed(600)))
    cluster.wait(lambda: all(running(cluster, ns, name) for name in names), timeout=90,
                 what="the TrainJobs' pods running")
    report_progress(cluster, ns, "stuck", 10)  # its trainer's last report
    done = threading.Event()

    def progress() -> None:
        percentage = 10
        while not done.wait(4):
            percentage = min(99, percentage + 1)
            report_progress(cluster, ns, "moving", percentage)
            report_progress(cluster, ns, "steady", 50)  # reports, never moves

    reporter = threading.Thread(target=progress, daemon=True)
    reporter.start()
    try:
        report_progress(cluster, ns, "moving", 10)
        flagged = cluster.wait(lambda: stalled_events(cluster, ns).get("stuck"), timeout=90, interval=3,
                               what="the controller to flag the stuck TrainJob")
        steady = cluster.wait(lambda: stalled_events(cluster, ns).get("steady"), timeout=90, interval=3,
                              what="the controller to flag the steady TrainJob")
        assert "stayed at 50 %" in steady[0].message, steady[0].message
        assert flagged[0].type == "Warning" and "reported no progress for" in flagged[0].message, flagged[0].message
        assert "moving" not in stalled_events(cluster, ns), "a progressing TrainJob is never flagged"
        record = cluster.wait(lambda: len(recorded(cluster, ns)) == 2 and recorded(cluster, ns), timeout=30,
                              what="the stalls recorded on the namespace")
        assert sorted(record) == ["steady", "stuck"] and record["stuck"].percentage == 10, record
        assert record["steady"].percentage == 50 and not any(e.suspended for e in record.values()), record

        shown = subprocess.run([sys.executable, "-m", "trainyard.cli", "report", "--kubeconfig", cluster.kubeconfig,
                                "--all"], capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, shown.stderr
        listing = shown.stdout.split("Stalled TrainJobs", 1)[1]
        assert "stuck" in listing and "steady" in listing and "moving" not in listing, listing

        # the same loop on the reads the controller gives it: no TrainJob is read from the API server
        api, sent = ApiServer.from_kubeconfig(cluster.kubeconfig), []
        reads = synced_reads(api)
        api.observe = lambda method, resource: sent.append((method, resource))
        suspended = StallWatcher(reads, after_s=20, action="suspend").step()
        assert sorted(suspended) == [f"{ns}/steady", f"{ns}/stuck"], suspended
        assert ("GET", "trainjobs") not in sent and ("GET", "pods") in sent, sent
        stuck = cluster.get_object(GROUP, VERSION, "trainjobs", "stuck", ns)
        assert stuck["spec"]["suspend"] is True
        cluster.wait(lambda: not running(cluster, ns, "stuck") and not running(cluster, ns, "steady"), timeout=90,
                     what="the stalled TrainJobs' GPUs given back")
        assert running(cluster, ns, "moving"), "the progressing TrainJob runs on"
        record = recorded(cluster, ns)
        assert sorted(record) == ["steady", "stuck"] and all(e.suspended for e in record.values()), record
        listing = subprocess.run([sys.executable, "-m", "trainyard.cli", "report", "--kubeconfig", cluster.kubeconfig],
                                 capture_output=True, text=True, timeout=120).stdout.split("Stalled TrainJobs", 1)[1]
        assert "suspended" in listing, listing
        assert json.dumps(stalled_events(cluster, ns).get("moving", []), default=str) == "[]"
    finally:
        done.set()
        reporter.join()
