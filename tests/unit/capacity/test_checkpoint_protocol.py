"""The checkpoint protocol between reclaim and training code (pure parts, table-driven): what a TrainJob reports,
what an ask comes to, what a victim loses, the status server's checkpoint-request answer, the helper's report and
its agreement on when to save, and victims chosen by the work they would lose."""

from __future__ import annotations

import os
import signal
from fractions import Fraction

import pytest

from trainyard import k8s as K
from trainyard.controller.runtime.status_server import StatusServer, checkpoint_request
from trainyard.scheduling import checkpoints as C
from trainyard.scheduling.cluster_state import GPU, Node
from trainyard.scheduling.reclaim import Eviction, RunningJob, cheapest_eviction, running_jobs
from trainyard.scheduling.reservation import WaitingGang

from checkpoint_helper import helper

F = Fraction
T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def reported(step: str | None, at: str | None, updated: str | None = "2027-01-15T08:10:00Z") -> dict:
    metrics = [{"name": "loss", "value": "0.5"}]
    if step is not None:
        metrics.append({"name": K.CHECKPOINT_STEP_METRIC, "value": step})
    if at is not None:
        metrics.append({"name": K.CHECKPOINT_TIME_METRIC, "value": at})
    return {"status": {"trainerStatus": {"metrics": metrics, **({"lastUpdatedTime": updated} if updated else {})}}}


@pytest.mark.parametrize("trainjob, expected", [
    ({}, None),
    (reported(None, None), None),
    (reported("120", "2027-01-15T08:05:00Z"), C.Checkpoint(T0 + 300, 120)),
    (reported(None, "2027-01-15T08:05:00Z"), C.Checkpoint(T0 + 300, None)),
    (reported("x", "2027-01-15T08:05:00Z"), C.Checkpoint(T0 + 300, None)),
    (reported("7", "2030-01-01T00:00:00Z"), C.Checkpoint(T0 + 601, 7)),  # after its report: the second of the report
    (reported("7", "yesterday"), None),
])
def test_the_last_checkpoint_a_trainjob_reports(trainjob, expected):
    assert C.last_checkpoint(trainjob) == expected


@pytest.mark.parametrize("checkpoint, started, now, saved", [
    (None, T0, T0 + 100, 0.0),
    (C.Checkpoint(T0 + 60), T0, T0 + 100, 60.0),
    (C.Checkpoint(T0 - 5), T0, T0 + 100, 0.0),  # saved by an earlier run: this run kept nothing yet
    (C.Checkpoint(T0 + 60), None, T0 + 100, 0.0),
])
def test_a_run_keeps_what_its_last_checkpoint_saved_since_it_started(checkpoint, started, now, saved):
    assert C.saved_seconds(checkpoint, started, now) == saved


@pytest.mark.parametrize("checkpoint, now, outcome", [
    (None, T0 + 10, C.WAIT),
    (C.Checkpoint(T0 - 1), T0 + 10, C.WAIT),          # the checkpoint before the ask does not answer it
    (C.Checkpoint(T0 + 3), T0 + 10, C.SAVED),
    (None, T0 + 60.9, C.WAIT),                        # asked up to a second after the note's (floored) second
    (None, T0 + 61, C.GRACE_ENDED),
    (C.Checkpoint(T0 - 1), T0 + 62, C.GRACE_ENDED),
])
def test_an_ask_ends_with_a_fresh_checkpoint_or_the_grace_period(checkpoint, now, outcome):
    assert C.ask_outcome(T0, checkpoint, now, grace_s=60) == outcome


@pytest.mark.parametrize("annotations, grace", [
    (None, C.DEFAULT_GRACE_SECONDS), ({K.NAMESPACE_CHECKPOINT_GRACE_ANNOTATION: "300"}, 300),
    ({K.NAMESPACE_CHECKPOINT_GRACE_ANNOTATION: "soon"}, C.DEFAULT_GRACE_SECONDS),
])
def test_the_grace_period_is_the_tenants(annotations, grace):
    assert C.grace_seconds({"metadata": {"annotations": annotations}}) == grace


@pytest.mark.parametrize("checkpoint, lost, outcome, words", [
    (C.Checkpoint(T0, 120), 0.0, C.SAVED, ["after it saved the checkpoint it was asked for", "step 120", "0.000 GPU-hours"]),
    (None, 7200.0, None, ["at once", "resumes from its start", "2.000 GPU-hours", "7200 GPU-seconds"]),
    (C.Checkpoint(T0, 40), 360.0, C.GRACE_ENDED, ["grace period ended", "step 40", "0.100 GPU-hours"]),
])
def test_the_reclaimed_event_names_the_gang_the_checkpoint_and_the_work_lost(checkpoint, lost, outcome, words):
    message = C.reclaimed_message(("team-a", "big-gang"), checkpoint, lost, outcome)
    assert "gang team-a/big-gang" in message
    for word in words:
        assert word in message


def pod(name: str, node: str, started: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "annotations": {K.VOLCANO_GROUP_ANNOTATION: "job"}},
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": {K.GPU_RESOURCE: "8"}}}]},
            "status": {"phase": "Running", "startTime": started}}


