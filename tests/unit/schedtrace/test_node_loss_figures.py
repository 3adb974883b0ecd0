"""The node-loss bench's pure parts: which nodes it kills, what a sample counts, what becomes of the hit jobs."""

from __future__ import annotations

import pytest

from trainyard import k8s as K
from trainyard.schedtrace import node_loss as NL
from trainyard.scheduling.records import PodRecord


def pod(name: str, job: str, node: str | None, gpus: str | None = "8", phase: str = "Running",
        limits_only: bool = False) -> dict:
    resources = {} if gpus is None else {"limits": {K.GPU_RESOURCE: gpus}} if limits_only else {
        "requests": {K.GPU_RESOURCE: gpus}, "limits": {K.GPU_RESOURCE: gpus}}
    return {"metadata": {"name": name, "labels": {K.TRACE_JOB_LABEL: job}},
            "spec": {**({"nodeName": node} if node else {}), "containers": [{"name": "node", "resources": resources}]},
            "status": {"phase": phase}}


@pytest.mark.parametrize("spec, gpus", [
    (pod("a", "j", "n1", "8"), 8.0),
    (pod("a", "j", "n1", "2", limits_only=True), 2.0),  # a limit alone is the request
    (pod("a", "j", "n1", None), 0.0),
])
def test_a_pods_gpus_are_its_request(spec, gpus):
    assert NL.pod_gpus(spec) == gpus


def test_a_sample_counts_what_holds_on_ready_nodes_beside_what_the_report_and_volcano_say():
    pods = [pod("a-0", "a", "n1"), pod("a-1", "a", "lost1"), pod("b-0", "b", "n2", "4"),
            pod("c-0", "c", "n2", phase="Succeeded"), pod("d-0", "d", None)]
    report_nodes = [{"node": "n1", "allocated": 8}, {"node": "n2", "allocated": 4}, {"node": "lost1", "allocated": 0}]
    queues = [{"queue": "q1", "volcano_allocated": 16}, {"queue": "q2", "volcano_allocated": 4},
              {"queue": "q3", "volcano_allocated": None}]
    sample = NL.sample(12.34, {"lost1"}, report_nodes, queues, pods)
    assert sample == NL.Sample(at_s=12.3, lost=("lost1",), report_gpus_on_lost=0.0, volcano_allocated=20.0,
                               held_on_ready=12.0, pods_on_lost=1)
    assert sample.volcano_excess == 8.0  # Volcano still charges the lost node's pod
    with_root = [*queues, {"queue": "root", "volcano_allocated": 20}]  # a parent repeats its children
    assert NL.sample(12.34, {"lost1"}, report_nodes, with_root, pods, queues=("q1", "q2", "q3")) == sample


def test_a_report_counting_a_lost_nodes_gpus_shows_in_the_sample():
    sample = NL.sample(0, ["lost1"], [{"node": "lost1", "allocated": 8}], [], [pod("a", "a", "lost1")])
    assert sample.report_gpus_on_lost == 8.0 and sample.held_on_ready == 0.0


def test_the_nodes_killed_are_those_holding_the_most_gang_pods():
    pods = [pod("g1-0", "g1", "n3"), pod("g1-1", "g1", "n2"), pod("g2-0", "g2", "n2"),
            pod("s-0", "s", "n1"), pod("s2-0", "s2", "n1"), pod("s3-0", "s3", "n1"),  # singles: not gangs
            pod("g3-0", "g3", "n4", phase="Succeeded"), pod("g3-1", "g3", "n4", phase="Succeeded")]
    gangs = {"g1", "g2", "g3"}
    assert NL.nodes_to_kill(pods, gangs, 1) == ["n2"]
    assert NL.nodes_to_kill(pods, gangs, 2) == ["n2", "n3"]
    assert NL.nodes_to_kill(pods, gangs, 5) == ["n2", "n3"]  # finished pods and singles make no node a target


def test_the_jobs_hit_are_those_with_a_running_pod_on_a_killed_node():
    pods = [pod("g1-1", "g1", "n2"), pod("g1-0", "g1", "n3"), pod("s-0", "s", "n2"),
            pod("done", "d", "n2", phase="Succeeded"), pod("other", "o", "n5")]
    assert NL.jobs_on(pods, ["n2", "n3"]) == {"g1": ["g1-0", "g1-1"], "s": ["s-0"]}


