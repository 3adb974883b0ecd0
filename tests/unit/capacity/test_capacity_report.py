"""`trainyard report`'s pure part: the numbers from listed objects, the terminal text and the HTML page."""

from __future__ import annotations

import pytest

from trainyard.capacity.live import Snapshot
from trainyard.capacity.report import build_report, render_text, unadmitted_shown
from trainyard.scheduling.cluster_state import waiting_reasons

from capacity_builders import FOUR, GPU, pod, pod_group, queue, quota

UNSCHEDULABLE = {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                 "message": "2/2 tasks in gang unschedulable: pod group is not ready", "lastTransitionTime": "t"}
ENQUEUE = {"involvedObject": {"kind": "PodGroup", "namespace": "ns", "name": "wait", "uid": "uid-wait"},
           "reason": "Unschedulable",
           "message": "queue resource quota insufficient: insufficient nvidia.com/gpu", "lastTimestamp": "t"}


def snapshot() -> Snapshot:
    return Snapshot(
        nodes=FOUR,
        pods=[pod("r0", "n0", 8, group="run"), pod("r1", "n2", 8, group="run"),  # a running 2 x 8 gang in team-a
              pod("x", "n3", 4, ns="other"),  # a 4-GPU pod of another scheduler
              pod("old", "n1", 8, phase="Succeeded", group="done"),  # finished: holds nothing
              pod("w0", None, 8, group="wait"), pod("w1", None, 8, group="wait")],  # a waiting gang, unbound
        queues=[queue("team-a", capability=24, deserved=16), queue("default")],
        pod_groups=[pod_group("run", "team-a", 16, 2, running=2), pod_group("done", "team-a", 8, phase="Completed"),
                    pod_group("wait", "team-a", 16, 2, phase="Pending", conditions=[UNSCHEDULABLE])],
        quotas=[quota("tenant-quota", {f"requests.{GPU}": 64, "count/trainjobs.trainer.kubeflow.org": 10},
                      {f"requests.{GPU}": 32, "count/trainjobs.trainer.kubeflow.org": 2})],
        events=[ENQUEUE])


@pytest.fixture
def report():
    return build_report(snapshot())


def test_gpus_by_node_and_rack(report):
    assert [(n["node"], n["rack"], n["allocated"], n["free"], n["fragmented"]) for n in report.nodes] == [
        ("n0", "rack-0", 8, 0, 0), ("n1", "rack-0", 0, 8, 0), ("n2", "rack-1", 8, 0, 0), ("n3", "rack-1", 4, 4, 4)]
    assert [(r["rack"], r["allocatable"], r["allocated"], r["free"], r["fragmented"], r["largest_free_node"])
            for r in report.racks] == [("rack-0", 16, 8, 8, 0, 8), ("rack-1", 16, 12, 4, 4, 4)]
    assert report.totals == {"allocatable": 32, "allocated": 20, "free": 12, "fragmented": 4, "nodes": 4}


def test_queues_and_pending_gangs_with_why(report):
    team_a = next(q for q in report.queues if q["queue"] == "team-a")
    assert team_a == {"queue": "team-a", "state": "Open", "weight": 1, "weight_share": 16.0, "deserved": 16,
                      "capability": 24, "guarantee": None, "allocated": 16, "inqueue": 0, "volcano_allocated": None,
                      "running_gangs": 1, "pending_gangs": 1}
    assert report.pending == [{"queue": "team-a", "podgroup": "ns/wait", "phase": "Pending",
                               "why": "queue resource quota insufficient: insufficient nvidia.com/gpu"}]


def test_each_pending_gang_is_judged_on_its_own_events_only():
    """Two tenants' gangs of one name: each gets its own namespace's verdict (the events are grouped by object)."""
    groups = [pod_group("wait", q, 16, members=2, phase="Pending", ns=ns, conditions=[UNSCHEDULABLE])
              for ns, q in (("team-a", "a"), ("team-b", "b"))]
    for group in groups:
        group["metadata"]["uid"] = f"uid-{group['metadata']['namespace']}"
    events = [{**ENQUEUE, "involvedObject": {"kind": "PodGroup", "namespace": ns, "name": "wait", "uid": f"uid-{ns}"},
               "message": words} for ns, words in (("team-a", "queue resource quota insufficient"),
                                                   ("team-b", "resource in cluster is overused"))]
    assert waiting_reasons(groups, events) == {("team-a", "wait"): "queue resource quota insufficient",
                                               ("team-b", "wait"): "resource in cluster is overused"}
    assert waiting_reasons(groups, []) == {key: "NotEnoughResources: 2/2 tasks in gang unschedulable: pod group is "
                                                "not ready" for key in (("team-a", "wait"), ("team-b", "wait"))}


