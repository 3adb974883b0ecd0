"""A tiny gang trace through the real path (TrainJobs -> trainyard controller -> JobSet + PodGroup ->
vc-scheduler with the generated `gang` profile; kwok finishes pods after their duration) on a cluster of its
own: 8 nodes in 4 racks under 2 spines (port base 29700, `TRAINYARD_TRACE_TEST_PORT_BASE` to move it)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from trainyard.cluster import local
from trainyard.cluster.spec import ClusterSpec
from trainyard.schedtrace import metrics as M
from trainyard.schedtrace.replay import Replay
from trainyard.schedtrace.summary import summarize
from trainyard.scheduling.trace import DEFAULT_TENANTS, generate
from trainyard.toolchain.build import ensure_built

pytestmark = pytest.mark.integration

SPEC = ClusterSpec(name="trainyard-trace-test", nodes=8, racks=4, spines=2, timed_pods=True,
                   port_base=int(os.environ.get("TRAINYARD_TRACE_TEST_PORT_BASE", "29700")),
                   feature_gates="TrainJobStatus=false", monitoring=False)
CAPACITY = SPEC.nodes * SPEC.gpus_per_node
GRACE = 8


def reserved_nodes(replay) -> list[str]:
    """Nodes still carrying a reservation/hold taint (none may be left after a run)."""
    from trainyard import k8s as K

    return [n.metadata.name for n in replay.core.list_node().items for t in (n.spec.taints or [])
            if t.key == K.RESERVATION_TAINT]


def controller_metric(name: str) -> dict[str, float]:
    """Namespace -> value of a counter on the cluster's TrainJob controller's /metrics."""
    import re
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{SPEC.ports.port('controller_metrics')}/metrics", timeout=10) as page:
        text = page.read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(rf'^{name}{{namespace="([^"]+)"}} (\S+)$', text, re.M)}


def reclaimed_leftovers(api) -> list[str]:
    """TrainJobs still suspended or marked as reclaimed (none may be left after a run)."""
    from trainyard import k8s as K
    from trainyard.capacity import live

    return [t["metadata"]["name"] for t in live.list_items(api, live.TRAINJOBS)
            if {K.RECLAIMED_FOR_ANNOTATION, K.CHECKPOINT_REQUESTED_ANNOTATION} & set(t["metadata"].get("annotations") or {})
            or t["spec"].get("suspend")]


@pytest.fixture(scope="module")
def replay():
    ensure_built(*local.REQUIRED_TOOLS)
    if local.is_running(SPEC.name):
        local.down(SPEC.name, echo=lambda *_: None)
    local.up(SPEC, echo=lambda *_: None)
    try:
        replay = Replay(SPEC.name, DEFAULT_TENANTS, CAPACITY, echo=lambda *_: None)
        replay.setup()
        yield replay
    finally:
        local.down(SPEC.name, echo=lambda *_: None)


@pytest.fixture(autouse=True)
def clean_after(replay):
    """Each test reuses the job names: whatever it leaves (a failed one too) is deleted before the next starts."""
    yield
    replay.clean()


def test_a_tiny_trace_finishes_whole_gangs_within_their_tier_and_for_their_duration(replay):
    trace = generate(37, 10, CAPACITY, duration_scale=0.2, rack_nodes=2, spine_nodes=4)  # 4 gangs, 6 singles, 22 s
    assert any(job.is_gang for job in trace) and any(not job.is_gang for job in trace)
    record = replay.run(trace, "gang", gang=True, direct=False, timeout=240)
    assert not record.refused and not record.unfinished, (record.refused, record.unfinished)
    pods = list(record.pods.values())
    rack_of, spine_of = replay.topology()
    figures = summarize(trace, pods, record.submitted, record.end, CAPACITY,
                        {t.name: t.weight for t in DEFAULT_TENANTS}, rack_of, spine_of)
    assert figures["jobs_finished"] == len(trace)
    assert figures["partial_gangs"] == []
    assert figures["topology"]["beyond_allowed_tier"] == []
    grouped = M.by_job(pods)
    for job in trace:
        mine = grouped[job.name]
        assert len(mine) == job.pods and all(p.succeeded for p in mine)
        for pod in mine:  # kwok ran each pod for its job's duration (the Stage's annotated delay)
            assert job.duration - 1 <= pod.ended - pod.bound <= job.duration + 10, (job, pod)
    # The allocation figure is the same GPU-seconds the pod records add up to, and never above capacity.
    line = M.timeline(trace, grouped, record.submitted, record.end, step=0.25)
    held_gpu_seconds = sum(p.gpus * (p.ended - p.bound) for p in pods)
    assert float(line.held.sum() * 0.25) == pytest.approx(held_gpu_seconds, rel=0.02)
    assert line.held.max() <= CAPACITY
    allocation, saturated_s = M.allocation_while_saturated(line, CAPACITY)
    assert saturated_s > 0 and 0 < allocation <= 1


def test_the_kube_scheduler_baseline_stays_kube_scheduler(replay):
    """Tenant namespaces make every TrainJob a Volcano gang; the baseline runs with the namespaces unlabelled."""
    trace = generate(49, 11, CAPACITY, duration_scale=0.1, rack_nodes=2, spine_nodes=4)  # done by 11 s
    record = replay.run(trace, "kube-scheduler", gang=False, direct=False, timeout=180)
    assert not record.refused and not record.unfinished, (record.refused, record.unfinished)
    groups = [g for t in DEFAULT_TENANTS for g in replay.custom.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", t.name, "podgroups")["items"] if g["metadata"]["name"] in {j.name for j in trace}]
    assert groups == []
    replay.clean()
    replay._tenant_namespaces(gang=True)
    labels = replay.core.read_namespace(DEFAULT_TENANTS[0].name).metadata.labels
    assert labels.get("trainyard.dev/queue") == DEFAULT_TENANTS[0].name


def test_a_reservation_drains_one_rack_for_a_starving_gang_while_the_rest_stays_busy(replay):
    """Elastic queues (`capacity`) let a backlog of one queue take every node that frees up, so a rack-bound
    gang of another queue could wait until the backlog is gone. With trainyard's reservation the gang gets the
    rack's nodes as soon as they drain, and no other pod is bound there meanwhile."""
    from trainyard.capacity import live
    from trainyard.capacity.reserver import Reserver
    from trainyard.queues.scheduler_config import SchedulerSettings
    from trainyard.scheduling.trace import TraceJob

    heavy, light = DEFAULT_TENANTS[0].name, DEFAULT_TENANTS[1].name
    fillers = [TraceJob(f"f{i}", light, 0.0, 12.0 + 1.5 * i, 1, 8, None) for i in range(SPEC.nodes)]
    backlog = [TraceJob(f"b{i}", light, 1.0, 30.0, 1, 8, None) for i in range(10)]
    gang = TraceJob("g", heavy, 2.0, 5.0, 2, 8, 1)
    replay.use_scheduler_settings(SchedulerSettings(profile="gang", queue_plugin="capacity"))
    reserver = Reserver(live.connect(str(local.ClusterPaths.for_name(SPEC.name).kubeconfig)), after_s=2.0,
                        period=0.5).start()
    try:
        record = replay.run(fillers + backlog + [gang], "gang-capacity-reserve", gang=True, direct=True, timeout=180)
    finally:
        history = reserver.finish()
        replay.use_scheduler_settings(SchedulerSettings())
    assert not record.refused and not record.unfinished, (record.refused, record.unfinished)
    held = [r for _, r in history if r is not None]
    assert held and {r.gang for r in held} == {(heavy, "g")}, history
    reserved = set(held[0].nodes)
    pods = M.by_job(record.pods.values())
    gang_pods = pods["g"]
    assert {p.node for p in gang_pods} == reserved
    gang_start = min(p.bound for p in gang_pods)
    drained = max(p.ended for job, mine in pods.items() if job.startswith("f") for p in mine if p.node in reserved)
    assert gang_start <= drained + 5, (gang_start, drained)
    intruders = [(job, p.node, p.bound) for job, mine in pods.items() if job.startswith("b")
                 for p in mine if p.node in reserved and p.bound < gang_start]
    assert intruders == []
    # without the reservation the backlog would have held every node until its first pods ended (~12 + 30 s)
    assert gang_start < min(p.ended for job, mine in pods.items() if job.startswith("b") for p in mine)
    assert reserved_nodes(replay) == []


