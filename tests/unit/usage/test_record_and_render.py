"""A usage record built from Prometheus' answers (pure: answers shaped as its HTTP API returns them), and the three
output formats of `trainyard usage`."""

from __future__ import annotations

import csv
import io
import json

import pytest

from trainyard.usage import prometheus as P
from trainyard.usage.account import GroupUsage
from trainyard.usage.record import PodSpan, Tenancy, TrainJobFacts
from trainyard.usage.render import parse_duration, render

POD = {"namespace": "team-a", "pod": "tj-node-0-0-abcde", "uid": "u1"}


def sample(value, **labels):
    return {"metric": labels, "value": [2000.0, str(value)]}


def answers(**overrides):
    empty = {name: [] for name in P.instant_queries(0, 1)}
    return {**empty, **overrides}


def test_every_query_reads_the_whole_window_at_its_end():
    queries = P.instant_queries(since=1000.0, until=1000.0 + 7 * 86400)
    assert "[604800s]" in queries["start"] and queries["last_seen"] == "ts_of_last_over_time(kube_pod_start_time[604800s])"
    assert P.last_seen_fallback("last_seen", 1000.0, 1000.0 + 7 * 86400) == "max_over_time(timestamp(kube_pod_start_time)[604800s:121s])"
    assert queries["present"] == "kube_pod_start_time"  # the pods that still exist at the window's end
    assert 'resource="nvidia_com_gpu"' in queries["gpus"]
    # a pod scraped pending (node "") and then bound has two request series: counted once, not twice
    assert "max by (namespace, pod, uid, container) (last_over_time(kube_pod_container_resource_requests" in queries["gpus"]


def test_a_budget_reads_only_the_pod_spans_of_its_namespaces():
    queries = P.pod_span_queries(since=0.0, until=3600.0, namespaces=["team-b", "team-a"])
    assert set(queries) == {"gpus", "start", "present", "completion", "finished", "deletion", "last_seen"}
    assert all('namespace=~"team-a|team-b"' in promql for promql in queries.values()), queries
    assert queries["present"] == 'kube_pod_start_time{namespace=~"team-a|team-b"}'
    assert 'kube_pod_container_resource_requests{resource="nvidia_com_gpu",namespace=~"team-a|team-b"}' in queries["gpus"]
    assert P.last_seen_fallback("last_seen", 0.0, 3600.0, ["team-a"]) == \
        'max_over_time(timestamp(kube_pod_start_time{namespace=~"team-a"})[3600s:15s])'
    # the whole record's pod queries are the same, over every namespace
    assert {name: P.instant_queries(0.0, 3600.0)[name] for name in queries} == P.pod_span_queries(0.0, 3600.0)
    spans = P.pod_spans({"gpus": [sample(8, **POD)], "start": [sample(100, **POD)], "completion": [sample(400, **POD)],
                         "finished": [sample(1, **POD)], "present": [], "deletion": [], "last_seen": [sample(500, **POD)]})
    assert spans == [PodSpan("team-a", "tj-node-0-0-abcde", 8.0, 100.0, 400.0)]


@pytest.mark.parametrize("finished, present, end", [
    (True, True, 400.0),    # finished: its last container's end
    (False, True, None),    # a sidecar or second container ended early while the trainer runs: still holding
    (False, False, 500.0),  # gone without finishing: when its series was last seen
])
def test_a_pods_span_ends_at_completion_only_once_its_phase_is_terminal(finished, present, end):
    spans = P.pod_spans({"gpus": [sample(8, **POD)], "start": [sample(100, **POD)], "completion": [sample(400, **POD)],
                         "finished": [sample(1, **POD)] if finished else [],
                         "present": [sample(100, **POD)] if present else [], "deletion": [],
                         "last_seen": [sample(500, **POD)]})
    assert spans == [PodSpan("team-a", "tj-node-0-0-abcde", 8.0, 100.0, end)]


