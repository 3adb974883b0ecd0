"""build_status: suspension, JobSet conditions, jobsStatus, deadlines."""

import pytest

from trainyard.controller.status import build_status, deadline_exceeded, requeue_after_seconds

from ctl_builders import trainjob

NOW = "2025-01-01T01:00:00Z"


def conds(status):
    return {c["type"]: (c["status"], c["reason"], c["message"], c["lastTransitionTime"]) for c in status.get("conditions", [])}


def jobset(*conditions, jobs=()):
    return {"kind": "JobSet", "status": {"conditions": list(conditions), "replicatedJobsStatus": list(jobs)}}


@pytest.mark.parametrize("suspend,previous,expected", [
    (True, [], ("True", "Suspended", "TrainJob is suspended", NOW)),
    (False, [{"type": "Suspended", "status": "True", "reason": "Suspended", "message": "m", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
     ("False", "Resumed", "TrainJob is resumed", NOW)),
    (False, [], None),
])
def test_suspended_condition(suspend, previous, expected):
    tj = trainjob(suspend=suspend)
    tj["status"] = {"conditions": previous}
    assert conds(build_status(tj, None, NOW)).get("Suspended") == expected


def test_suspended_time_kept_when_unchanged():
    tj = trainjob(suspend=True)
    tj["status"] = {"conditions": [{"type": "Suspended", "status": "True", "reason": "Suspended", "message": "TrainJob is suspended",
                                    "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    assert conds(build_status(tj, None, NOW))["Suspended"][3] == "2025-01-01T00:00:00Z"


@pytest.mark.parametrize("js_type,tj_type,reason", [("Completed", "Complete", "AllJobsCompleted"), ("Failed", "Failed", "FailedJobs")])
def test_jobset_conditions_copied(js_type, tj_type, reason):
    js = jobset({"type": js_type, "status": "True", "reason": reason, "message": "msg", "lastTransitionTime": "2025-01-01T00:30:00Z"})
    assert conds(build_status(trainjob(), js, NOW))[tj_type] == ("True", reason, "msg", "2025-01-01T00:30:00Z")


def test_jobset_false_conditions_ignored_and_jobs_status_copied():
    js = jobset({"type": "Completed", "status": "False", "reason": "r", "message": "m"},
                jobs=[{"name": "node", "ready": 2, "succeeded": 0, "failed": 1, "active": 2, "suspended": 0}])
    status = build_status(trainjob(), js, NOW)
    assert "conditions" not in status
    assert status["jobsStatus"] == [{"name": "node", "ready": 2, "succeeded": 0, "failed": 1, "active": 2, "suspended": 0}]


@pytest.mark.parametrize("seconds,now,exceeded", [(3600, "2025-01-01T00:59:59Z", False), (3600, "2025-01-01T01:00:00Z", True)])
def test_active_deadline(seconds, now, exceeded):
    status = build_status(trainjob(activeDeadlineSeconds=seconds), None, now)
    assert deadline_exceeded(status) is exceeded
    if exceeded:
        assert conds(status)["Failed"][:3] == ("True", "DeadlineExceeded", "TrainJob exceeded its active deadline")


def test_deadline_counts_from_resume_and_is_preserved_against_jobset_failure():
    tj = trainjob(activeDeadlineSeconds=60)
    tj["status"] = {"conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed", "message": "m",
                                    "lastTransitionTime": "2025-01-01T00:59:30Z"}]}
    assert requeue_after_seconds(tj, NOW) == 30
    assert not deadline_exceeded(build_status(tj, None, NOW))
    tj["status"]["conditions"].append({"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "x", "lastTransitionTime": NOW})
    js = jobset({"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "y"})
    assert conds(build_status(tj, js, NOW))["Failed"][1] == "DeadlineExceeded"


def test_suspended_job_has_no_deadline():
    assert requeue_after_seconds(trainjob(activeDeadlineSeconds=1, suspend=True), NOW) is None


def test_unsupported_runtime_kind_fails():
    tj = trainjob()
    tj["spec"]["runtimeRef"]["kind"] = "Foo"
    assert conds(build_status(tj, None, NOW))["Failed"][:3] == ("True", "TrainingRuntimeNotSupported", "unsupported runtime: Foo.trainer.kubeflow.org")


def test_other_manager_status_untouched():
    tj = trainjob(managedBy="kueue.x-k8s.io/multikueue", suspend=True)
    assert build_status(tj, None, NOW) == {}


@pytest.mark.parametrize("reason", ["FailedJobs", "DeadlineExceeded", "PodsRefused", "BackoffLimitExceeded"])
@pytest.mark.parametrize("jobset_now", [None, "running", "suspended"])
def test_failed_stays_terminal(reason, jobset_now):
    """Kubeflow Trainer v2.4 (kubeflow/trainer#3891): once Failed, a TrainJob stays Failed whatever its JobSet
    then shows or whether it still exists (v2.3.0 cleared the condition each reconcile and rebuilt the JobSet)."""
    tj = trainjob(activeDeadlineSeconds=3600)
    failed = {"type": "Failed", "status": "True", "reason": reason, "message": "m",
              "lastTransitionTime": "2025-01-01T00:30:00Z"}
    tj["status"] = {"conditions": [failed]}
    later = None if jobset_now is None else jobset(*([] if jobset_now == "running" else [
        {"type": "Suspended", "status": "True", "reason": "r", "message": "m"}]))
    assert conds(build_status(tj, later, NOW))["Failed"] == ("True", reason, "m", "2025-01-01T00:30:00Z")