@pytest.mark.parametrize("rule, target, holds", [("deserved", "deserved", False), ("final-share", "fair", True)])
def test_gang_aware_reclaim_suspends_whole_trainjobs_of_the_lender_and_resumes_them(replay, rule, target, holds):
    """Elastic queues lend the whole cluster to one queue's long jobs; a gang of a queue below its deserved share
    then waits for them all. trainyard's reclaim suspends two whole TrainJobs of the lender in one rack (their
    pods are deleted, never one pod of a gang), the gang starts there, and the victims are resumed and rerun.
    Under both rules: against the static deserved share, and against the fair share of current demand (the
    lender keeps 48 of the 48 GPUs its weight is owed while the gang's 16 wait), there with the freed nodes held
    (tainted) for the gang, and no taint left afterwards."""
    from trainyard import k8s as K
    from trainyard.capacity import live
    from trainyard.capacity.reclaimer import Reclaimer
    from trainyard.queues.scheduler_config import SchedulerSettings
    from trainyard.scheduling.trace import TraceJob

    heavy, light = DEFAULT_TENANTS[0].name, DEFAULT_TENANTS[1].name
    lender = [TraceJob(f"l{i}", light, 0.0, 40.0, 1, 8, None) for i in range(SPEC.nodes)]
    gang = TraceJob("g", heavy, 3.0, 5.0, 2, 8, 1)
    replay.use_scheduler_settings(SchedulerSettings(profile="gang", queue_plugin="capacity"))
    api = live.connect(str(local.ClusterPaths.for_name(SPEC.name).kubeconfig))
    tainted: set[str] = set()
    stop = threading.Event()

    def watch_taints() -> None:  # which nodes ever carried a reservation taint during the run
        while not stop.wait(0.3):
            for node in live.list_items(api, live.NODES):
                if any(t.get("key") == K.RESERVATION_TAINT for t in node.get("spec", {}).get("taints") or []):
                    tainted.add(node["metadata"]["name"])

    watcher = threading.Thread(target=watch_taints, daemon=True)
    watcher.start()
    reclaimer = Reclaimer(api, after_s=2.0, period=0.5, rule=rule, target=target, holds=holds).start()
    try:
        record = replay.run(lender + [gang], "gang-capacity-reclaim", gang=True, direct=False, timeout=240)
    finally:
        history = reclaimer.finish()
        stop.set()
        watcher.join()
        replay.use_scheduler_settings(SchedulerSettings())
    assert not record.refused and not record.unfinished, (record.refused, record.unfinished)
    assert [e.gang for _, e in history] == [(heavy, "g")], history
    eviction = history[0][1]
    victims = {name for _, name in eviction.victims}
    assert len(victims) == 2 and all(name.startswith("l") for name in victims)
    pods = M.by_job(record.pods.values())
    gang_start = min(p.bound for p in pods["g"])
    assert {p.node for p in pods["g"]} == set(eviction.nodes) and gang_start < 30, (pods["g"], eviction)
    assert tainted == (set(eviction.nodes) if holds else set()), tainted
    for name in victims:  # evicted whole before the gang started, then run again to the end
        first, *rest = sorted(pods[name], key=lambda p: p.bound)
        assert not first.succeeded and first.ended <= gang_start + 1
        assert rest and rest[-1].succeeded
    for name in {j.name for j in lender} - victims:
        assert len(pods[name]) == 1 and pods[name][0].succeeded
    assert M.partial_gangs([gang], pods, 1.0, record.end) == []
    assert reclaimed_leftovers(api) == []
    assert reserved_nodes(replay) == []