def test_pending_gang_without_enqueue_event_shows_its_condition():
    snap = snapshot()
    snap.events = []
    assert build_report(snap).pending[0]["why"] == ("NotEnoughResources: 2/2 tasks in gang unschedulable: "
                                                    "pod group is not ready")


def test_memory_quota_in_binary_units():
    snap = snapshot()
    snap.quotas = [quota("m", {"requests.memory": "2Ti"}, {"requests.memory": "12Gi"})]
    assert [(q["used"], q["hard"], q["percent"]) for q in build_report(snap).quotas] == [("12Gi", "2Ti", 0.6)]


def test_quota_use(report):
    assert report.quotas == [
        {"namespace": "ns", "quota": "tenant-quota", "resource": "count/trainjobs.trainer.kubeflow.org", "used": 2,
         "hard": 10, "percent": 20.0},
        {"namespace": "ns", "quota": "tenant-quota", "resource": f"requests.{GPU}", "used": 32, "hard": 64,
         "percent": 50.0}]


@pytest.mark.parametrize("full_pod_gpus,fragmented", [(8, 4), (4, 0), (16, 12)])
def test_fragmentation_threshold(full_pod_gpus, fragmented):
    assert build_report(snapshot(), full_pod_gpus).totals["fragmented"] == fragmented


def test_empty_platform():
    report = build_report(Snapshot())
    assert report.totals == {"allocatable": 0, "allocated": 0, "free": 0, "fragmented": 0, "nodes": 0}
    assert "GPUs (nvidia.com/gpu): 0 allocatable" in render_text(report)


def test_text_and_html(report, tmp_path):
    from trainyard.capacity.html import write_html

    text = render_text(report)
    for title in ("GPUs by node", "GPUs by rack", "Queues", "Pending gangs", "Tenant quotas",
                  "queue resource quota insufficient"):
        assert title in text
    page = write_html(report, tmp_path).read_text()
    for png in ("gpus_by_node.png", "gpus_by_rack.png", "queues.png", "quotas.png"):
        assert f'src="{png}"' in page and (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "report.json").exists() and "<h2>Tenant quotas</h2>" in page


@pytest.mark.parametrize("queues,expected", [
    ([queue("a", weight=3), queue("b", weight=1)], {"a": 24.0, "b": 8.0}),
    ([queue("a", capability=8, weight=3), queue("b", weight=1), queue("root", weight=1)], {"a": 8.0, "b": 8.0,
                                                                                            "root": None}),
])
def test_weight_share(queues, expected):
    snap = snapshot()
    snap.queues = queues
    assert {q["queue"]: q["weight_share"] for q in build_report(snap).queues} == expected


def test_volcanos_own_allocated_figure_is_shown():
    snap = snapshot()
    snap.queues[0]["status"]["allocated"] = {GPU: "16", "cpu": "0"}
    assert next(q for q in build_report(snap).queues if q["queue"] == "team-a")["volcano_allocated"] == 16


@pytest.mark.parametrize("limit, shown, more_line", [(25, 25, "... and 75 more pending gangs (of 100)"),
                                                     (None, 100, None), (200, 100, None)],
                         ids=["long table cut", "--all", "limit above the rows"])
def test_long_tables_show_their_first_rows_and_say_how_many_more(limit, shown, more_line):
    snap = snapshot()
    snap.pod_groups = [pod_group(f"wait-{i:03d}", "team-a", 16, 2, phase="Pending") for i in range(100)]
    text = render_text(build_report(snap), limit=limit)
    assert sum(f"wait-{i:03d}" in text for i in range(100)) == shown
    assert (more_line in text) if more_line else "more pending gangs" not in text
    assert "n3" in text and "team-a" in text  # the short tables (4 nodes, the queues) are whole