def test_a_hit_job_reforms_when_its_replacement_binds_and_finishes_when_all_its_pods_succeed():
    records = [
        # g: 2 pods; the one on the dead node never ends (force-deleted), a replacement binds at 130
        PodRecord("g", 8, "n1", bound=10, ended=400, succeeded=True),
        PodRecord("g", 8, "lost", bound=10, ended=None),
        PodRecord("g", 8, "n7", bound=130, ended=600, succeeded=True),
        # h: 2 pods both on the dead node; both replaced, the second at 200; finished
        PodRecord("h", 8, "lost", bound=20), PodRecord("h", 8, "lost", bound=20),
        PodRecord("h", 8, "n8", bound=150, ended=700, succeeded=True),
        PodRecord("h", 8, "n9", bound=200, ended=700, succeeded=True),
        # u: never re-formed
        PodRecord("u", 8, "lost", bound=30),
    ]
    result = NL.outcome(["g", "h", "u"], {"g": 2, "h": 2, "u": 1}, records, killed_at=100)
    assert result.finished == ["g", "h"] and result.unfinished == ["u"]
    assert result.reformed_s == {"g": 30.0, "h": 100.0}


def test_a_hit_job_whose_other_pods_already_succeeded_needs_only_the_lost_ones_again():
    records = [PodRecord("g", 8, "n1", bound=10, ended=50, succeeded=True), PodRecord("g", 8, "lost", bound=10),
               PodRecord("g", 8, "n2", bound=190, ended=300, succeeded=True)]
    assert NL.outcome(["g"], {"g": 2}, records, killed_at=100).reformed_s == {"g": 90.0}


def sample(at: float, lost=(), on_lost: float = 0, volcano: float = 0, held: float = 0, pods: int = 0) -> NL.Sample:
    return NL.Sample(at, tuple(lost), on_lost, volcano, held, pods)


def test_the_figures_separate_volcanos_lag_before_the_kill_its_peak_and_what_it_still_charges_once_settled():
    samples = [sample(-5, volcano=100, held=96), sample(0, volcano=100, held=100),
               sample(20, ("n1",), volcano=100, held=100, pods=1),               # only one of the two lost yet
               sample(50, ("n1", "n2"), volcano=100, held=84, pods=2),            # both lost: seen at 50 s
               sample(210, ("n1", "n2"), volcano=92, held=92, pods=0),            # settled: nothing charged
               sample(400, volcano=90, held=90)]
    figures = NL.figures(samples, ["n1", "n2"], settled_after_s=200)
    assert figures["not_ready_s"] == 50
    assert figures["volcano_excess_before_max"] == 4
    assert figures["volcano_excess_peak"] == 16
    assert figures["volcano_excess_settled_max"] == 0 and figures["pods_on_lost_settled_max"] == 0
    assert figures["samples_while_lost"] == 3 and figures["samples_settled"] == 1
    assert figures["report_gpus_on_lost_max"] == 0


def test_no_settled_sample_is_no_figure_rather_than_a_clean_one():
    figures = NL.figures([sample(30, ("n1",), volcano=8, held=0, pods=1)], ["n1"], settled_after_s=200)
    assert figures["volcano_excess_settled_max"] is None and figures["pods_on_lost_settled_max"] is None


def timed(name: str, job: str, node: str, started: str, delay: str) -> dict:
    spec = pod(name, job, node)
    spec["metadata"]["annotations"] = {K.KWOK_POD_COMPLETE_DELAY_ANNOTATION: delay}
    spec["status"]["startTime"] = started
    return spec


def test_a_pod_kwok_completes_before_the_node_is_seen_lost_is_not_hit():
    from trainyard.timestamps import parse_time

    now = parse_time("2026-01-01T00:10:00Z").timestamp()
    pods = [timed("g1-0", "g1", "n1", "2026-01-01T00:00:00Z", "620s"),   # 20 s left: done before NotReady
            timed("g2-0", "g2", "n2", "2026-01-01T00:09:00Z", "600s"),   # 540 s left
            pod("g3-0", "g3", "n1")]                                    # no delay: runs until stopped
    assert NL.remaining_s(pods[0], now) == pytest.approx(20) and NL.remaining_s(pods[2], now) == float("inf")
    assert NL.nodes_to_kill(pods, {"g1", "g2"}, 2, now, 150) == ["n2"]
    assert NL.jobs_on(pods, ["n1", "n2"], now, 150) == {"g2": ["g2-0"], "g3": ["g3-0"]}