def test_reclaim_asks_victims_that_checkpoint_first_and_takes_those_that_lose_least(replay):
    """The lender's TrainJobs on one rack report checkpoints (as `trainyard_checkpoint` does, through trainerStatus);
    the others report none. Reclaim takes that rack for the waiting gang (the least work lost) and asks its two
    jobs to save first: the one that saves is suspended once its fresh checkpoint is reported, the one that ignores
    the ask when its tenant's grace period (8 s here) ends. Each gets a `Reclaimed` Event naming the gang, the
    checkpoint it resumes from and the work lost; nothing stays asked, suspended or tainted afterwards."""
    from trainyard import k8s as K
    from trainyard.capacity import live
    from trainyard.capacity.reclaimer import Reclaimer
    from trainyard.controller.runtime.status_server import FIELD_MANAGER, status_apply_body
    from trainyard.queues.scheduler_config import SchedulerSettings
    from trainyard.scheduling.trace import TraceJob
    from trainyard.timestamps import format_epoch, parse_time

    heavy, light = DEFAULT_TENANTS[0].name, DEFAULT_TENANTS[1].name
    lender = [TraceJob(f"l{i}", light, 0.0, 60.0, 1, 8, None) for i in range(SPEC.nodes)]
    gang = TraceJob("g", heavy, 8.0, 5.0, 2, 8, 1)
    replay.use_scheduler_settings(SchedulerSettings(profile="gang", queue_plugin="capacity"))
    api = live.connect(str(local.ClusterPaths.for_name(SPEC.name).kubeconfig))
    api.merge_patch(live.NAMESPACES, light, {"metadata": {"annotations": {K.NAMESPACE_CHECKPOINT_GRACE_ANNOTATION: str(GRACE)}}})
    saving: dict[str, str] = {}  # TrainJob -> "saves" or "ignores"
    asked_at: dict[str, float] = {}
    stop = threading.Event()

    def report(name: str, step: int) -> None:
        now = format_epoch(time.time())
        api.apply_status(status_apply_body(light, name, {"trainerStatus": {"metrics": [
            {"name": K.CHECKPOINT_STEP_METRIC, "value": str(step)}, {"name": K.CHECKPOINT_TIME_METRIC, "value": now}],
            "lastUpdatedTime": now}}), FIELD_MANAGER)

    def trainers() -> None:  # the lenders' training processes
        while not stop.wait(0.3):
            if not saving:
                nodes = {n["metadata"]["name"]: n["metadata"]["labels"][K.RACK_LABEL] for n in live.list_items(api, live.NODES)}
                on = {p["spec"]["nodeName"]: p["metadata"]["annotations"][K.VOLCANO_GROUP_ANNOTATION]
                      for p in live.list_items(api, live.PODS, light) if p["spec"].get("nodeName")}
                if len(on) == len(lender):
                    rack = min(nodes[n] for n in on)
                    first, second = sorted(job for node, job in on.items() if nodes[node] == rack)
                    saving.update({first: "saves", second: "ignores"})
                    for name in saving:
                        report(name, 10)
            for trainjob in live.list_items(api, live.TRAINJOBS, light):
                name = trainjob["metadata"]["name"]
                if K.CHECKPOINT_REQUESTED_ANNOTATION in (trainjob["metadata"].get("annotations") or {}) \
                        and name not in asked_at:
                    asked_at[name] = time.time()
                    if saving.get(name) == "saves":  # a step to finish and the save: a second
                        threading.Timer(1.0, report, (name, 11)).start()

    thread = threading.Thread(target=trainers, daemon=True)
    thread.start()
    reclaimer = Reclaimer(api, after_s=2.0, period=0.5, rule="fair-sharing", holds=True).start()
    try:
        record = replay.run(lender + [gang], "gang-capacity-reclaim", gang=True, direct=False, timeout=300)
    finally:
        history = reclaimer.finish()
        stop.set()
        thread.join()
        api.merge_patch(live.NAMESPACES, light, {"metadata": {"annotations": {K.NAMESPACE_CHECKPOINT_GRACE_ANNOTATION: None}}})
        replay.use_scheduler_settings(SchedulerSettings())
    assert not record.refused and not record.unfinished, (record.refused, record.unfinished)
    assert [e.gang for _, e in history] == [(heavy, "g")], history
    victims = sorted(name for _, name in history[0][1].victims)
    assert victims == sorted(saving), (victims, saving)  # the rack whose jobs lose least
    assert sorted(asked_at) == victims
    pods = M.by_job(record.pods.values())
    gone = {name: min(p.ended for p in pods[name] if not p.succeeded) for name in victims}
    saver, ignorer = (next(n for n, how in saving.items() if how == kind) for kind in ("saves", "ignores"))
    asked = {name: at - record.started_epoch for name, at in asked_at.items()}  # the records' time base
    assert asked[saver] + 1.0 <= gone[saver] <= asked[saver] + 4.0, (gone, asked)
    # the grace runs from the end of the ask's noted second; these processes see the ask up to two polls (0.6 s) late
    assert gone[ignorer] >= min(asked.values()) + GRACE - 0.6, (gone, asked)
    events = {e["involvedObject"]["name"]: e["message"] for e in live.list_items(api, live.EVENTS, light)
              if e.get("reason") == "Reclaimed"  # this run's (earlier tests reclaimed TrainJobs of the same names)
              and parse_time(e["firstTimestamp"]).timestamp() >= record.started_epoch - 1}
    assert "after it saved the checkpoint it was asked for" in events[saver] and "step 11" in events[saver], events
    assert "grace period ended" in events[ignorer] and "step 10" in events[ignorer], events
    assert all(f"gang {heavy}/g" in events[name] for name in victims)
    assert 0 < reclaimer.lost_gpu_seconds[light] < 8 * 30, reclaimer.lost_gpu_seconds  # not the minute since start
    for name in victims:
        first, *rest = sorted(pods[name], key=lambda p: p.bound)
        assert not first.succeeded and rest and rest[-1].succeeded
    assert reclaimed_leftovers(api) == []
    assert reserved_nodes(replay) == []


