"""Stalled TrainJobs (pure): no trainerStatus report, or a percentage that does not move, while the TrainJob holds
GPUs; a last log line standing in without trainerStatus; the pods that count as holding GPUs."""

from __future__ import annotations

import pytest

from trainyard.usage.stall_watcher import gpu_pods_by_trainjob
from trainyard.tenant_policy import StalledTrainJob, stalled_from_annotation, stalled_to_annotation
from trainyard.usage.stalls import (Seen, can_be_stalled, changed_namespaces, judge, last_log_time, remembered,
                                    stalled_now)

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
AFTER = 600.0


def iso(epoch_s: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def trainjob(percentage=None, updated=None):
    status = {} if updated is None else {"trainerStatus": {"lastUpdatedTime": iso(updated),
                                                           **({"progressPercentage": percentage}
                                                              if percentage is not None else {})}}
    return {"metadata": {"name": "tj", "namespace": "ns", "uid": "u"}, "status": status}


@pytest.mark.parametrize("job, holds, previous, now, stalled, words", [
    # reporting and moving: fine
    (trainjob(40, T0 - 30), True, Seen(35, T0 - 200), T0, False, None),
    # silent for 11 min: stalled, whatever the percentage
    (trainjob(40, T0 - 660), True, Seen(40, T0 - 700), T0, True, "reported no progress for 11 min"),
    # reporting, but stuck at 40 % for 11 min
    (trainjob(40, T0 - 10), True, Seen(40, T0 - 660), T0, True, "stayed at 40 % for 11 min"),
    # stuck but not long enough
    (trainjob(40, T0 - 10), True, Seen(40, T0 - 300), T0, False, None),
    # holds no GPU (suspended, not started, finished): never stalled
    (trainjob(40, T0 - 6000), False, Seen(40, T0 - 7000), T0, False, None),
    # no trainerStatus and no log evidence: not judged
    (trainjob(), True, None, T0, False, None),
    # first sight after a restart: the last report is when progress was last known
    (trainjob(40, T0 - 700), True, None, T0, True, "reported no progress for 12 min"),
])
def test_a_trainjob_holding_gpus_is_stalled_when_its_progress_stops(job, holds, previous, now, stalled, words):
    _, stall = judge(job, holds, previous, now, AFTER)
    assert (stall is not None) is stalled
    if words:
        assert words in stall.why


def test_the_memory_keeps_when_the_percentage_last_moved():
    seen, _ = judge(trainjob(40, T0 - 10), True, Seen(35, T0 - 100), T0, AFTER)
    assert seen == Seen(40, T0)  # moved now
    seen, _ = judge(trainjob(40, T0 + 50), True, seen, T0 + 60, AFTER)
    assert seen == Seen(40, T0)  # same percentage: since is kept
    assert judge(trainjob(40, T0), False, seen, T0, AFTER) == (None, None)  # GPUs given back: forgotten


@pytest.mark.parametrize("last_log, after_log, stalled", [(T0 - 700, 600.0, True), (T0 - 100, 600.0, False),
                                                          (T0 - 700, 0.0, False), (None, 600.0, False)])
def test_without_trainer_status_the_last_log_line_stands_in(last_log, after_log, stalled):
    _, stall = judge(trainjob(), True, None, T0, AFTER, last_log, after_log)
    assert (stall is not None) is stalled
    if stalled:
        assert "wrote no log line for 12 min" in stall.why


@pytest.mark.parametrize("tail, expected", [
    ("2027-01-15T08:00:00.123456789Z step 100 loss 2.3\n", T0 + 0.123456789),
    ("2027-01-15T07:59:00Z a\n2027-01-15T08:00:00Z b\n", T0),
    ("", None), ("not a log\n", None),
])
def test_the_last_log_lines_time(tail, expected):
    found = last_log_time(tail)
    assert found == (pytest.approx(expected) if expected else None)


def pod(name, phase="Running", gpus=True, jobset="tj", ns="ns", labels=None, sidecar_gpus=False):
    resources = {"limits": {"nvidia.com/gpu": "8"}} if gpus else {}
    spec = {"containers": [{"name": "node", "resources": resources}]}
    if sidecar_gpus:
        spec["initContainers"] = [{"name": "side", "restartPolicy": "Always",
                                   "resources": {"requests": {"nvidia.com/gpu": "8"}}}]
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {},
                         "ownerReferences": [{"kind": "Job", "name": f"{jobset}-node-0", "controller": True}]},
            "spec": spec, "status": {"phase": phase}}