def test_running_jobs_keep_what_their_checkpoint_saved_since_they_started():
    pods = [pod("p0", "n0", "2027-01-15T08:00:00Z"), pod("p1", "n1", "2027-01-15T08:00:00Z")]
    groups = [{"metadata": {"name": "job", "namespace": "ns"}, "spec": {"queue": "q"}}]
    (job,) = running_jobs(pods, groups, {("ns", "job")}, now_s=T0 + 100, saved_at={("ns", "job"): T0 + 90})
    assert (job.ran_s, job.saved_s, job.lost_work) == (100.0, 90.0, 160.0)
    (job,) = running_jobs(pods, groups, {("ns", "job")}, now_s=T0 + 100)
    assert job.lost_work == 1600.0


def test_victims_are_the_jobs_that_lose_least_not_the_fewest_gpus():
    """Rack r0's one job holds 16 GPUs but saved a minute ago; rack r1's two 8-GPU jobs report no checkpoint: the
    16 GPUs go, since taking them loses a minute of work instead of an hour."""
    nodes = [Node(f"{r}{i}", r, "s0", {GPU: F(8)}, {GPU: F(8)}) for r in ("a", "b") for i in range(2)]
    running = [RunningJob(("ns", "saved"), "lender", F(16), frozenset({"a0", "a1"}), ran_s=3600, saved_s=3540),
               RunningJob(("ns", "x"), "lender", F(8), frozenset({"b0"}), ran_s=3600),
               RunningJob(("ns", "y"), "lender", F(8), frozenset({"b1"}), ran_s=3600)]
    gang = WaitingGang(("ns", "g"), "poor", 2, F(8), 1, 60.0)
    eviction = cheapest_eviction(nodes, gang, running, {"lender": F(32), "poor": F(0)}, {"lender": F(0), "poor": F(16)})
    assert eviction == Eviction(("ns", "g"), (("ns", "saved"),), ("a0", "a1"))


class Reviews:
    """The TokenReview verdicts the API server would give (the real exchange: tests/integration/test_trainjob_status)."""

    def __call__(self, token: str, audience: str) -> dict:
        return {"authenticated": token == "good", "audiences": [audience],
                "user": {"username": "system:serviceaccount:ns:default"}}


PATH = "/trainyard/v1/namespaces/ns/trainjobs/tj/checkpoint-request"


@pytest.mark.parametrize("method, path, token, trainjob, code, body", [
    ("GET", PATH, "good", {"metadata": {}}, 200, {"requested": False}),
    ("GET", PATH, "good", {"metadata": {"annotations": {K.CHECKPOINT_REQUESTED_ANNOTATION: f"team-a/g {T0:.0f}"}}},
     200, {"requested": True, "requestedAt": "2027-01-15T08:00:00Z", "forGang": "team-a/g"}),
    ("GET", PATH, "bad", {"metadata": {}}, 403, None),
    ("GET", PATH, "good", None, 404, None),
    ("POST", PATH, "good", {"metadata": {}}, 405, None),
    ("GET", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status", "good", {}, 405, None),
])
def test_the_status_server_answers_checkpoint_requests_to_the_trainjobs_own_token(method, path, token, trainjob, code,
                                                                                   body):
    server = StatusServer(Reviews(), lambda body: body, read_trainjob=lambda ns, name: trainjob)
    status, answer = server.handle(method, path, {"Authorization": f"Bearer {token}"}, lambda n: b"")
    assert status == code
    if body is not None:
        assert answer == body


def test_without_a_reader_the_checkpoint_endpoint_does_not_exist():
    server = StatusServer(Reviews(), lambda body: body)
    assert server.handle("GET", PATH, {"Authorization": "Bearer good"}, lambda n: b"")[0] == 404
    assert checkpoint_request({"metadata": {"annotations": {K.CHECKPOINT_REQUESTED_ANNOTATION: "garbled"}}}) == \
        {"requested": False}


def test_the_helper_reports_a_checkpoint_as_the_status_server_reads_it():
    from trainyard.controller.runtime.status_server import parse_update

    module = helper()
    body = module.status_report(120, T0 + 300, progress=140)
    update = parse_update(__import__("json").dumps(body).encode())
    assert update["trainerStatus"]["progressPercentage"] == 100
    assert C.last_checkpoint({"status": {"trainerStatus": {**update["trainerStatus"],
                                                           "lastUpdatedTime": "2027-01-15T09:00:00Z"}}}) == \
        C.Checkpoint(T0 + 300, 120)
    assert module.STEP_METRIC == K.CHECKPOINT_STEP_METRIC and module.TIME_METRIC == K.CHECKPOINT_TIME_METRIC
    assert module.checkpoint_request_url(
        "https://ctl.svc:10443/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status") == \
        "https://ctl.svc:10443" + PATH


def test_the_helper_saves_every_n_steps_and_once_on_sigterm(tmp_path):
    module = helper()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        ckpt = module.Checkpointer(directory=str(tmp_path), every_steps=3, server=module.StatusServer({}))
        assert [step for step in range(7) if ckpt.due(step)] == [2, 5]
        assert not ckpt.stopping
        os.kill(os.getpid(), signal.SIGTERM)
        assert ckpt.due(7) is True and ckpt.stopping
        assert ckpt.STOPPED == 143 and ckpt.load() is None
    finally:
        signal.signal(signal.SIGTERM, previous)
