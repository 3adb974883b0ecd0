"""The live start estimates are judged against the replay's record: which jobs count, which estimates were told
before the start, and the errors of those that gave a time."""

import pytest

from trainyard.capacity.estimate_scoring import figures, scored
from trainyard.schedtrace.replay import RunRecord
from trainyard.scheduling.records import PodRecord

T0 = 1_000_000.0


def record() -> RunRecord:
    pods = {"a0": PodRecord("a", 8, "n0", bound=50.0), "a1": PodRecord("a", 8, "n1", bound=52.0),
            "b0": PodRecord("b", 1, "n2", bound=12.0),   # waited 2 s: not scored
            "c0": PodRecord("c", 4, "n3", bound=130.0),
            "d0": PodRecord("d", 4)}                      # never started: not scored
    return RunRecord(profile="p", direct=False, submitted={"a": 10.0, "b": 10.0, "c": 30.0, "d": 40.0}, pods=pods,
                     started_epoch=T0)


def told(at: float, expected: float | None, message: str = "words") -> dict:
    return {"message": message, "seen_epoch": T0 + at + 0.5, "estimated_epoch": T0 + at,
            "expected_epoch": None if expected is None else T0 + expected}


def test_each_waiting_job_is_judged_on_what_it_was_told_before_it_started():
    events = {"a": {"1": told(11.0, 60.0), "2": told(30.0, 49.0), "3": told(55.0, 56.0)},  # the last: after start
              "b": {"1": told(11.0, 12.0)},
              "c": {"1": told(31.0, None, "no start estimate"), "2": told(90.0, 140.0)},
              "d": {"1": told(41.0, None)}}
    rows = scored(record(), events, min_wait_s=10.0)
    assert [row["job"] for row in rows] == ["a", "c"]
    a, c = rows
    assert a["wait_s"] == 40.0
    assert a["first"] == {"message": "words", "given": True, "before_start_s": 39.0, "error_s": 10.0,
                          "error_share": pytest.approx(10 / 39, abs=1e-3)}
    assert [e["error_s"] for e in a["estimates"]] == [10.0, 1.0]
    assert c["first"] == {"message": "no start estimate", "given": False, "before_start_s": 99.0}
    assert c["estimates"][1]["error_s"] == 10.0


def test_a_job_without_an_event_is_not_scored():
    assert scored(record(), {}, min_wait_s=10.0) == []


def test_figures_over_the_first_estimates_and_over_every_estimate():
    events = {"a": {"1": told(11.0, 60.0), "2": told(30.0, 49.0)},
              "c": {"1": told(31.0, None), "2": told(90.0, 140.0)}}
    found = figures(scored(record(), events, min_wait_s=10.0))
    assert (found["jobs_scored"], found["given"], found["given_share"]) == (2, 1, 0.5)
    assert found["median_error_s"] == 10.0
    every = found["every_estimate"]
    assert (every["estimates"], every["given"], every["given_share"]) == (4, 3, 0.75)
    assert every["median_error_s"] == 10.0


def test_no_estimate_given_has_no_error_figures():
    found = figures(scored(record(), {"a": {"1": told(11.0, None)}}, min_wait_s=10.0))
    assert (found["given_share"], found["median_error_s"], found["p90_error_share"]) == (0.0, None, None)
    assert figures([])["given_share"] is None
