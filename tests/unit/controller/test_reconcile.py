"""`reconcile()` against an in-memory API (fake_apiserver.py): what it reads, applies, deletes and reports.

The same flows run against a real API server in tests/integration/test_trainjob_controller.py and
test_trainjob_failures.py; these pin the decisions themselves, fast and one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pytest

from trainyard.controller.errors import BuildError, PreflightError
from trainyard.controller.runtime.reconciler import reconcile
from trainyard.controller.runtime.transport import ApiError
from trainyard.controller.snapshot import build_snapshot
from trainyard.controller.status import find_condition

from builders import tenant_namespace
from ctl_builders import job, runtime, trainjob
from fake_apiserver import FakeApiServer, api_error

OWNER = [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj", "uid": "uid-1",
          "controller": True, "blockOwnerDeletion": True}]
SNAPSHOT = "ConfigMap/tj-runtime-snapshot"
COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
VOLCANO = "scheduling.volcano.sh/v1beta1"


def owned(api_version: str, kind: str, name: str = "tj", **extra) -> dict:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": OWNER}, **extra}


def jobset(suspend: bool = False, status: dict | None = None) -> dict:
    return owned("jobset.x-k8s.io/v1alpha2", "JobSet", spec={"suspend": suspend}, status=status or {})


def snapshot_of(tj: dict, rt: dict) -> dict:
    return build_snapshot(tj, rt)


def queue(name: str) -> dict:
    return {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name}}


def condition(api: FakeApiServer, kind: str) -> dict | None:
    return find_condition(api.find("TrainJob", "tj")["status"] or {}, kind)


TORCH = runtime(ml={"torch": {}})
MPI = runtime(jobs=[job("launcher"), job("node", "trainer")], ml={"mpi": {}})
GANG = runtime(ml={"torch": {}}, pod_group={"coscheduling": {}})
VOLCANO_RT = runtime(ml={"torch": {}}, pod_group={"volcano": {}})


@dataclass
class Case:
    id: str
    trainjob: dict
    cluster: list[dict]
    applies: list[str]  # apply calls made, in order (the failing one included)
    raises: type | None = None
    condition: tuple[str, str, str] | None = None  # type, status, reason on the TrainJob afterwards
    errors: dict = field(default_factory=dict)
    check: Callable[[FakeApiServer], None] | None = None


def _no_runtime_read(api):
    assert "ClusterTrainingRuntime/rt" not in api.verbs("get")  # the snapshot is the runtime now


def _only_needed_reads(api):
    # torch without a gang or MPI: no Secret or PodGroup GET (plugins name what they own per runtime)
    assert api.verbs("get") == ["TrainJob/tj", SNAPSHOT, "ClusterTrainingRuntime/rt", "Namespace/ns", "JobSet/tj",
                                "JobSet/tj"]


def _jobset_suspended(api):
    assert api.find("JobSet", "tj")["spec"]["suspend"] is True


def _coscheduling_read_back(api):
    assert "PodGroup/tj" in api.verbs("get")
    assert api.verbs("apply") == []


def _tenant_queue(api):
    assert api.find("PodGroup", "tj", api_version=VOLCANO)["spec"]["queue"] == "team-q"


def _tenant_gang_read_back(api):
    assert "PodGroup/tj" in api.verbs("get")


def _forbidden_namespace_no_default(api):
    assert "queue" not in api.find("PodGroup", "tj", api_version=VOLCANO)["spec"]


def _deleted_jobset(api):
    assert api.find("JobSet", "tj") is None
    assert api.verbs("delete") == ["JobSet/tj"]


def _pod_group_released(api):
    assert api.find("PodGroup", "tj", api_version=VOLCANO) is None and api.verbs("delete") == ["PodGroup/tj"]
    assert api.find("JobSet", "tj") is not None, "the JobSet and its pods stay, for their logs"


def _pod_group_kept(api):
    assert api.find("PodGroup", "tj", api_version=VOLCANO) is not None and api.verbs("delete") == []


def finished(tj: dict, kind: str = "Failed") -> dict:
    return {**tj, "status": {"conditions": [{"type": kind, "status": "True", "reason": "JobSetFailed", "message": "",
                                             "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}


def failed_jobset() -> dict:
    return jobset(status={"conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "x"}]})


def _nothing_written(api):
    assert api.verbs("patch_status") == [] and api.events == []


def _one_event(api):
    assert [reason for reason, _ in api.events] == ["TrainJobResourcesCreationFailed"]


CASES = [
    Case("new TrainJob: snapshot and JobSet", trainjob(), [TORCH], [SNAPSHOT, "JobSet/tj"], check=_only_needed_reads),
    Case("running JobSet is not re-applied", trainjob(), [snapshot_of(trainjob(), TORCH), jobset()], [],
         check=_no_runtime_read),
    Case("suspended TrainJob: JobSet applied suspended", trainjob(suspend=True), [TORCH], [SNAPSHOT, "JobSet/tj"],
         condition=("Suspended", "True", "Suspended"), check=_jobset_suspended),
    Case("resume: a suspended JobSet is re-applied", trainjob(), [snapshot_of(trainjob(), TORCH), jobset(suspend=True)],
         ["JobSet/tj"]),
    Case("finished TrainJob gets nothing",
         {**trainjob(), "status": {"conditions": [{"type": "Complete", "status": "True", "reason": "Done", "message": "",
                                                   "lastTransitionTime": "2025-01-01T00:00:00Z"}]}},
         [TORCH], []),
    Case("missing runtime: condition and one event", trainjob(), [], [], raises=BuildError,
         condition=("ResourcesCreationFailed", "True", "RuntimeNotFound"), check=_one_event),
    Case("coscheduling PodGroup read back, not re-applied", trainjob(),
         [snapshot_of(trainjob(), GANG), owned(COSCHEDULING, "PodGroup", spec={}), jobset()], [],
         check=_coscheduling_read_back),
    Case("coscheduling PodGroup re-applied while suspended", trainjob(suspend=True),
         [snapshot_of(trainjob(), GANG), owned(COSCHEDULING, "PodGroup", spec={}), jobset(suspend=True)],
         ["PodGroup/tj", "JobSet/tj"]),
    Case("MPI Secret kept once created", trainjob(),
         [snapshot_of(trainjob(), MPI), owned("v1", "Secret", "tj-mpi-ssh-auth")],
         ["ConfigMap/tj-mpi-hostfile", "JobSet/tj"]),
    Case("missing Volcano queue: nothing applied", trainjob(annotations={"scheduling.volcano.sh/queue-name": "gone"}),
         [VOLCANO_RT], [], raises=PreflightError, condition=("ResourcesCreationFailed", "True", "QueueNotFound")),
    Case("tenant queue from the Namespace", trainjob(), [VOLCANO_RT, tenant_namespace(queue="team-q"), queue("team-q")],
         [SNAPSHOT, "PodGroup/tj", "JobSet/tj"], check=_tenant_queue),
    Case("tenant gang for a gang-less runtime", trainjob(), [TORCH, tenant_namespace(queue="team-q"), queue("team-q")],
         [SNAPSHOT, "PodGroup/tj", "JobSet/tj"], check=_tenant_queue),
    Case("tenant gang read back, not re-applied", trainjob(),
         [snapshot_of(trainjob(), TORCH), tenant_namespace(queue="team-q"), queue("team-q"),
          owned(VOLCANO, "PodGroup", spec={"queue": "team-q"}), jobset()], [], check=_tenant_gang_read_back),
    Case("unreadable Namespace: no tenant defaults", trainjob(), [VOLCANO_RT, tenant_namespace(queue="team-q")],
         [SNAPSHOT, "PodGroup/tj", "JobSet/tj"], errors={("get", "Namespace"): api_error(403)},
         check=_forbidden_namespace_no_default),
    Case("apply refused: ApplyFailed", trainjob(), [TORCH], [SNAPSHOT, "JobSet/tj"], raises=ApiError,
         errors={("apply", "JobSet"): api_error(500, "admission webhook denied")},
         condition=("ResourcesCreationFailed", "True", "ApplyFailed"), check=_one_event),
    Case("conflict: retried without a status write", trainjob(), [TORCH], [SNAPSHOT], raises=ApiError,
         errors={("apply", "ConfigMap"): api_error(409)}, check=_nothing_written),
    # an Inqueue Volcano group keeps its minResources reserved in the queue after its pods ended
    Case("tenant: a failed TrainJob's Volcano PodGroup is released", finished(trainjob()),
         [snapshot_of(trainjob(), TORCH), tenant_namespace(queue="team-q"), queue("team-q"),
          owned(VOLCANO, "PodGroup", spec={"queue": "team-q"}), failed_jobset()], [], check=_pod_group_released),
    Case("tenant: the JobSet failing now releases the PodGroup in the same reconcile", trainjob(),
         [snapshot_of(trainjob(), TORCH), tenant_namespace(queue="team-q"), queue("team-q"),
          owned(VOLCANO, "PodGroup", spec={"queue": "team-q"}), failed_jobset()], [],
         condition=("Failed", "True", "FailedJobs"), check=_pod_group_released),
    Case("tenant: a complete TrainJob's PodGroup stays (Volcano marks it Completed)", finished(trainjob(), "Complete"),
         [snapshot_of(trainjob(), TORCH), tenant_namespace(queue="team-q"), queue("team-q"),
          owned(VOLCANO, "PodGroup", spec={"queue": "team-q"}), jobset()], [], check=_pod_group_kept),
    Case("outside tenant namespaces the PodGroup stays (upstream)", finished(trainjob()),
         [snapshot_of(trainjob(), VOLCANO_RT), owned(VOLCANO, "PodGroup", spec={}), failed_jobset()], [],
         check=_pod_group_kept),
    Case("tenant: a running TrainJob keeps its PodGroup", trainjob(),
         [snapshot_of(trainjob(), TORCH), tenant_namespace(queue="team-q"), queue("team-q"),
          owned(VOLCANO, "PodGroup", spec={"queue": "team-q"}), jobset()], [], check=_pod_group_kept),
    Case("deadline exceeded: Failed and JobSet deleted",
         {**trainjob(activeDeadlineSeconds=60), "metadata": {**trainjob()["metadata"], "creationTimestamp": "2020-01-01T00:00:00Z"}},
         [snapshot_of(trainjob(), TORCH), jobset()], [], condition=("Failed", "True", "DeadlineExceeded"),
         check=_deleted_jobset),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_reconcile(case: Case):
    api = FakeApiServer(case.trainjob, *case.cluster, errors=case.errors)
    if case.raises:
        with pytest.raises(case.raises):
            reconcile(api, "ns", "tj")
    else:
        outcome = reconcile(api, "ns", "tj")
        assert outcome.applied == case.applies
    assert api.verbs("apply") == case.applies
    if case.condition:
        found = condition(api, case.condition[0])
        assert found is not None and (found["status"], found["reason"]) == case.condition[1:]
    if case.check:
        case.check(api)


@pytest.mark.parametrize("trainjob_doc", [None, trainjob(managedBy="kueue.x-k8s.io/multikueue")], ids=["gone", "not ours"])
def test_trainjobs_not_ours_are_left_alone(trainjob_doc):
    api = FakeApiServer(*([trainjob_doc] if trainjob_doc else []), TORCH)
    assert reconcile(api, "ns", "tj") is None
    assert api.verbs("apply") == [] and api.verbs("patch_status") == []


def test_failure_condition_is_reported_once_and_removed_by_the_first_success():
    api = FakeApiServer(trainjob())
    for _ in range(2):
        with pytest.raises(BuildError):
            reconcile(api, "ns", "tj")
    assert len(api.events) == 1  # the same cause again: no second event
    api.objects.update(FakeApiServer(TORCH).objects)
    outcome = reconcile(api, "ns", "tj")
    assert outcome.applied == [SNAPSHOT, "JobSet/tj"] and outcome.status_changed
    assert condition(api, "ResourcesCreationFailed") is None


def test_second_reconcile_applies_nothing_new_for_a_running_mpi_job():
    api = FakeApiServer(trainjob(), MPI)
    first = reconcile(api, "ns", "tj")
    assert first.applied == [SNAPSHOT, "Secret/tj-mpi-ssh-auth", "ConfigMap/tj-mpi-hostfile", "JobSet/tj"]
    secret = api.find("Secret", "tj-mpi-ssh-auth")
    second = reconcile(api, "ns", "tj")
    assert second.applied == ["ConfigMap/tj-mpi-hostfile"]  # Secret kept (immutable), JobSet running
    assert api.find("Secret", "tj-mpi-ssh-auth") == secret


def test_trainer_status_written_by_the_status_server_is_never_overwritten():
    tj = {**trainjob(), "status": {"trainerStatus": {"progressPercentage": 40, "lastUpdatedTime": "2025-01-01T00:00:00Z"}}}
    api = FakeApiServer(tj, TORCH)
    reconcile(api, "ns", "tj")
    assert "patch_status" not in [verb for verb, _, _ in api.calls]
    assert api.find("TrainJob", "tj")["status"]["trainerStatus"]["progressPercentage"] == 40


def test_deadline_pending_requeues():
    tj = {**trainjob(activeDeadlineSeconds=10**9)}
    outcome = reconcile(FakeApiServer(tj, TORCH), "ns", "tj")
    assert outcome.requeue_after is not None and outcome.requeue_after > 0