def _names(found):
    return {key: [p["metadata"]["name"] for p in pods] for key, pods in found.items()}


def test_only_running_gpu_pods_of_a_trainjobs_jobs_hold_gpus():
    trainjobs = [trainjob(), {"metadata": {"name": "other", "namespace": "ns", "uid": "o"}}]
    found = gpu_pods_by_trainjob([pod("a"), pod("b", phase="Pending"), pod("c", gpus=False), pod("d", jobset="other"),
                                  {**pod("e"), "metadata": {"name": "e", "namespace": "ns"}},  # no owner
                                  pod("f", jobset="unknown"), pod("g", ns="elsewhere")], trainjobs)
    assert _names(found) == {("ns", "tj"): ["a"], ("ns", "other"): ["d"]}


def test_pods_are_keyed_by_their_job_not_by_labels_a_tenant_writes_and_a_gpu_sidecar_counts():
    """Red-team findings: pods relabelled through podTemplateOverrides hid a stalled job; GPUs asked by a native
    sidecar (an init container that keeps running) were not seen."""
    relabelled = pod("a", labels={"jobset.sigs.k8s.io/jobset-name": "someone-else"})
    sidecar = pod("b", gpus=False, sidecar_gpus=True)
    assert _names(gpu_pods_by_trainjob([relabelled, sidecar], [trainjob()])) == {("ns", "tj"): ["a", "b"]}


def test_logs_alone_can_be_judged_and_trainer_status_alone():
    _, by_log = judge(trainjob(), True, None, T0, 0.0, T0 - 700, 600.0)
    assert by_log is not None  # --stalled-after 0 --stalled-log-after 600
    assert judge(trainjob(40, T0 - 7000), True, None, T0, 0.0, None, 600.0) == (None, None)


@pytest.mark.parametrize("status, after_s, after_log_s, expected", [
    (None, 60.0, 0.0, False),  # no report and logs not read: judge never finds it stalled, so its pods are not read
    (None, 60.0, 600.0, True),
    ({"trainerStatus": {"progressPercentage": 3, "lastUpdatedTime": "2026-11-27T08:00:00Z"}}, 60.0, 0.0, True),
    ({"trainerStatus": {"progressPercentage": 3, "lastUpdatedTime": "2026-11-27T08:00:00Z"}}, 0.0, 0.0, False),
    ({"trainerStatus": {"progressPercentage": 3}}, 60.0, 0.0, False),  # undated: only its log could tell
    ({"trainerStatus": {"progressPercentage": 3}}, 60.0, 600.0, True),
    ({"conditions": []}, 60.0, 0.0, False),
])
def test_only_trainjobs_that_can_be_found_stalled_are_looked_at(status, after_s, after_log_s, expected):
    trainjob = {"metadata": {"name": "tj", "namespace": "ns"}, **({"status": status} if status else {})}
    assert can_be_stalled(trainjob, after_s, after_log_s) is expected
    if not expected:  # agrees with judge: holding GPUs for a day, its log silent as long, changes nothing
        assert judge(trainjob, True, None, T0, after_s, T0 - 86400, after_log_s) == (None, None)
    else:
        assert judge(trainjob, True, None, T0, after_s, T0 - 86400, after_log_s)[1] is not None


def entry(uid, since, flagged="2027-01-15T07:50:00Z", percentage=40, suspended=False, why="words"):
    return StalledTrainJob(f"tj-{uid}", uid, why, since, flagged, percentage, suspended)


def found(uid, since, ns="ns", percentage=40, suspended=False, why="words now", flagged="2027-01-15T08:00:00Z"):
    return ns, entry(uid, since, flagged, percentage, suspended, why)


