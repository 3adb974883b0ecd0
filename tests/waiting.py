"""Polling with a deadline, shared by the test suites (tests/ is on sys.path through its conftest).

The loop is trainyard.waiting's; a test's timeout is an AssertionError, so it reports as a failure.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from trainyard.waiting import wait_for as _wait_for

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 60, what: str = "condition", interval: float = 1.0, *,
             error: type[BaseException] | None = AssertionError) -> T:
    """The first truthy value of `predicate()`; on timeout `error` (see trainyard.waiting.wait_for)."""
    return _wait_for(predicate, timeout, what, interval, error=error)


def retrying(attempt: Callable[[], T], retryable: Callable[[Exception], bool], timeout: float, what: str,
             interval: float) -> T:
    """`attempt()`'s result once it stops raising errors `retryable` accepts (as a user's tooling retries
    while a webhook or the API server is away); after `timeout`, the last of those errors again."""
    failures: list[Exception] = []

    def attempted() -> tuple[T] | None:
        try:
            return (attempt(),)  # a tuple: a falsy result still ends the wait
        except Exception as exc:
            if not retryable(exc):
                raise
            failures.append(exc)
            return None

    done = wait_for(attempted, timeout, what, interval, error=None)
    if done:
        return done[0]
    raise failures[-1]
