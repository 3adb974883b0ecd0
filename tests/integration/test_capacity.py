"""`trainyard fit` and `trainyard report` through the console script against the live local cluster
(4 nodes x 8 GPUs, racks rack-0 = gpu-node-0/1 and rack-1 = gpu-node-2/3): a TrainJob that fits, one that
waits on quota, on queue capability, on topology and on fragmentation; the report's numbers equal what
the test created."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from trainyard.waiting import wait_for
from trainyard.k8s import ESTIMATED_AT_ANNOTATION, EXPECTED_START_ANNOTATION

from builders import new_trainjob, tenant_spec, torch_runtime
from tenant_helpers import (add_tenant, blocker_running, create, create_error, delete_cluster_object, podgroup, queued_blocker,
                            remove_tenant)

pytestmark = pytest.mark.integration

TRAINYARD = str(Path(sys.executable).parent / "trainyard")
GPU = "nvidia.com/gpu"


def trainyard(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TRAINYARD, *args, "--kubeconfig", cluster.kubeconfig], capture_output=True, text=True,
                          timeout=120)


def fit(cluster, tmp_path, tj: dict, *options: str) -> subprocess.CompletedProcess:
    path = tmp_path / f"{tj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(tj))
    return trainyard(cluster, "fit", str(path), *options)


def gpu_pod(name: str, ns: str, node: str, gpus: int) -> dict:
    """A pod of the default scheduler pinned to `node`; kwok keeps it running (it completes only Jobs' pods)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {GPU: str(gpus)}}}]}}


def busy_gpus(cluster) -> list[str]:
    """GPU pods bound and not finished anywhere (other tests' leftovers included)."""
    return [f"{p.metadata.namespace}/{p.metadata.name}" for p in cluster.core.list_pod_for_all_namespaces().items
            if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")
            and any((c.resources.limits or {}).get(GPU) for c in p.spec.containers)]


@pytest.fixture
def idle(cluster):
    """Start from a cluster whose GPUs are all free (namespaces of earlier tests are deleted asynchronously)."""
    cluster.wait(lambda: not busy_gpus(cluster), timeout=120, what="every GPU free")


def bound(cluster, ns: str, *names: str) -> None:
    cluster.wait(lambda: all(cluster.core.read_namespaced_pod(n, ns).status.phase == "Running" for n in names),
                 what=f"pods {names} running")


@pytest.fixture
def topology_runtime(cluster):
    name = f"rack-{uuid.uuid4().hex[:6]}"
    rt = torch_runtime(name, gpus=8)
    rt["spec"]["podGroupPolicy"] = {"volcano": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}
    create(cluster, rt)
    yield name
    delete_cluster_object(cluster, "clustertrainingruntime", name)


def test_fit_a_job_that_fits_then_one_beyond_the_hard_quota(cluster, shared, catalog_runtime, idle, tmp_path):
    tenant = add_tenant(cluster, tenant_spec(gpus=24, queue_gpus=32))
    try:
        ok = fit(cluster, tmp_path, new_trainjob("ok", catalog_runtime, namespace=tenant.ns, nodes=2))
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "ok: admitted" in ok.stdout and f"ok: queue {tenant.queue}: capability {GPU} 32, allocated 0" in ok.stdout
        assert ok.stdout.strip().splitlines()[-1].startswith("fits now: gpu-node-"), ok.stdout
        never = fit(cluster, tmp_path, new_trainjob("never", catalog_runtime, namespace=tenant.ns, nodes=4))
        assert never.returncode == 2, never.stdout
        verdict = f"quota tenant-quota in {tenant.ns} allows requests.{GPU} 24, this job needs 32: it can never start"
        assert f"refused: {verdict}" in never.stdout
        assert cluster.get_object("trainer.kubeflow.org", "v1alpha1", "trainjobs", "ok", tenant.ns) is None
        # the promise holds: admission refuses the create in the same words
        never = new_trainjob("never", catalog_runtime, namespace=tenant.ns, nodes=4)
        assert verdict in create_error(cluster, never, tenant.user)
    finally:
        remove_tenant(cluster, tenant.spec)


def test_fit_refuses_what_admission_refuses(cluster, shared, catalog_runtime, idle, tmp_path):
    tenant = add_tenant(cluster, tenant_spec())
    try:
        tj = new_trainjob("other-queue", catalog_runtime, namespace=tenant.ns, nodes=1,
                          annotations={"scheduling.volcano.sh/queue-name": "default"})
        refused = fit(cluster, tmp_path, tj)
        assert refused.returncode == 2 and "refused: admission:" in refused.stdout and tenant.queue in refused.stdout
    finally:
        remove_tenant(cluster, tenant.spec)


def test_fit_refuses_a_trainjob_whose_jobs_the_jobset_controller_cannot_create(cluster, shared, idle, tmp_path):
    """The runtime asks 1 GPU per node (requests and limits, as the catalog's torch runtime does); the TrainJob sets
    only a limit of 2. As upstream, the merge keeps the runtime's request: request 1, limit 2, which the API server
    refuses only when the Job's pods are validated. The webhook's dry-run of those pods refuses the TrainJob at
    create; fit says so through its own dry-run create, in the same words, and the promise holds: nothing is
    created."""
    runtime = f"one-gpu-{uuid.uuid4().hex[:6]}"
    rt = torch_runtime(runtime, gpus=1)
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    node["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    create(cluster, rt)
    tenant = add_tenant(cluster, tenant_spec())
    try:
        tj = new_trainjob("limit-only", runtime, namespace=tenant.ns, nodes=1, per_node={"limits": {GPU: "2"}})
        told = fit(cluster, tmp_path, tj)
        assert told.returncode == 2, told.stdout + told.stderr
        verdict = told.stdout.strip().splitlines()[-1]
        assert verdict.startswith("refused: the API server: "), verdict
        assert "must be equal to nvidia.com/gpu limit of 2" in verdict and "resourcesPerNode.requests" in verdict
        # with the request given too, the same TrainJob passes that check
        both = new_trainjob("both", runtime, namespace=tenant.ns, nodes=1,
                            per_node={"limits": {GPU: "2"}, "requests": {GPU: "2"}})
        assert "must be equal to" not in fit(cluster, tmp_path, both).stdout

        refused = create_error(cluster, tj, tenant.user)
        assert "must be equal to nvidia.com/gpu limit of 2" in refused and "resourcesPerNode.requests" in refused
        from kubernetes import client

        assert not client.BatchV1Api(cluster.api_client).list_namespaced_job(tenant.ns).items
        assert not cluster.core.list_namespaced_pod(tenant.ns).items
    finally:
        remove_tenant(cluster, tenant.spec)
        delete_cluster_object(cluster, "clustertrainingruntime", runtime)


def test_fit_waits_on_quota(cluster, shared, catalog_runtime, idle, tmp_path):
    tenant = add_tenant(cluster, tenant_spec(gpus=16, queue_gpus=32))
    try:
        cluster.apply(*queued_blocker(tenant, "hold"))
        blocker_running(cluster, tenant.ns, "hold")
        waits = fit(cluster, tmp_path, new_trainjob("q", catalog_runtime, namespace=tenant.ns, nodes=2))
        assert waits.returncode == 1, waits.stdout + waits.stderr
        assert waits.stdout.strip().splitlines()[-1] == \
            f"waits: quota tenant-quota in {tenant.ns} requests.{GPU} 16, used 8, this job needs 16"
    finally:
        remove_tenant(cluster, tenant.spec)


def test_fit_waits_on_queue_capability(cluster, shared, catalog_runtime, idle, tmp_path):
    tenant = add_tenant(cluster, tenant_spec(gpus=64, queue_gpus=16))
    try:
        cluster.apply(*queued_blocker(tenant, "hold"))
        blocker_running(cluster, tenant.ns, "hold")
        waits = fit(cluster, tmp_path, new_trainjob("q", catalog_runtime, namespace=tenant.ns, nodes=2))
        assert waits.returncode == 1, waits.stdout + waits.stderr
        assert waits.stdout.strip().splitlines()[-1] == \
            f"waits: queue {tenant.queue} capability {GPU} 16, allocated 8, this job needs 16"
        assert "ok: quota" in waits.stdout
        # --explain: each suggestion passed fit's checks; the first is then tried for real
        told = fit(cluster, tmp_path, new_trainjob("q", catalog_runtime, namespace=tenant.ns, nodes=2), "--explain")
        assert told.returncode == 1, told.stdout + told.stderr
        after = told.stdout.split("changes that make it fit now:\n", 1)[1].splitlines()
        assert after[0].startswith("  - numNodes 1 instead of 2: fits now: gpu-node-"), told.stdout
        assert after[1].startswith(f"  - after {tenant.ns}/hold ends (about "), told.stdout
        create(cluster, new_trainjob("one", catalog_runtime, namespace=tenant.ns, nodes=1), as_user=tenant.user)
        started = wait_for(lambda: (pg := podgroup(cluster, "one", tenant.ns)) and (pg.get("status") or {}).get(
            "phase") in ("Running", "Completed"), 90, "the suggested one-node job started", error=None)
        assert started, cluster.scheduling_picture(tenant.ns)
    finally:
        remove_tenant(cluster, tenant.spec)


def test_fit_waits_on_topology_where_the_same_job_without_it_fits(cluster, shared, catalog_runtime, topology_runtime,
                                                                   idle, tmp_path):
    """4 GPUs taken on gpu-node-0 (rack-0) and gpu-node-2 (rack-1): 2 x 8 GPUs fit on gpu-node-1 + gpu-node-3,
    but not within one rack."""
    tenant = add_tenant(cluster, tenant_spec(gpus=64))
    other = cluster.namespace("fill")
    try:
        cluster.apply(gpu_pod("a", other, "gpu-node-0", 4), gpu_pod("b", other, "gpu-node-2", 4))
        bound(cluster, other, "a", "b")
        waits = fit(cluster, tmp_path, new_trainjob("rack", topology_runtime, namespace=tenant.ns, nodes=2))
        assert waits.returncode == 1, waits.stdout + waits.stderr
        last = waits.stdout.strip().splitlines()[-1]
        assert last.startswith("waits: topology: the gang must fit in one rack (networkTopology hard, "
                               "highestTierAllowed 1)"), last
        assert "free per rack: rack-0 12, rack-1 12" in last
        # --explain names the runtimes a TrainJob in the namespace could switch to (same framework, its catalog pin)
        told = fit(cluster, tmp_path, new_trainjob("rack", topology_runtime, namespace=tenant.ns, nodes=2), "--explain")
        widen = next(x for x in told.stdout.splitlines() if x.startswith("  - networkTopology highestTierAllowed 2 ("))
        assert widen.endswith("fits in spine spine-0: gpu-node-1 1 pod, gpu-node-3 1 pod"), told.stdout
        assert "(no runtime of this framework usable in" in widen, widen  # nothing pins tier 2 here
        plain = fit(cluster, tmp_path, new_trainjob("plain", catalog_runtime, namespace=tenant.ns, nodes=2))
        assert plain.returncode == 0, plain.stdout
        assert "fits now: gpu-node-1 1 pod, gpu-node-3 1 pod" in plain.stdout
    finally:
        remove_tenant(cluster, tenant.spec)


def test_fit_waits_on_fragmentation(cluster, shared, catalog_runtime, idle, tmp_path):
    """4 GPUs taken on every node: 16 free, as many as 2 x 8 needs, but no node has 8."""
    tenant = add_tenant(cluster, tenant_spec(gpus=64))
    other = cluster.namespace("fill")
    try:
        cluster.apply(*[gpu_pod(f"p{i}", other, f"gpu-node-{i}", 4) for i in range(4)])
        bound(cluster, other, "p0", "p1", "p2", "p3")
        waits = fit(cluster, tmp_path, new_trainjob("frag", catalog_runtime, namespace=tenant.ns, nodes=2))
        assert waits.returncode == 1, waits.stdout + waits.stderr
        last = waits.stdout.strip().splitlines()[-1]
        assert last.startswith(f"waits: fragmented: 16 free {GPU} in total, enough for this job's 16, but no set of "
                               f"nodes hosts its 2 pods of up to 8 {GPU}"), last
        small = fit(cluster, tmp_path, new_trainjob("small", catalog_runtime, namespace=tenant.ns, nodes=1))
        assert small.returncode == 1 and "fragmented" in small.stdout  # even one 8-GPU pod has no node
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_pod_larger_than_every_node_is_never_and_volcano_never_places_it(cluster, shared, catalog_runtime, idle,
                                                                          tmp_path):
    """fit's "can never start" for 1 x 16 GPUs on 8-GPU nodes is what then happens: Volcano reports the gang
    unschedulable and binds none of it (before, fit said "waits: fragmented")."""
    tenant = add_tenant(cluster, tenant_spec(gpus=64))
    try:
        tj = new_trainjob("huge", catalog_runtime, namespace=tenant.ns, nodes=1)
        tj["spec"]["trainer"]["resourcesPerNode"] = {"limits": {GPU: "16"}}
        never = fit(cluster, tmp_path, tj)
        assert never.returncode == 2, never.stdout + never.stderr
        assert never.stdout.strip().splitlines()[-1] == (
            f"refused: a pod of this job needs 16 {GPU} and the largest node, gpu-node-0, has 8 allocatable: "
            "it can never start; use more, smaller pods (numNodes)"), never.stdout
        create(cluster, tj)

        def unschedulable():
            group = podgroup(cluster, "huge", tenant.ns)
            conditions = ((group or {}).get("status") or {}).get("conditions") or []
            return any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conditions)

        cluster.wait(unschedulable, timeout=120, what="Volcano to report the 16-GPU gang unschedulable")
        pods = cluster.core.list_namespaced_pod(tenant.ns).items
        assert pods and not any(p.spec.node_name for p in pods), [(p.metadata.name, p.spec.node_name) for p in pods]
    finally:
        remove_tenant(cluster, tenant.spec)


def test_report_numbers_match_what_was_created(cluster, shared, catalog_runtime, idle, tmp_path):
    """A running 8-GPU gang in a tenant queue of 16, a 2 x 8 TrainJob waiting on that queue, a 4-GPU pod elsewhere."""
    tenant = add_tenant(cluster, tenant_spec(gpus=64, queue_gpus=16))
    other = cluster.namespace("fill")
    try:
        cluster.apply(gpu_pod("four", other, "gpu-node-3", 4))
        bound(cluster, other, "four")
        cluster.apply(*queued_blocker(tenant, "hold"))  # 8 GPUs: not on gpu-node-3, 4 are taken there
        blocker_running(cluster, tenant.ns, "hold")
        create(cluster, new_trainjob("waiting", catalog_runtime, namespace=tenant.ns, nodes=2), as_user=tenant.user)
        cluster.wait(lambda: ((podgroup(cluster, "waiting", tenant.ns) or {}).get("status") or {}).get("phase")
                     == "Pending", timeout=90, what="the waiting gang kept out of its queue")

        def reported():
            result = trainyard(cluster, "report", "--out", str(tmp_path / "report"), "--default-run", "1200")
            assert result.returncode == 0, result.stderr
            data = json.loads((tmp_path / "report" / "report.json").read_text())
            pending = [p for p in data["pending"] if p["podgroup"] == f"{tenant.ns}/waiting"]
            return pending and "queue resource quota insufficient" in pending[0]["why"] and (result, data)

        result, data = cluster.wait(reported, timeout=60, what="Volcano's enqueue verdict in the report")
        assert data["totals"] == {"allocatable": 32, "allocated": 12, "free": 20, "fragmented": 4, "nodes": 4}
        node3 = next(n for n in data["nodes"] if n["node"] == "gpu-node-3")
        assert (node3["rack"], node3["allocated"], node3["free"], node3["fragmented"]) == ("rack-1", 4, 4, 4)
        assert sum(r["allocated"] for r in data["racks"]) == 12
        queue = next(q for q in data["queues"] if q["queue"] == tenant.queue)
        assert (queue["capability"], queue["allocated"], queue["running_gangs"], queue["pending_gangs"]) == (16, 8, 1, 1)
        gpu_quota = next(q for q in data["quotas"] if q["namespace"] == tenant.ns and q["resource"] == f"requests.{GPU}")
        assert (gpu_quota["hard"], gpu_quota["used"]) == (64, 8)  # the running pod (no pod of a gang not admitted)
        assert "GPUs by rack" in result.stdout and "queue resource quota insufficient" in result.stdout
        # the text alone (no --out, no --all) reads the enqueue Events of the shown gangs' namespaces only: the same why
        text = trainyard(cluster, "report")
        assert text.returncode == 0, text.stderr
        assert f"{tenant.ns}/waiting" in text.stdout, text.stdout
        assert "queue resource quota insufficient" in " ".join(text.stdout.replace("│", " ").split()), text.stdout
        page = (tmp_path / "report" / "index.html").read_text()
        assert all((tmp_path / "report" / png).stat().st_size > 0 and png in page
                   for png in ("gpus_by_node.png", "gpus_by_rack.png", "queues.png", "quotas.png"))
        # start estimates: the blocker (no TrainJob, so no trainerStatus) reports no progress, so when the waiting
        # gang starts is the stated default's guess: report, fit and the controller's Event say there is no estimate
        # (a precise time built on the default was off by a median of 55 times the real wait, bench start_estimates)
        (waiting,) = [p for p in data["pending"] if p["podgroup"] == f"{tenant.ns}/waiting"]
        assert_no_estimate(waiting["estimate"], position=1, queue=tenant.queue)
        third = fit(cluster, tmp_path, new_trainjob("third", catalog_runtime, namespace=tenant.ns, nodes=2),
                    "--default-run", "1200")
        line = next(x for x in third.stdout.splitlines() if x.strip().startswith("estimate: "))
        assert_no_estimate(line, position=2, queue=tenant.queue)

        def estimate_events():
            events = cluster.core.list_namespaced_event(tenant.ns, field_selector="involvedObject.name=waiting").items
            return [e for e in events if e.reason == "TrainJobStartEstimate" and e.involved_object.kind == "TrainJob"]

        (event,) = cluster.wait(estimate_events, timeout=60, what="the start estimate Event on the waiting TrainJob")
        assert event.type == "Normal" and "(around " not in event.message, event.message
        assert_no_estimate(event.message, position=1, queue=tenant.queue)
        assert EXPECTED_START_ANNOTATION not in (event.metadata.annotations or {}), event.metadata.annotations
        # the promise: the waiting gang starts as the job ahead of it ends (here: its pods and group are deleted;
        # a group left Inqueue would keep reserving its 8 GPUs in the queue)
        cluster.apps.delete_namespaced_replica_set("hold", tenant.ns, propagation_policy="Background")
        cluster.custom.delete_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", tenant.ns, "podgroups", "hold")
        started = wait_for(lambda: (pg := podgroup(cluster, "waiting", tenant.ns)) and (pg.get("status") or {}).get(
            "phase") in ("Running", "Completed"), 90, "the waiting gang started once the blocker is gone", error=None)
        assert started, (f"{json.dumps((podgroup(cluster, 'waiting', tenant.ns) or {}).get('status'))}\n"
                         f"{cluster.scheduling_picture(tenant.ns)}")
    finally:
        remove_tenant(cluster, tenant.spec)


def test_a_gang_behind_a_trainjob_that_reports_its_end_is_given_a_time(cluster, shared, catalog_runtime, idle,
                                                                         tmp_path):
    """A running TrainJob whose trainer reports 20 min left fills its tenant's queue of 8 GPUs: the gang waiting
    behind it is told it starts in about 20 min by report, the controller's Event and fit; a gang behind that one
    waits for a run time nobody reports, and is told there is no estimate."""
    from trainyard.timestamps import format_time, utc_now

    tenant = add_tenant(cluster, tenant_spec(gpus=64, queue_gpus=8))
    try:
        hour = [{"targetJobs": [{"name": "node"}],
                 "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "3600s"}}}]
        create(cluster, new_trainjob("running", catalog_runtime, namespace=tenant.ns, nodes=1, podTemplateOverrides=hour),
               as_user=tenant.user)
        cluster.wait(lambda: any(p.status.phase == "Running" for p in cluster.core.list_namespaced_pod(tenant.ns).items),
                     timeout=90, what="the running TrainJob's pod")
        report = {"status": {"trainerStatus": {"progressPercentage": 50, "estimatedRemainingSeconds": 1200,
                                               "lastUpdatedTime": format_time(utc_now())}}}
        cluster.kubectl("patch", "trainjob", "running", "-n", tenant.ns, "--subresource=status", "--type=merge",
                        "-p", json.dumps(report))  # what the trainer's update_trainjob_status writes
        create(cluster, new_trainjob("waiting", catalog_runtime, namespace=tenant.ns, nodes=1), as_user=tenant.user)
        cluster.wait(lambda: ((podgroup(cluster, "waiting", tenant.ns) or {}).get("status") or {}).get("phase")
                     == "Pending", timeout=90, what="the waiting gang kept out of its full queue")

        def reported():
            result = trainyard(cluster, "report", "--out", str(tmp_path / "report"))
            assert result.returncode == 0, result.stderr
            data = json.loads((tmp_path / "report" / "report.json").read_text())
            return [p for p in data["pending"] if p["podgroup"] == f"{tenant.ns}/waiting"]

        (waiting,) = cluster.wait(reported, timeout=60, what="the waiting gang in the report")
        assert 18 <= estimate_minutes(waiting["estimate"], position=1, queue=tenant.queue) <= 20, waiting

        def estimate_events():
            events = cluster.core.list_namespaced_event(tenant.ns, field_selector="involvedObject.name=waiting").items
            return [e for e in events if e.reason == "TrainJobStartEstimate" and e.involved_object.kind == "TrainJob"]

        (event,) = cluster.wait(estimate_events, timeout=60, what="the start estimate Event on the waiting TrainJob")
        assert "(around " in event.message, event.message
        assert 18 <= estimate_minutes(event.message, position=1, queue=tenant.queue) <= 20, event.message
        marks = event.metadata.annotations or {}
        expected_in = float(marks[EXPECTED_START_ANNOTATION]) - float(marks[ESTIMATED_AT_ANNOTATION])
        assert 18 * 60 <= expected_in <= 20 * 60 + 30, marks  # the same estimate, to the second, for programs
        third = fit(cluster, tmp_path, new_trainjob("third", catalog_runtime, namespace=tenant.ns, nodes=1))
        line = next(x for x in third.stdout.splitlines() if x.strip().startswith("estimate: "))
        assert_no_estimate(line, position=2, queue=tenant.queue)
    finally:
        remove_tenant(cluster, tenant.spec)


def assert_no_estimate(text: str, position: int, queue: str) -> None:
    assert "no start estimate: it waits for jobs whose end is unknown" in text, text
    assert f"position {position} in queue {queue}" in text, text
    assert "starts in about" not in text, text


def estimate_minutes(text: str, position: int, queue: str) -> int:
    """The minutes of `starts in about N min, position P in queue Q` (checking P and Q)."""
    import re

    found = re.search(r"starts in about (\d+) min(?: \(around [^)]*\))?, position (\d+) in queue (\S+?)(?:\s|\(|$)",
                      text)
    assert found and int(found.group(2)) == position and found.group(3) == queue, text
    return int(found.group(1))


def test_fit_agrees_with_what_then_happens_on_a_slice_of_the_agreement_bench(cluster, shared, idle):
    """bench/fit_agreement.py's verdict -> outcome check on one case per verdict class (the bench runs 200)."""
    from bench_modules import load_bench

    bench_module = load_bench("fit_agreement")
    platform = bench_module.Platform(f"fs{uuid.uuid4().hex[:4]}")
    bench = bench_module.Bench(cluster.name, platform, start_window=15)
    a, b, c = (platform.name(x) for x in "abc")
    gang, gangless, _ = platform.runtimes
    privileged, ghost = platform.refused_runtimes
    case = bench_module.Case
    cases = [case(a, gang, 2, 8, None, True, False),            # fits -> placed
             case(b, gangless, 2, 8, None, False, False),       # fits, as the tenant gang of a gang-less runtime
             case(b, gang, 3, 8, None, True, False),            # refused: quota 16 -> refused at create
             case(c, gang, 2, 8, None, True, False),            # refused: queue capability 12 -> never placed
             case(a, gang, 1, 16, platform.high, True, False),  # refused: larger than every node -> never placed
             case(a, gang, 3, 8, None, True, True),             # waits: the load holds GPUs -> placed once it left
             case(a, privileged, 1, 8, None, True, False),      # refused: Pod Security refuses its pods -> at create
             case(b, ghost, 1, 8, None, True, False)]           # refused: no such ServiceAccount -> at create
    cluster.created_namespaces.extend(platform.tenants)
    bench.setup(shared=False)
    try:
        figures = bench_module.run_all(bench, cases, echo=lambda *_: None)
    finally:
        bench.teardown()
    assert figures["disagreements"] == [] and figures["agreed"] == len(cases), figures
    assert figures["table"] == {"fits": {"placed": 2}, "refused": {"refused at create": 3, "never placed": 2},
                                "waits": {"placed after room was made": 1}}, figures["table"]


def test_report_and_fit_read_no_finished_podgroup(cluster, topology_runtime, idle):
    """A TrainJob whose pods complete: Volcano marks its PodGroup Completed, and the PodGroups `report`/`fit` read
    (`status.phase!=Completed`, a field selector the platform's PodGroup CRD allows) leave it out while the whole
    list still has it; a running one is read."""
    from trainyard.capacity import live
    from trainyard.controller.runtime.apiserver import ApiServer

    ns = cluster.namespace("finished")

    def lasting(seconds: int) -> list[dict]:  # kwok completes the pods after this long
        return [{"targetJobs": [{"name": "node"}], "metadata": {"annotations": {
            "pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds}s"}}}]

    create(cluster, new_trainjob("done", topology_runtime, namespace=ns, nodes=1, podTemplateOverrides=lasting(1)))
    create(cluster, new_trainjob("busy", topology_runtime, namespace=ns, nodes=1, podTemplateOverrides=lasting(600)))
    phase = lambda name: ((podgroup(cluster, name, ns) or {}).get("status") or {}).get("phase")  # noqa: E731
    cluster.wait(lambda: phase("done") == "Completed" and phase("busy") == "Running", timeout=120,
                 what="one PodGroup Completed, the other Running")
    api = ApiServer.from_kubeconfig(cluster.kubeconfig)
    read = {g["metadata"]["name"] for g in live.unfinished_pod_groups(api) if g["metadata"]["namespace"] == ns}
    everything = {g["metadata"]["name"] for g in api.list(live.PODGROUPS, ns)["items"]}
    assert read == {"busy"} and everything == {"done", "busy"}, (read, everything)  # no fallback to the whole list


def test_fit_reads_each_object_it_checks_once(cluster, catalog_runtime):
    """fit's reads: the runtime, JobSet and Namespace of a TrainJob are asked for ahead of the checks, once each,
    and every reader gets its own copy."""
    from trainyard.capacity import live
    from trainyard.controller.runtime.apiserver import ApiServer

    ns = cluster.namespace("remembered")
    sent: list[tuple[str, str]] = []
    api = ApiServer.from_kubeconfig(cluster.kubeconfig)
    api.observe = lambda method, resource: sent.append((method, resource))
    reads = live.RememberedReads(api)
    wanted = live.fit_reads(new_trainjob("probe", catalog_runtime, namespace=ns, nodes=1))
    assert {(r.plural, name) for r, name, _ in wanted} >= {("clustertrainingruntimes", catalog_runtime),
                                                            ("jobsets", "probe"), ("namespaces", ns)}
    for resource, name, namespace in wanted:
        reads.prefetch(resource, name, namespace)
    first = reads.get(live.NAMESPACES, ns)
    first["metadata"]["labels"] = {"changed": "by a reader"}
    again = reads.get(live.NAMESPACES, ns)
    assert again is not None and (again["metadata"].get("labels") or {}).get("changed") is None
    assert reads.get(wanted[0][0], wanted[0][1], wanted[0][2])["metadata"]["name"] == catalog_runtime
    assert reads.get(live.JOBS, "none-such", ns) is None  # a 404 is remembered as None
    assert sorted(sent) == sorted([("GET", r.plural) for r, _, _ in wanted] + [("GET", "jobs")]), sent
