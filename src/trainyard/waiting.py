"""Polling with a deadline: the project's one hand-written wait loop (tests/unit/test_waiting.py keeps it so).

Every wait names what it waits for, so a timeout explains itself, and reports the last value it saw.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from trainyard.errors import TrainyardError

T = TypeVar("T")


class WaitTimeout(TrainyardError, TimeoutError):
    """A wait ran out of time. A TimeoutError too, which is what the waits it replaced raised."""


def wait_for(predicate: Callable[[], T], timeout: float = 60, what: str = "condition", interval: float = 1.0, *,
             error: type[BaseException] | None = WaitTimeout) -> T:
    """The first truthy value of `predicate()`, polled every `interval` s for `timeout` s.

    The first poll is immediate and the last one at the deadline, so a wait with no time left still looks
    once and a timeout never oversleeps. On timeout, raise `error` with a message naming `what` and the last
    value; `error=None` returns that last (falsy) value instead, for callers whose answer to a timeout is
    False, or an error and a message of their own.
    """
    deadline = time.monotonic() + timeout
    while True:
        last = predicate()
        if last:
            return last
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(interval, left))
    if error is None:
        return last
    raise error(f"timed out after {timeout:.0f}s waiting for {what}; last value {last!r}")