def test_budgets_show_what_the_controller_last_found_and_await_its_first_round():
    from trainyard.capacity.live import Snapshot
    from trainyard.capacity.report import build_report, render_text

    def namespace(name, budget, status=None):
        notes = {"trainyard.dev/budget": budget, **({"trainyard.dev/budget-status": status} if status else {})}
        return {"metadata": {"name": name, "annotations": notes}}

    spent = ('{"period": "2026-11", "gpu_hours": 101.2, "budget": 100, "state": "exhausted", '
             '"since": "2026-11-27T12:00:00Z", "action": "closeQueue"}')
    report = build_report(Snapshot(namespaces=[
        namespace("team-b", '{"gpuHours": 500, "period": "weekly", "action": "demotePriority", "demoteTo": "low"}'),
        namespace("team-a", '{"gpuHours": 100, "period": "monthly", "action": "closeQueue"}', spent),
        {"metadata": {"name": "kube-system"}}]))
    assert report.budgets == [
        {"namespace": "team-a", "budget": "100 GPU-h monthly", "period": "2026-11", "spent": 101.2, "percent": 101.2,
         "state": "exhausted", "since": "2026-11-27T12:00:00Z", "action": "closeQueue (applied)", "runs_out": None},
        {"namespace": "team-b", "budget": "500 GPU-h weekly", "period": None, "spent": None, "percent": None,
         "state": "not yet measured", "since": None, "action": "demotePriority", "runs_out": None}]
    text = render_text(report)
    assert "Tenant budgets (GPU-hours)" in text and "closeQueue (applied)" in text


def test_stalled_trainjobs_are_listed_from_their_namespaces_record_longest_stalled_first():
    from trainyard.capacity.live import Snapshot
    from trainyard.capacity.report import build_report, render_text
    from trainyard.k8s import NAMESPACE_STALLED_ANNOTATION
    from trainyard.tenant_policy import StalledTrainJob, stalled_to_annotation

    def namespace(name, *entries):
        annotations = {NAMESPACE_STALLED_ANNOTATION: stalled_to_annotation(list(entries))} if entries else {}
        return {"metadata": {"name": name, "annotations": annotations}}

    report = build_report(Snapshot(namespaces=[
        namespace("team-a", StalledTrainJob("a", "u1", "holds GPUs and ...", 1_800_000_300.0, "2027-01-15T08:35:00Z"),
                  StalledTrainJob("b", "u2", "stayed at 40 %", 1_800_000_000.0, "2027-01-15T08:30:00Z", 40, True)),
        namespace("team-b"),
        {"metadata": {"name": "team-c", "annotations": {NAMESPACE_STALLED_ANNOTATION: "not json"}}}]))
    assert [(r["trainjob"], r["why"], r["stopped"], r["seen"]) for r in report.stalled] == [
        ("b", "stayed at 40 %; suspended (spec.suspend: false resumes it)", "2027-01-15T08:00:00Z", "2027-01-15T08:30:00Z"),
        ("a", "holds GPUs and ...", "2027-01-15T08:05:00Z", "2027-01-15T08:35:00Z")]
    assert "Stalled TrainJobs" in render_text(report)


@pytest.mark.parametrize("limit, namespaces", [
    (None, {"a-ns", "b-ns"}),  # every row: both namespaces with a gang outside its queue
    (3, {"a-ns", "b-ns"}),
    (2, {"a-ns"}),             # queue a's two rows come first: b-ns's gang is not shown
    (1, {"a-ns"}),
])
def test_the_text_report_reads_the_events_of_the_shown_unadmitted_gangs_namespaces_only(limit, namespaces):
    """Rows in the report's order (queue, then gang); an Inqueue gang's reason is its condition, not an Event."""
    snap = Snapshot(queues=[queue("b"), queue("a")], pod_groups=[
        pod_group("late", "b", 8, phase="Pending", ns="b-ns"),
        pod_group("in", "a", 8, phase="Inqueue", ns="c-ns"),
        pod_group("out", "a", 8, phase="Pending", ns="a-ns")])
    assert [row["podgroup"] for row in build_report(snap).pending] == ["a-ns/out", "c-ns/in", "b-ns/late"]
    assert unadmitted_shown(snap, limit) == namespaces


def _never(name, reason="PodsRefused", failed_reason="PodsRefused", labelled=True):
    labels = {"trainyard.dev/never-starts": reason} if labelled else {}
    return {"metadata": {"name": name, "namespace": "team-a", "labels": labels},
            "status": {"conditions": [{"type": "Failed", "status": "True", "reason": failed_reason,
                                       "message": "the API server refuses the pods of Job x: ... violates PodSecurity",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


def test_trainjobs_that_can_never_start_are_listed_with_why_when_their_status_says_so():
    """The label finds them cheaply; a tenant can write labels, not status: a label alone lists nothing."""
    snap = Snapshot(never_starting=[_never("b"), _never("a"), _never("forged", failed_reason="DeadlineExceeded")])
    report = build_report(snap)
    assert [(r["trainjob"], r["reason"]) for r in report.never_starting] == [("a", "PodsRefused"), ("b", "PodsRefused")]
    text = render_text(report)
    assert "TrainJobs that can never start" in text and "violates PodSecurity" in text
    assert "TrainJobs that can never start" not in render_text(build_report(Snapshot()))
