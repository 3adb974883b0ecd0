"""Reconcile failures: condition set/cleared, one event per cause, queue and quota pre-flight checks."""

import json

import pytest

from trainyard.controller import failures
from trainyard.controller.failures import Failure
from trainyard.controller.runtime.transport import ApiError

COND = "ResourcesCreationFailed"
NOW, LATER = "2025-01-01T00:00:00Z", "2025-01-01T00:05:00Z"
SUSPENDED = {"type": "Suspended", "status": "True", "reason": "Suspended", "message": "m", "lastTransitionTime": NOW}


def api_exception(status, body):
    exc = ApiError(status=status, reason="Forbidden")
    exc.body = body
    return exc


@pytest.mark.parametrize("exc,expected", [
    (api_exception(403, json.dumps({"kind": "Status", "reason": "Forbidden", "message": 'podgroups "x" is forbidden: '
                                    "ValidatingAdmissionPolicy 'trainyard-queue-guard' denied request"})),
     Failure("ApplyFailed", "podgroups \"x\" is forbidden: ValidatingAdmissionPolicy 'trainyard-queue-guard' denied request")),
    (api_exception(422, "not json"), Failure("ApplyFailed", "not json")),
    (api_exception(500, None), Failure("ApplyFailed", "500 Forbidden")),
    (api_exception(403, json.dumps({"message": "x" * 2000})), Failure("ApplyFailed", "x" * 950 + " ...")),
])
def test_api_failure_keeps_the_api_servers_message(exc, expected):
    assert failures.api_failure(exc) == expected


def test_build_failure_reason():
    assert failures.build_failure("not found", runtime_missing=True).reason == "RuntimeNotFound"
    assert failures.build_failure("bad", runtime_missing=False).reason == "BuildFailed"


def test_condition_set_updated_and_removed():
    failed = failures.with_failure({"conditions": [SUSPENDED]}, Failure("ApplyFailed", "quota"), NOW)
    assert failed["conditions"] == [SUSPENDED, {"type": COND, "status": "True", "reason": "ApplyFailed",
                                                "message": "quota", "lastTransitionTime": NOW}]
    again = failures.with_failure(failed, Failure("QueueNotFound", "queue"), LATER)
    assert again["conditions"][1] == {"type": COND, "status": "True", "reason": "QueueNotFound", "message": "queue",
                                      "lastTransitionTime": NOW}
    assert failures.with_failure(again, None, LATER)["conditions"] == [SUSPENDED]
    # the only condition gone: null, which the status merge patch turns into "no conditions" (SDK: Running)
    assert failures.with_failure({"conditions": [again["conditions"][1]]}, None, LATER) == {"conditions": None}
    assert failures.with_failure({"jobsStatus": []}, None, LATER) == {"jobsStatus": []}


def test_one_event_per_distinct_cause():
    cause = Failure("ApplyFailed", "quota")
    shown = failures.with_failure({}, cause, NOW)
    assert failures.is_new({}, cause)
    assert not failures.is_new(shown, cause)
    assert failures.is_new(shown, Failure("ApplyFailed", "another message"))
    assert failures.is_new(shown, Failure("QueueNotFound", "quota"))


def podgroup(queue=None, api="scheduling.volcano.sh/v1beta1"):
    return {"apiVersion": api, "kind": "PodGroup", "spec": {"minMember": 1, **({"queue": queue} if queue else {})}}


def test_volcano_queues_and_queue_failure():
    objects = [podgroup("team-a"), podgroup(), podgroup("q", api="scheduling.x-k8s.io/v1alpha1"), {"kind": "JobSet"}]
    assert failures.volcano_queues(objects) == ["team-a"]
    assert failures.queue_failure([]) is None
    failure = failures.queue_failure(["team-a"])
    assert failure.reason == "QueueNotFound" and 'Volcano queue "team-a" not found' in failure.message


def jobset(nodes=2, gpus="8", priority=None, replicas=1):
    pod = {"containers": [{"name": "node", "resources": {"limits": {"nvidia.com/gpu": gpus},
                                                         "requests": {"cpu": "4"}}}]}
    if priority:
        pod["priorityClassName"] = priority
    return {"kind": "JobSet", "metadata": {"name": "tj", "namespace": "team-a"},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": replicas,
                                         "template": {"spec": {"parallelism": nodes, "template": {"spec": pod}}}}]}}


def quota(name, hard, *expressions, scopes=None):
    spec = {"hard": hard}
    if expressions:
        spec["scopeSelector"] = {"matchExpressions": list(expressions)}
    if scopes:
        spec["scopes"] = scopes
    return {"kind": "ResourceQuota", "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}


TENANT = quota("tenant-quota", {"requests.nvidia.com/gpu": "16", "requests.cpu": "192",
                                "count/trainjobs.trainer.kubeflow.org": "50"})
ALLOWED = quota("allowed", {"requests.nvidia.com/gpu": "8"},
                {"scopeName": "PriorityClass", "operator": "In", "values": ["training-high"]})
OTHERS = quota("others", {"pods": "0"}, {"scopeName": "PriorityClass", "operator": "Exists"},
               {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["training-high"]})


@pytest.mark.parametrize("js,quotas,expected", [
    (jobset(nodes=2), [TENANT], None),                                   # 16 GPUs fit exactly
    (jobset(nodes=3), [TENANT], ("tenant-quota", "requests.nvidia.com/gpu=24", "requests.nvidia.com/gpu=16")),
    (jobset(nodes=1, replicas=3), [TENANT], ("tenant-quota", "requests.nvidia.com/gpu=24", "requests.nvidia.com/gpu=16")),
    (jobset(nodes=2, gpus="1"), [quota("cpu", {"cpu": "4"})], ("cpu", "cpu=8", "cpu=4")),
    (jobset(nodes=2, priority="training-high"), [ALLOWED], ("allowed", "requests.nvidia.com/gpu=16", "requests.nvidia.com/gpu=8")),
    (jobset(nodes=2), [ALLOWED], None),                                  # no class: the scoped quota does not apply
    (jobset(nodes=1, priority="low"), [OTHERS], ("others", "pods=1", "pods=0")),
    (jobset(nodes=1, priority="training-high"), [OTHERS], None),
    (jobset(nodes=4), [quota("terminating", {"requests.nvidia.com/gpu": "1"}, scopes=["Terminating"])], None),
])
def test_quota_failure_when_the_whole_gang_exceeds_a_hard_limit(js, quotas, expected):
    failure = failures.quota_failure(js, quotas)
    if expected is None:
        assert failure is None
        return
    name, needed, allowed = expected
    assert failure.reason == "QuotaExceeded"
    assert f"needs {needed}" in failure.message and f'ResourceQuota "{name}" allows at most {allowed}' in failure.message
