"""trainyard.waiting.wait_for, the one poll loop: what it returns, how it times out, how often it looks; and a
guard that no other hand-written deadline loop comes back."""

from __future__ import annotations

import itertools
import os
import re
import time
from pathlib import Path

import pytest

from trainyard.waiting import WaitTimeout, wait_for

ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / "src" / "trainyard" / "waiting.py"
NOT_OURS = {".venv", "build", ".git", "__pycache__", ".pytest_cache", ".hypothesis", ".pulumi-state"}
CLOCK = "time.monotonic()"  # kept out of this file's own lines, which the guard reads too
DEADLINE_LOOP = re.compile(
    r"\bdeadline\w*(\s*,\s*\w+)*\s*=\s*time\.monotonic\(\)"  # a deadline read off the clock
    r"|\bwhile\b[^\n]*time\.monotonic\(\)\s*<"  # a loop condition on the clock
    r"|time\.monotonic\(\)\s*>=?\s*\w*deadline|\bdeadline\w*\s*[<>]=?\s*time\.monotonic\(\)")  # the clock past one
"""A hand-written deadline loop; every wait goes through wait_for instead."""


def values(*seq):
    """A predicate returning `seq` one by one, then its last value forever."""
    remaining, last = iter(seq), None

    def predicate():
        nonlocal last
        last = next(remaining, last)
        return last

    return predicate


@pytest.mark.parametrize(("sequence", "expected"), [
    ((7,), 7),
    ((0, None, "", "ready"), "ready"),
    ((False, [], {"pod": 1}), {"pod": 1}),
    ((None, True), True),
])
def test_returns_the_first_truthy_value(sequence, expected):
    assert wait_for(values(*sequence), timeout=5, interval=0) == expected


@pytest.mark.parametrize(("error", "raised"), [
    (WaitTimeout, WaitTimeout),
    (AssertionError, AssertionError),
    (RuntimeError, RuntimeError),
])
def test_times_out_naming_what_and_the_last_value(error, raised):
    with pytest.raises(raised) as caught:
        wait_for(values(None, [], 0), timeout=0.05, what="the queue to open", interval=0.01, error=error)
    assert str(caught.value) == "timed out after 0s waiting for the queue to open; last value 0"


def test_a_timeout_is_a_trainyard_error_and_a_timeout_error():
    from trainyard.errors import TrainyardError

    with pytest.raises(WaitTimeout) as caught:
        wait_for(lambda: None, timeout=0, what="nothing")
    assert isinstance(caught.value, TrainyardError) and isinstance(caught.value, TimeoutError)


@pytest.mark.parametrize(("last", "expected"), [(False, False), (None, None), ([], [])])
def test_without_an_error_a_timeout_returns_the_last_value(last, expected):
    assert wait_for(lambda: last, timeout=0.02, interval=0.005, error=None) == expected


def test_looks_once_even_with_no_time_left():
    calls = itertools.count()
    assert wait_for(lambda: next(calls) == 0, timeout=0, error=None) is True


@pytest.mark.parametrize(("timeout", "interval", "polls"), [
    (0.30, 0.10, range(4, 6)),  # at 0, 0.1, 0.2 and the deadline (a slow machine may add one)
    (0.20, 1.00, range(2, 3)),  # at 0 and the deadline: the sleep stops there, it never oversleeps
    (0.12, 0.05, range(3, 5)),
])
def test_polls_every_interval_and_once_more_at_the_deadline(timeout, interval, polls):
    times: list[float] = []
    started = time.monotonic()
    wait_for(lambda: times.append(time.monotonic()), timeout, "never", interval, error=None)
    took = time.monotonic() - started
    assert len(times) in polls, times
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(gap >= interval * 0.9 for gap in gaps[:-1]), gaps  # the last gap ends at the deadline
    assert timeout <= took < timeout + 0.1, took


def source_files() -> list[Path]:
    """Every Python file of the repository (not the virtualenv, the build or other tools' caches)."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if d not in NOT_OURS and not d.endswith(".egg-info")]
        found += [Path(folder, name) for name in files if name.endswith(".py")]
    return found


def test_no_hand_written_deadline_loop_outside_the_helper():
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in source_files() if path != HELPER
             for number, line in enumerate(path.read_text().splitlines(), 1) if DEADLINE_LOOP.search(line)]
    assert not found, "poll through trainyard.waiting.wait_for (tests: waiting.wait_for) instead:\n" + "\n".join(found)


@pytest.mark.parametrize(("line", "flagged"), [
    (f"deadline = {CLOCK} + timeout", True),
    (f"deadline, reason_at = {CLOCK} + timeout, None", True),
    (f"while {CLOCK} < deadline:", True),
    (f"while pid_alive(pid) and {CLOCK} < stop_at:", True),
    (f"if {CLOCK} > deadline:", True),
    (f"if deadline <= {CLOCK}:", True),
    (f"started = {CLOCK}", False),
    (f"remaining = deadline - {CLOCK}", False),
])
def test_the_guard_recognizes_a_deadline_loop(line, flagged):
    assert bool(DEADLINE_LOOP.search(line)) is flagged