def test_reclaim_withdraws_a_plan_the_scheduler_no_longer_needs_on_a_second_look(replay):
    """The reclaimer plans from a snapshot that may be a moment behind the scheduler; before it evicts anyone it
    looks again. Here, between the plan and the second look, two other lender TrainJobs in another rack go
    (as jobs ending would), the scheduler places the gang there by itself, and the plan is withdrawn: its
    victims are never suspended and run once to the end, and the hold taken for the look is lifted."""
    from trainyard import k8s as K
    from trainyard.capacity import live
    from trainyard.capacity.reclaimer import Reclaimer
    from trainyard.queues.scheduler_config import SchedulerSettings
    from trainyard.scheduling.trace import TraceJob
    from trainyard.waiting import wait_for

    heavy, light = DEFAULT_TENANTS[0].name, DEFAULT_TENANTS[1].name
    lender = [TraceJob(f"l{i}", light, 0.0, 30.0, 1, 8, None) for i in range(SPEC.nodes)]
    gang = TraceJob("g", heavy, 2.0, 5.0, 2, 8, 1)
    replay.use_scheduler_settings(SchedulerSettings(profile="gang", queue_plugin="capacity"))
    api = live.connect(str(local.ClusterPaths.for_name(SPEC.name).kubeconfig))
    reclaimer = Reclaimer(api, after_s=1.0, rule="final-share", target="fair", holds=True, confirm_s=4.0)
    outcome: dict = {}
    runner = threading.Thread(target=lambda: outcome.update(record=replay.run(
        lender + [gang], "gang-capacity-reclaim", gang=True, direct=False, timeout=180)), daemon=True)
    runner.start()
    try:
        def planned():
            view = live.cluster_view(api)
            outcome["plan"] = reclaimer.plan_eviction(view, live.list_items(api, live.TRAINJOBS), time.time())
            outcome["nodes"] = view.snapshot.nodes
            return outcome["plan"] is not None and len(outcome["plan"].victims) == 2

        wait_for(planned, 60, "a reclaim plan for the waiting gang", 0.5)
        plan, nodes = outcome["plan"], outcome["nodes"]
        rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][K.RACK_LABEL] for n in nodes}
        planned_racks = {rack_of[n] for n in plan.nodes}
        on_node = {p["spec"]["nodeName"]: p["metadata"]["annotations"][K.VOLCANO_GROUP_ANNOTATION]
                   for p in live.list_items(api, live.PODS) if p["spec"].get("nodeName")
                   and p["metadata"]["namespace"] == light}
        other_rack = sorted({rack_of[n] for n in on_node} - planned_racks)[0]
        others = sorted(job for node, job in on_node.items() if rack_of[node] == other_rack)
        assert len(others) == 2, on_node
        for name in others:  # they go as ending jobs would; resumed below, so the run still finishes
            api.merge_patch(live.TRAINJOBS, name, {"spec": {"suspend": True}}, light)
        confirmed, _ = reclaimer.confirm(plan)
        assert confirmed is None and [e for _, e in reclaimer.withdrawn] == [plan]
        for name in others:
            api.merge_patch(live.TRAINJOBS, name, {"spec": {"suspend": False}}, light)
    finally:
        runner.join(200)
        replay.use_scheduler_settings(SchedulerSettings())
    record = outcome["record"]
    assert not record.refused and not record.unfinished, (record.refused, record.unfinished)
    pods = M.by_job(record.pods.values())
    assert {rack_of[p.node] for p in pods["g"]} == {other_rack}, pods["g"]
    for _, name in plan.victims:  # never evicted: one pod, run once to the end
        assert len(pods[name]) == 1 and pods[name][0].succeeded, pods[name]
    assert reserved_nodes(replay) == []


