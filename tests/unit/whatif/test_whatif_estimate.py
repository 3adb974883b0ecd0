"""Start estimates: the live state replayed forward on the model; the simplest cases are exact."""

import pytest

from trainyard.scheduling.simulator import ModelNode, ModelPolicy
from trainyard.scheduling.estimate import (DEFAULT_RUN_S, PendingGang, RunningGang, StartEstimate,
                                       estimate_starts, phrase, positions, remaining_time)

CYCLE = ModelPolicy().cycle_s


def nodes(count: int, per_rack: int = 2) -> list[ModelNode]:
    return [ModelNode(f"n{i}", f"rack-{i // per_rack}", "spine-0", 8) for i in range(count)]


def test_the_only_job_behind_one_running_job_starts_when_that_job_ends():
    running = [RunningGang("team-a/run", "team-a", (("n0", 8),), remaining_s=437.0)]
    pending = [PendingGang("team-a/next", "team-a", 1, 8)]
    (estimate,) = estimate_starts(nodes(1), running, pending, {"team-a": 1}).values()
    assert estimate.position == 1
    assert 437.0 <= estimate.start_in_s <= 437.0 + CYCLE


def test_a_gang_waits_for_the_gangs_ahead_of_it_to_run_their_expected_time():
    running = [RunningGang("a/r", "team-a", (("n0", 8), ("n1", 8)), remaining_s=100.0)]
    pending = [PendingGang("a/first", "team-a", 2, 8, tier=1, run_s=200.0),
               PendingGang("a/second", "team-a", 2, 8, tier=1, run_s=50.0)]
    found = estimate_starts(nodes(2), running, pending, {"team-a": 1})
    assert found["a/first"].start_in_s == pytest.approx(100.0, abs=CYCLE)
    assert found["a/second"].start_in_s == pytest.approx(300.0, abs=2 * CYCLE)
    assert (found["a/first"].position, found["a/second"].position) == (1, 2)


def test_free_room_means_now_and_a_higher_priority_gang_goes_first():
    pending = [PendingGang("a/low", "team-a", 1, 8, priority=100, run_s=60.0),
               PendingGang("a/high", "team-a", 1, 8, priority=10000, run_s=60.0)]
    found = estimate_starts(nodes(1), [], pending, {"team-a": 1})
    assert found["a/high"].start_in_s == 0.0 and found["a/high"].position == 1
    assert found["a/low"].start_in_s == pytest.approx(60.0, abs=CYCLE) and found["a/low"].position == 2


def test_a_gang_that_never_fits_has_no_estimate():
    found = estimate_starts(nodes(2), [], [PendingGang("a/huge", "team-a", 3, 8, tier=1)], {"team-a": 1},
                            horizon_s=3600.0)
    assert found["a/huge"].start_in_s is None
    assert phrase(found["a/huge"]).startswith("does not start within a week")


def test_positions_follow_priority_then_creation_per_queue():
    pending = [PendingGang("x1", "a", 1, 1), PendingGang("y1", "b", 1, 1), PendingGang("x2", "a", 1, 1, priority=5),
               PendingGang("x3", "a", 1, 1)]
    assert positions(pending) == {"x2": 1, "x1": 2, "x3": 3, "y1": 1}


@pytest.mark.parametrize("status, ran, expected", [
    (120, 5000.0, 120.0),  # the trainer's own estimate wins
    (None, 600.0, DEFAULT_RUN_S - 600.0),
    (None, DEFAULT_RUN_S + 10, DEFAULT_RUN_S / 10),  # past the default: another tenth, not zero
])
def test_remaining_time(status, ran, expected):
    assert remaining_time(status, ran) == expected


@pytest.mark.parametrize("seconds, words", [(0, "starts now"), (45, "starts in about 40 s"),
                                            (720, "starts in about 12 min"), (5400, "starts in about 1.5 h"),
                                            (200000, "starts in about 2.3 days")])
def test_phrase(seconds, words):
    assert phrase(StartEstimate("k", "team-a", 3, seconds)) == f"{words}, position 3 in queue team-a"


@pytest.mark.parametrize("running_guessed, first_guessed, starts, guessed", [
    # (the running job's end guessed, the first waiting job's run guessed) -> the second waiting job's estimate
    (False, False, 300.0, False),   # every time known: a precise start
    (True, False, None, True),      # it waits for a job that reports nothing: no time given
    (False, True, None, True),      # it waits for a waiting job whose run time is the default
])
def test_a_start_made_by_a_guessed_run_time_is_said_to_have_no_estimate(running_guessed, first_guessed, starts,
                                                                          guessed):
    running = [RunningGang("a/r", "team-a", (("n0", 8), ("n1", 8)), remaining_s=100.0, guessed=running_guessed)]
    pending = [PendingGang("a/first", "team-a", 2, 8, tier=1, run_s=200.0, guessed=first_guessed),
               PendingGang("a/second", "team-a", 2, 8, tier=1, run_s=50.0, guessed=True)]
    found = estimate_starts(nodes(2), running, pending, {"team-a": 1})["a/second"]
    assert found.guessed == guessed
    if starts is not None:
        assert found.start_in_s == pytest.approx(starts, abs=2 * CYCLE)
    words = phrase(found)
    assert ("no start estimate" in words) == guessed and words.endswith("position 2 in queue team-a")


def test_a_gang_that_starts_now_is_not_made_uncertain_by_guesses_elsewhere():
    running = [RunningGang("b/r", "team-b", (("n0", 8),), remaining_s=100.0, guessed=True)]
    pending = [PendingGang("a/now", "team-a", 1, 8, guessed=True)]
    found = estimate_starts(nodes(2), running, pending, {"team-a": 1, "team-b": 1})["a/now"]
    assert found.start_in_s == 0.0 and not found.guessed and phrase(found).startswith("starts now")
