"""Reliability figures from the real local cluster: the controller killed mid-burst, the API server restarted
mid-burst, watches expired (410) while the controller was paused, and a paused leader replaced.

Each test prints what it measured (`[reliability] ...`); docs/tests.md lists what each one asserts. They restart the
shared cluster's API server and controller, then leave both healthy (leading again) for the suites after them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter

import pytest
from kubernetes.client.exceptions import ApiException

from trainyard.cluster import local
from trainyard.cluster.processes import ProcessSpec, ProcessTable, pid_alive, wait_for_port

from builders import new_trainjob, torch_runtime
from waiting import retrying, wait_for

pytestmark = pytest.mark.integration
RECONCILED = '"msg": "reconciled"'
"""How the controller logs a finished reconcile."""

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
CONTROLLER = "trainjob-controller"
RETRYABLE = (500, 502, 503, 504)  # webhook unreachable, API server starting


def report(capsys, line: str) -> None:
    with capsys.disabled():
        print(f"\n[reliability] {line}")


def applied_runtime(cluster) -> str:
    """A fresh torch runtime on the cluster (Volcano gang, queue default), by name."""
    name = f"rel-{uuid.uuid4().hex[:6]}"
    cluster.apply(torch_runtime(name, gpus=8, queue="default", image="pytorch/pytorch:2.7.1",
                                command=("torchrun", "t.py")))
    return name


def create_retrying(cluster, namespace: str, obj: dict, timeout: float = 180) -> None:
    """Create as a user's tooling would: retry while the webhook or the API server is away."""
    def create() -> None:
        try:
            cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "trainjobs", obj)
        except ApiException as exc:
            if exc.status != 409:  # 409: an earlier attempt went through, its answer was lost
                raise

    def retryable(exc: Exception) -> bool:  # connection refused/reset while the API server restarts
        return not isinstance(exc, ApiException) or exc.status in RETRYABLE

    retrying(create, retryable, timeout, f"creating {obj['metadata']['name']}", 0.3)


def burst(cluster, namespace: str, names: list[str], runtime_name: str, threads: int = 4) -> tuple[list, threading.Event]:
    """Create `names` from several threads; returns (created names, done event)."""
    created: list[str] = []
    done = threading.Event()

    def worker(part):
        for name in part:
            create_retrying(cluster, namespace, new_trainjob(name, runtime_name, suspend=True, nodes=1))
            created.append(name)

    workers = [threading.Thread(target=worker, args=(names[i::threads],), daemon=True) for i in range(threads)]
    for thread in workers:
        thread.start()
    threading.Thread(target=lambda: ([t.join() for t in workers], done.set()), daemon=True).start()
    return created, done


def listing(cluster, namespace: str, group: str, version: str, plural: str) -> list[dict]:
    def items() -> tuple[list[dict]] | None:  # a tuple: an empty list ends the wait too
        try:
            return (cluster.custom.list_namespaced_custom_object(group, version, namespace, plural)["items"],)
        except Exception:  # API server restarting
            return None

    return wait_for(items, 60, f"a listing of {plural}", 1)[0]


def children(cluster, namespace: str) -> tuple[list[dict], list[dict]]:
    return (listing(cluster, namespace, "jobset.x-k8s.io", "v1alpha2", "jobsets"),
            listing(cluster, namespace, "scheduling.volcano.sh", "v1beta1", "podgroups"))


def assert_one_child_each_no_orphans(cluster, namespace: str, names: list[str]) -> None:
    uids = {t["metadata"]["name"]: t["metadata"]["uid"] for t in listing(cluster, namespace, GROUP, VERSION, "trainjobs")}
    for items in children(cluster, namespace):
        assert sorted(i["metadata"]["name"] for i in items) == sorted(names), "exactly one per TrainJob"
        for item in items:
            (owner,) = item["metadata"]["ownerReferences"]
            assert uids[owner["name"]] == owner["uid"], f"{item['metadata']['name']} is orphaned"


def converge(cluster, namespace: str, count: int, timeout: float) -> float:
    started = time.monotonic()
    cluster.wait(lambda: [len(items) for items in children(cluster, namespace)] == [count, count], timeout=timeout,
                 interval=1, what=f"{count} JobSets and PodGroups")
    return time.monotonic() - started


