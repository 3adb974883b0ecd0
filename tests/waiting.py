"""Polling with a deadline, shared by the test suites (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import time


def wait_for(predicate, timeout: float = 60, what: str = "condition", interval: float = 1.0):
    """The first truthy value of `predicate()`, or AssertionError naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last value {last!r}")