def test_the_controller_reclaims_for_a_gang_when_the_cluster_asks_it_to(replay):
    """The shipped path: `cluster up --reclaim` (a stack's `controller.reclaim`) runs the reclaim loop inside the
    TrainJob controller, beside its reconciles. With the controller restarted with `fair-sharing`, a gang of a
    queue below its share waiting behind a lender's long TrainJobs gets two of them suspended whole in one rack,
    starts there, and the victims rerun; nothing stays suspended or tainted. Restarted without it afterwards."""
    from trainyard.capacity import live
    from trainyard.cluster.trainer_controllers import restart_trainjob_controller
    from trainyard.usage.prometheus import RECLAIM_LOST
    from trainyard.queues.scheduler_config import SchedulerSettings
    from trainyard.scheduling.trace import TraceJob

    heavy, light = DEFAULT_TENANTS[0].name, DEFAULT_TENANTS[1].name
    lender = [TraceJob(f"l{i}", light, 0.0, 45.0, 1, 8, None) for i in range(SPEC.nodes)]
    gang = TraceJob("g", heavy, 3.0, 5.0, 2, 8, 1)
    replay.use_scheduler_settings(SchedulerSettings(profile="gang", queue_plugin="capacity"))
    restart_trainjob_controller(SPEC.name, echo=lambda *_: None, reclaim="fair-sharing")
    try:
        record = replay.run(lender + [gang], "gang-capacity-reclaim", gang=True, direct=False, timeout=240)
        lost_on_metrics = controller_metric(RECLAIM_LOST)
    finally:
        restart_trainjob_controller(SPEC.name, echo=lambda *_: None, reclaim="none")
        replay.use_scheduler_settings(SchedulerSettings())
    assert not record.refused and not record.unfinished, (record.refused, record.unfinished)
    pods = M.by_job(record.pods.values())
    gang_start = min(p.bound for p in pods["g"])
    evicted = sorted(name for name, mine in pods.items() if name.startswith("l") and len(mine) > 1)
    assert len(evicted) == 2, {name: len(mine) for name, mine in pods.items()}
    freed = {p.node for name in evicted for p in pods[name] if not p.succeeded}
    assert {p.node for p in pods["g"]} == freed and gang_start < 35, (pods["g"], freed)
    for name in evicted:  # evicted whole before the gang started, then run again to the end
        first, *rest = sorted(pods[name], key=lambda p: p.bound)
        assert not first.succeeded and first.ended <= gang_start + 1 and rest[-1].succeeded
    assert M.partial_gangs([gang], pods, 1.0, record.end) == []
    api = live.connect(str(local.ClusterPaths.for_name(SPEC.name).kubeconfig))
    assert reclaimed_leftovers(api) == []
    assert reserved_nodes(replay) == []
    # the work thrown away is on the controller's /metrics (what Prometheus scrapes and `usage` reads): the two
    # victims ran about 3 s with 8 GPUs each and reported no checkpoint
    assert 2 * 8 * 1.0 <= lost_on_metrics[light] <= 2 * 8 * 45.0, lost_on_metrics