def controller_events(cluster, namespace: str) -> Counter:
    events = cluster.core.list_namespaced_event(namespace).items
    return Counter((e.involved_object.name, e.reason) for e in events
                   if (e.source and e.source.component == CONTROLLER) or e.reporting_component == CONTROLLER)


def metric(cluster, name: str, **labels) -> float:
    port = cluster.spec.ports.port("controller_metrics")
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture(autouse=True)
def _namespaces_gone_before_the_next_restart(cluster):
    """These tests restart the API server: a namespace still being deleted then could be finalized with its
    500 TrainJobs (and their Inqueue PodGroups) orphaned in etcd, starving later tests' gangs (CI saw it)."""
    yield
    cluster.delete_created_namespaces(wait=True)


@pytest.fixture
def controller(cluster):
    """The cluster's controller process; restarted (and leading again) after the test whatever happened."""
    table = ProcessTable(local.ClusterPaths.for_name(cluster.name).root)
    yield table
    pid = table.load().get(CONTROLLER)
    if pid and pid_alive(pid):
        os.kill(pid, signal.SIGCONT)
    else:
        table.restart(CONTROLLER)
    assert wait_for_port(cluster.spec.ports.port("controller_webhook"), 60), "the controller's webhook is back"
    ns = cluster.namespace("alive")
    create_retrying(cluster, ns, new_trainjob("probe", applied_runtime(cluster), suspend=True, nodes=1))
    cluster.wait(lambda: len(children(cluster, ns)[0]) == 1, timeout=90, what="the controller to reconcile again")


def test_controller_killed_during_a_burst_of_500(cluster, controller, capsys):
    ns, rt = cluster.namespace("burst"), applied_runtime(cluster)
    names = [f"tj-{i:03d}" for i in range(500)]
    started = time.monotonic()
    created, done = burst(cluster, ns, names, rt)
    cluster.wait(lambda: len(created) >= 150, timeout=300, what="150 creations")
    controller.kill(CONTROLLER)  # SIGKILL: no cleanup, no lease release
    time.sleep(3)
    controller.restart(CONTROLLER)
    assert done.wait(600), "the burst finished"
    create_seconds = time.monotonic() - started
    settle = converge(cluster, ns, 500, timeout=900)
    assert_one_child_each_no_orphans(cluster, ns, names)
    events = controller_events(cluster, ns)
    assert not events or max(events.values()) <= 2, f"an event storm: {events.most_common(3)}"
    report(capsys, f"kill -9 during a burst of 500: 500/500 TrainJobs with exactly one JobSet and one PodGroup, "
                   f"0 orphans; burst {create_seconds:.0f} s, converged {settle:.0f} s after the last create; "
                   f"controller events {sum(events.values())} (max {max(events.values(), default=0)} per TrainJob and reason)")


def test_api_server_restart_during_a_burst(cluster, controller, capsys):
    ns, rt = cluster.namespace("apirestart"), applied_runtime(cluster)
    names = [f"tj-{i:03d}" for i in range(200)]
    pid = controller.load()[CONTROLLER]
    created, done = burst(cluster, ns, names, rt)
    cluster.wait(lambda: len(created) >= 60, timeout=300, what="60 creations")
    down = local.restart_control_plane_component(cluster.name, "kube-apiserver")
    assert done.wait(600)
    settle = converge(cluster, ns, 200, timeout=600)
    assert_one_child_each_no_orphans(cluster, ns, names)
    assert controller.load()[CONTROLLER] == pid and pid_alive(pid), "the controller was not restarted"
    report(capsys, f"kube-apiserver restart during a burst of 200: 200/200 converged {settle:.0f} s after the last "
                   f"create, API server away {down:.1f} s, controller not restarted")