def test_a_finished_pod_of_a_trainjob_becomes_a_span_with_its_tenancy_and_class():
    record = P.build_record(answers(
        gpus=[sample(8, **POD)], start=[sample(100, **POD)], completion=[sample(400, **POD)],
        finished=[sample(1, **POD)], present=[sample(100, **POD)], last_seen=[sample(1990, **POD)],
        jobset=[sample(1, **POD, label_jobset_sigs_k8s_io_jobset_name="tj")],
        priority=[sample(1, **POD, priority_class="team-a-default")],
        namespaces=[sample(1, namespace="team-a", label_trainyard_dev_tenant="team-a",
                           label_trainyard_dev_queue="team-a", label_trainyard_dev_catalog_version="1.2.0"),
                    sample(1, namespace="kube-system")],
        trainjob_info=[sample(1, namespace="team-a", trainjob="tj", runtime="torch-distributed",
                              priority_class="team-a-default")],
        trainjob_created=[sample(90, namespace="team-a", trainjob="tj")],
        trainjob_outcome=[sample(1, namespace="team-a", trainjob="tj", type="Complete", reason="JobsCompleted")],
        trainjob_outcome_time=[sample(401, namespace="team-a", trainjob="tj", type="Complete", reason="x"),
                               sample(300, namespace="team-a", trainjob="tj", type="Failed", reason="y")]),
        [{"metric": {"queue": "team-a"}, "values": [[0, "16"], [15, "16"]]}], since=0.0, until=2000.0)
    assert record.pods == [PodSpan("team-a", "tj-node-0-0-abcde", 8.0, 100.0, 400.0, "tj", "team-a-default")]
    assert record.namespaces == {"team-a": Tenancy("team-a", "team-a", "1.2.0")}
    assert record.trainjobs == [TrainJobFacts("team-a", "tj", "torch-distributed", "team-a-default", 90.0,
                                              "Complete", 401.0)]
    assert record.entitlement == {"team-a": [(0.0, 16.0), (15.0, 16.0)]}


def test_pods_without_gpus_or_that_never_started_are_left_out():
    other = {**POD, "pod": "cpu-only", "uid": "u2"}
    pending = {**POD, "pod": "pending", "uid": "u3"}
    record = P.build_record(answers(gpus=[sample(8, **POD), sample(0, **other), sample(8, **pending)],
                                    start=[sample(100, **POD), sample(100, **other)],
                                    present=[sample(100, **POD)]), [], 0.0, 2000.0)
    assert [(p.pod, p.end) for p in record.pods] == [("tj-node-0-0-abcde", None)]


def test_a_pod_recreated_under_the_same_name_counts_twice():
    again = {**POD, "uid": "u9"}
    record = P.build_record(answers(gpus=[sample(8, **POD), sample(8, **again)],
                                    start=[sample(100, **POD), sample(500, **again)],
                                    deletion=[sample(450, **POD)], last_seen=[sample(455, **POD)],
                                    present=[sample(500, **again)]), [], 0.0, 2000.0)
    assert sorted((p.start, p.end) for p in record.pods) == [(100.0, 450.0), (500.0, None)]