def test_the_record_reads_back_what_was_written_and_ignores_what_it_cannot_read():
    entries = [entry("b", T0, suspended=True), entry("a", T0 - 60, percentage=None)]
    assert stalled_from_annotation(stalled_to_annotation(entries)) == sorted(entries, key=lambda e: e.trainjob)
    for bad in (None, "", "not json", "{}", '[{"trainjob": "x"}]', '[{"since": "soon"}]'):
        assert stalled_from_annotation(bad) == []


@pytest.mark.parametrize("recorded, now, rewritten", [
    ({}, [], {}),                                                              # nothing stalled, nothing written
    ({}, [found("a", T0)], {"ns": ["a"]}),                                     # a stall starts
    ({"ns": [entry("a", T0)]}, [found("a", T0, why="for 40 min")], {}),        # it goes on: the words alone changed
    ({"ns": [entry("a", T0)]}, [], {"ns": []}),                                # it ends: the record is removed
    ({"ns": [entry("a", T0)]}, [found("a", T0 + 60)], {"ns": ["a"]}),          # it moved on, then stopped again
    ({"ns": [entry("a", T0)]}, [found("a", T0, suspended=True)], {"ns": ["a"]}),   # the platform suspended it
    ({"ns": [entry("a", T0)], "other": [entry("b", T0)]}, [found("a", T0), found("c", T0, ns="other")],
     {"other": ["c"]}),                                                        # only the namespace that changed
])
def test_a_namespace_is_rewritten_only_when_its_stalls_change(recorded, now, rewritten):
    after = stalled_now(now, recorded)
    assert {ns: [e.uid for e in entries] for ns, entries in changed_namespaces(recorded, after).items()} == rewritten


def test_a_stall_that_goes_on_keeps_when_it_was_first_flagged():
    recorded = {"ns": [entry("a", T0, flagged="2027-01-15T07:50:00Z")]}
    after = stalled_now([found("a", T0), found("b", T0)], recorded)
    assert {e.uid: e.flagged for e in after["ns"]} == {"a": "2027-01-15T07:50:00Z", "b": "2027-01-15T08:00:00Z"}
    moved = stalled_now([found("a", T0 + 300, flagged="2027-01-15T08:10:00Z")], recorded)
    assert moved["ns"][0].flagged == "2027-01-15T08:10:00Z"  # a new stall of the same TrainJob


def test_a_restarted_loop_remembers_a_recorded_stuck_percentage():
    """A loop that forgot everything would see 40 % as new at T0 and flag it only 10 min later; from the record it
    knows progress has stayed at 40 % since T0 - 900."""
    job = trainjob(40, T0 - 10)  # its trainer still reports, at the same percentage
    assert judge(job, True, None, T0, AFTER)[1] is None
    memory = remembered({"ns": [entry("u", T0 - 900)]})
    _, stall = judge(job, True, memory["u"], T0, AFTER)
    assert stall is not None and "stayed at 40 % for 15 min" in stall.why


def test_a_report_dated_in_the_future_once_does_not_keep_a_job_fresh():
    """Red-team finding: one report with lastUpdatedTime a year ahead dodged the stall watch for good."""
    ahead = trainjob(None, T0 + 365 * 86400)
    seen, stall = judge(ahead, True, None, T0, AFTER)
    assert stall is None and seen.since_s == T0  # fresh when first seen...
    seen, stall = judge(ahead, True, seen, T0 + AFTER + 60, AFTER)
    assert stall is not None and "reported no progress for 11 min" in stall.why  # ...then it ages like any report


def test_the_status_server_dates_a_report_no_later_than_its_clock():
    from trainyard.controller.runtime.status_server import clamped

    update = {"trainerStatus": {"progressPercentage": 5, "lastUpdatedTime": "2099-01-01T00:00:00Z"}}
    assert clamped(update, "2026-01-01T00:00:00Z")["trainerStatus"] == {"progressPercentage": 5,
                                                                      "lastUpdatedTime": "2026-01-01T00:00:00Z"}
    past = {"trainerStatus": {"lastUpdatedTime": "2025-12-31T00:00:00Z"}}
    assert clamped(past, "2026-01-01T00:00:00Z") == past
