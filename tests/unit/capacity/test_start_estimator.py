"""Start-estimate Events: when one is written again, what it says, which TrainJob it goes on (the pure parts)."""

from __future__ import annotations

import pytest

from trainyard.capacity.start_estimator import (REFRESH_S, Written, estimate_annotations, event_message, event_name,
                                                estimate_event, needs_writing, trainjob_owners)
from trainyard.k8s import ESTIMATED_AT_ANNOTATION, EXPECTED_START_ANNOTATION
from trainyard.scheduling.estimate import StartEstimate

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def found(start_in_s, position=1, queue="team-a", guessed=False):
    return StartEstimate("ns/tj", queue, position, start_in_s, guessed)


def written(starts_in_s, position=1, queue="team-a", ago_s=60.0, guessed=False):
    at = NOW - ago_s
    return Written(position, queue, None if starts_in_s is None else at + starts_in_s, at, guessed)


@pytest.mark.parametrize("previous,now_found,expected", [
    (None, found(600), True),                                   # never written
    (written(660), found(600), False),                          # the same start, a minute later
    (written(660 + 100), found(600), False),                    # moved 100 s: under 2 min
    (written(660 + 300), found(600), True),                     # moved 5 min on a 10-min wait
    (written(7200 + 60 + 600), found(7200), False),             # moved 10 min on a 2-h wait: under 20 %
    (written(660, position=2), found(600), True),               # its place in the queue changed
    (written(660, queue="team-b"), found(600), True),
    (written(None), found(600), True),                          # now within the horizon
    (written(660), found(None), True),                          # no longer within it
    (written(None), found(None), False),
    (written(660, ago_s=REFRESH_S), found(600 - REFRESH_S + 660), True),  # 30 min old: refreshed before the TTL
    (written(660), found(3000, guessed=True), True),            # it said a time, now it has none
    (written(660, guessed=True), found(5000, guessed=True), False),  # still none: the guess moving says nothing new
    (written(660, guessed=True), found(600), True),             # a time again
])
def test_needs_writing(previous, now_found, expected):
    assert needs_writing(previous, now_found, NOW) is expected


def test_event_message_names_the_clock_time_and_the_assumption():
    message = event_message(found(720), NOW, 3600)
    assert message.startswith("starts in about 12 min (around 08:12 UTC), position 1 in queue team-a (if nothing else")
    assert "after 60 min in all" in message
    assert event_message(found(10), NOW, 3600).startswith("starts now, position 1 in queue team-a (")
    assert event_message(found(None), NOW, 3600).startswith("does not start within a week at the current load")


def test_an_event_without_an_estimate_names_no_clock_time():
    message = event_message(found(3000, guessed=True), NOW, 3600)
    assert message == ("no start estimate: it waits for jobs whose end is unknown (no trainerStatus progress), "
                       "position 1 in queue team-a")


def test_events_go_on_the_owning_trainjob_one_per_trainjob_uid():
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj", "uid": "0123456789ab",
             "controller": True}
    groups = [{"metadata": {"name": "tj", "namespace": "ns", "ownerReferences": [owner]}},
              {"metadata": {"name": "bare", "namespace": "ns"}},  # a PodGroup no TrainJob owns: no Event
              {"metadata": {"name": "x", "namespace": "ns", "ownerReferences": [{**owner, "controller": False}]}}]
    owners = trainjob_owners(groups)
    assert list(owners) == ["ns/tj"]
    trainjob = owners["ns/tj"]
    assert trainjob == {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj",
                        "namespace": "ns", "uid": "0123456789ab"}
    assert event_name(trainjob) == "tj.startestimate.01234567"
    event = estimate_event(trainjob, "starts now", "2027-01-15T08:00:00Z")
    assert (event["reason"], event["type"], event["involvedObject"], event["metadata"]) == (
        "TrainJobStartEstimate", "Normal", trainjob, {"name": "tj.startestimate.01234567", "namespace": "ns"})


@pytest.mark.parametrize("found, expected", [
    (StartEstimate("ns/a", "q", 1, 90.0), "1000090.0"),
    (StartEstimate("ns/a", "q", 1, 90.0, guessed=True), None),   # says there is no estimate: no time for programs
    (StartEstimate("ns/a", "q", 1, None), None),                  # beyond the horizon
])
def test_the_event_carries_the_estimate_for_programs(found, expected):
    marks = estimate_annotations(found, 1_000_000.0)
    assert marks == {EXPECTED_START_ANNOTATION: expected, ESTIMATED_AT_ANNOTATION: "1000000.0"}
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj", "namespace": "ns",
                "uid": "0123456789ab"}
    annotations = estimate_event(trainjob, "words", "2027-01-15T08:00:00Z", marks)["metadata"]["annotations"]
    assert annotations == {key: value for key, value in marks.items() if value is not None}