@pytest.mark.parametrize("text, seconds", [("7d", 7 * 86400), ("36h", 36 * 3600), ("90m", 5400), ("2w", 14 * 86400),
                                           ("1d12h", 36 * 3600), ("45s", 45)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7", "seven days", "7 d", "0d", "-1d", "7y"])
def test_a_bad_duration_names_the_option_and_the_form(text):
    with pytest.raises(ValueError, match=r"--since .*(not a duration: write a number and a unit|is empty)"):
        parse_duration(text)


ROWS = [GroupUsage("team-a", 48.0, 8.0, 10.0, 590.5, 2, 1, 3, 1), GroupUsage("team-b", 16.0, 0.0, None, None, 0, 0,
                                                                              0, 0)]


def test_json_is_one_object_per_group_with_the_agreed_fields():
    rows = json.loads(render("json", "tenant", ROWS, 0.0, 7 * 86400.0))
    assert [r["group"] for r in rows] == ["team-a", "team-b"] and rows[0]["tenant"] == "team-a"
    assert {k: rows[0][k] for k in ("gpu_hours", "gpu_hours_borrowed", "wait_p50_s", "wait_p95_s", "completed",
                                    "failed")} == {"gpu_hours": 48.0, "gpu_hours_borrowed": 8.0, "wait_p50_s": 10.0,
                                                   "wait_p95_s": 590.5, "completed": 3, "failed": 1}
    assert rows[1]["wait_p50_s"] is None and rows[0]["since"] == "1970-01-01T00:00:00Z"


def test_csv_has_a_header_and_a_row_per_group():
    rows = list(csv.DictReader(io.StringIO(render("csv", "queue", ROWS, 0.0, 3600.0))))
    assert [r["queue"] for r in rows] == ["team-a", "team-b"]
    assert (rows[0]["gpu_hours_within"], rows[1]["wait_p50_s"]) == ("40.0", "")


def test_the_table_ends_with_a_total():
    text = render("table", "tenant", ROWS, 0.0, 3600.0)
    total = text.splitlines()[-1].split()
    assert total[:4] == ["total", "64.00", "56.00", "8.00"] and total[-2:] == ["3", "1"]


def test_a_namespaces_budget_comes_from_its_exported_annotation():
    budget = '{"gpuHours": 100, "period": "weekly", "action": "closeQueue"}'
    record = P.build_record(answers(budgets=[sample(1, namespace="team-a", annotation_trainyard_dev_budget=budget),
                                             sample(1, namespace="team-b", annotation_trainyard_dev_budget="{bad")]),
                            [], 0.0, 10.0)
    assert list(record.budgets) == ["team-a"] and record.budgets["team-a"].period == "weekly"


@pytest.mark.parametrize("end, start, lost", [
    ([sample(500, namespace="team-a", instance="c1")], [], 500.0),                                    # born inside
    ([sample(500, namespace="team-a", instance="c1")], [sample(200, namespace="team-a", instance="c1")], 300.0),
    ([sample(50, namespace="team-a", instance="c1")], [sample(200, namespace="team-a", instance="c1")], 50.0),  # reset
    ([sample(100, namespace="team-a", instance="c1"), sample(40, namespace="team-a", instance="c2")],
     [sample(100, namespace="team-a", instance="c1")], 40.0),                                          # a new leader
])
def test_work_lost_to_reclaim_is_what_the_controllers_counter_grew_by_in_the_window(end, start, lost):
    queries = P.instant_queries(since=0.0, until=3600.0)
    assert queries["reclaim_lost_end"] == f"last_over_time({P.RECLAIM_LOST}[3600s])"
    assert queries["reclaim_lost_start"] == f"{P.RECLAIM_LOST} offset 3600s"
    record = P.build_record(answers(reclaim_lost_end=end, reclaim_lost_start=start), [], 0.0, 3600.0)
    assert record.reclaim_lost == {"team-a": lost}


def test_usage_by_tenant_shows_the_gpu_hours_lost_to_reclaim():
    from trainyard.usage.account import account

    record = P.build_record(answers(
        reclaim_lost_end=[sample(7200, namespace="team-a", instance="c1")],
        namespaces=[sample(1, namespace="team-a", label_trainyard_dev_queue="team-a"),
                    sample(1, namespace="team-b", label_trainyard_dev_queue="team-b")]), [], 0.0, 3600.0)
    by_tenant = {row.group: row for row in account(record, "tenant")}
    assert by_tenant["team-a"].gpu_hours_lost_to_reclaim == 2.0
    assert all(row.gpu_hours_lost_to_reclaim is None for row in account(record, "runtime"))  # counted by namespace
    text = render("table", "tenant", list(by_tenant.values()), 0.0, 3600.0)
    assert "lost to reclaim" in text.splitlines()[1] and text.splitlines()[-1].split()[-1] == "2.00"
    assert json.loads(render("json", "tenant", list(by_tenant.values()), 0.0, 3600.0))[0]["gpu_hours_lost_to_reclaim"] == 2.0
    assert "lost to reclaim" not in render("table", "tenant", ROWS, 0.0, 3600.0)  # none lost: no column