def test_watches_expire_while_paused_and_relist_loses_nothing(cluster, controller, capsys):
    """Pause the controller, delete children behind its back, restart the API server (its watch cache
    starts at the current version), resume: the old versions are gone (410), the relist restores all."""
    ns, rt = cluster.namespace("expiry"), applied_runtime(cluster)
    names = [f"tj-{i:02d}" for i in range(20)]
    for name in names:
        create_retrying(cluster, ns, new_trainjob(name, rt, suspend=True, nodes=1))
    converge(cluster, ns, 20, timeout=120)
    expired_before = metric(cluster, "trainyard_informer_relists_total", cause="expired")
    pid = controller.load()[CONTROLLER]
    os.kill(pid, signal.SIGSTOP)
    try:
        for name in names[:10]:
            cluster.custom.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", name)
        local.restart_control_plane_component(cluster.name, "kube-apiserver")
    finally:
        os.kill(pid, signal.SIGCONT)
    resumed = time.monotonic()
    cluster.wait(lambda: len(children(cluster, ns)[0]) == 20, timeout=120, what="the deleted JobSets back")
    restored = time.monotonic() - resumed
    expired = metric(cluster, "trainyard_informer_relists_total", cause="expired") - expired_before
    assert expired >= 1, "the watches resumed from versions the restarted API server no longer has (410)"
    assert_one_child_each_no_orphans(cluster, ns, names)
    assert pid_alive(pid), "the same controller process"
    report(capsys, f"watch expiry (410) after a pause: {int(expired)} watches relisted, 10/10 JobSets deleted "
                   f"during the pause restored {restored:.1f} s after resume, no duplicates")


def test_paused_leader_is_replaced_and_reconciles_nothing_after(cluster, controller, tmp_path, capsys):
    """A standby takes the lease once the paused leader's lease expires; the old leader, resumed, exits
    without reconciling (its lease is past the renew deadline), so no TrainJob is reconciled by two."""
    paths, ports = local.ClusterPaths.for_name(cluster.name), cluster.spec.ports
    standby = ProcessTable(tmp_path)
    standby.start(ProcessSpec("standby", [
        sys.executable, "-m", "trainyard.cli.controller", "run", "--kubeconfig", str(paths.kubeconfig),
        "--lease-namespace", "trainyard-system", f"--metrics-address=127.0.0.1:{ports.base + 35}",
        f"--health-address=127.0.0.1:{ports.base + 36}"]))
    ns, rt = cluster.namespace("leader"), applied_runtime(cluster)
    names = [f"tj-{i:02d}" for i in range(10)]
    try:
        for name in names:
            create_retrying(cluster, ns, new_trainjob(name, rt, suspend=True, nodes=1))
        converge(cluster, ns, 10, timeout=120)
        lease = json.loads(cluster.kubectl("get", "lease", "-n", "trainyard-system", "trainyard-controller", "-o", "json"))
        leader, duration = lease["spec"]["holderIdentity"], lease["spec"]["leaseDurationSeconds"]
        pid = controller.load()[CONTROLLER]
        log = controller.log_dir / f"{CONTROLLER}.log"
        os.kill(pid, signal.SIGSTOP)
        paused = time.monotonic()
        cluster.wait(lambda: json.loads(cluster.kubectl("get", "lease", "-n", "trainyard-system", "trainyard-controller",
                                                        "-o", "json"))["spec"]["holderIdentity"] != leader,
                     timeout=duration + 30, what="the standby to take the lease")
        takeover = time.monotonic() - paused
        for name in names:  # work only a leader can do: recreate children deleted behind its back
            cluster.custom.delete_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", name)
        cluster.wait(lambda: len(children(cluster, ns)[0]) == 10, timeout=60, what="the new leader to reconcile")
        log_size = log.stat().st_size
        os.kill(pid, signal.SIGCONT)
        cluster.wait(lambda: not pid_alive(pid), timeout=30, what="the old leader to exit")
        after_resume = log.read_text(errors="replace")[log_size:]
        assert "lost the lease" in after_resume
        # A write already on the wire when SIGSTOP hit completes at resume (no client-side fence can stop it):
        # at most one per worker; nothing is reconciled once the replica has noticed the loss.
        in_flight, after_loss = after_resume.split("lost the lease", 1)
        assert RECONCILED not in after_loss, after_resume[-2000:]
        assert in_flight.count(RECONCILED) <= 5, after_resume[-2000:]
        assert_one_child_each_no_orphans(cluster, ns, names)
    finally:
        controller.restart(CONTROLLER)  # back as standby (and for admission), then lead again
        standby.stop_all()
    assert takeover <= duration + 2 * 2.0 + 1, f"takeover {takeover:.1f} s exceeds the lease ({duration} s) + retries"
    report(capsys, f"paused leader: standby took the lease {takeover:.1f} s after the pause (lease {duration} s); "
                   f"the resumed old leader finished {in_flight.count(RECONCILED)} "
                   f"reconcile(s) already on the wire, none after noticing the lost lease, and exited")
