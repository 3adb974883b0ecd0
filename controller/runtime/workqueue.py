"""A deduplicating priority work queue with delayed adds and per-key exponential backoff.

Same contract as controller-runtime's priority queue (the default since v0.22, which upstream's manager
runs): a key is processed by at most one worker at a time; adding a key that is queued or in flight
coalesces; higher priority first, first-come first-served within one priority; re-adding a queued key
with a higher priority raises it (and it joins that priority's tail). Failures requeue with backoff up to
a retry budget, after which the key is dropped (the next watch event brings it back).

Priorities matter after a restart or a relist: every object the informers list is "seen" again, and
those keys (LOW_PRIORITY) must not make a TrainJob created a second ago wait behind the whole backlog.
"""

from __future__ import annotations

import heapq
import threading
import time
from typing import Generic, Hashable, TypeVar

NORMAL_PRIORITY = 0
# What controller-runtime gives events from an informer's initial list or an unchanged object on resync.
LOW_PRIORITY = -100
# A tenant gang Volcano just admitted whose JobSet waits suspended: its GPUs are set aside for it and stay idle
# until the controller resumes the JobSet, so it goes before new TrainJobs (a burst queues thousands of them).
ADMITTED_PRIORITY = 10


KeyT = TypeVar("KeyT", bound=Hashable)


class WorkQueue(Generic[KeyT]):
    def __init__(self, base_delay: float = 0.05, max_delay: float = 60.0, max_retries: int = 15):
        self._cond = threading.Condition()
        # Ready keys: heap of (-priority, sequence, key); `_queued` holds each key's live entry, so a raised
        # key's old heap entry is recognised as stale and skipped.
        self._ready: list[tuple[int, int, KeyT]] = []
        self._queued: dict[KeyT, tuple[int, int]] = {}
        self._processing: set[KeyT] = set()
        self._dirty: dict[KeyT, int] = {}  # added while in flight -> the priority it comes back with
        self._delayed: list[tuple[float, int, KeyT, int]] = []
        self._failures: dict[KeyT, int] = {}
        self._seq = 0
        self._shutdown = False
        self.base_delay, self.max_delay, self.max_retries = base_delay, max_delay, max_retries

    def add(self, key: KeyT, priority: int = NORMAL_PRIORITY) -> None:
        with self._cond:
            if not self._shutdown:
                self._add_locked(key, priority)

    def _add_locked(self, key: KeyT, priority: int) -> None:
        if key in self._processing:
            self._dirty[key] = max(priority, self._dirty.get(key, priority))
            return
        queued = self._queued.get(key)
        if queued is not None and -queued[0] >= priority:
            return
        self._seq += 1
        self._queued[key] = (-priority, self._seq)
        heapq.heappush(self._ready, (-priority, self._seq, key))
        self._cond.notify()

    def add_after(self, key: KeyT, delay: float, priority: int = NORMAL_PRIORITY) -> None:
        if delay <= 0:
            self.add(key, priority)
            return
        with self._cond:
            self._seq += 1
            heapq.heappush(self._delayed, (time.monotonic() + delay, self._seq, key, priority))
            self._cond.notify()

    def retry(self, key: KeyT) -> bool:
        """Requeue after a failure with exponential backoff; False once the retry budget is spent."""
        with self._cond:
            count = self._failures.get(key, 0) + 1
            if count > self.max_retries:
                self._failures.pop(key, None)
                return False
            self._failures[key] = count
        self.add_after(key, min(self.max_delay, self.base_delay * 2 ** (count - 1)))
        return True

    def forget(self, key: KeyT) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: KeyT) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None) -> KeyT | None:
        """Next key to process, or None on shutdown/timeout. Call done(key) afterwards."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                self._promote_due()
                key = self._pop_ready()
                if key is not None:
                    self._processing.add(key)
                    return key
                if self._shutdown:
                    return None
                wait = None
                if self._delayed:
                    wait = max(0.0, self._delayed[0][0] - time.monotonic())
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    wait = remaining if wait is None else min(wait, remaining)
                self._cond.wait(wait)

    def _pop_ready(self) -> KeyT | None:
        while self._ready:
            negative_priority, seq, key = heapq.heappop(self._ready)
            if self._queued.get(key) == (negative_priority, seq):
                del self._queued[key]
                return key
        return None

    def done(self, key: KeyT) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._add_locked(key, self._dirty.pop(key))

    def _promote_due(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key, priority = heapq.heappop(self._delayed)
            self._add_locked(key, priority)

    def __len__(self) -> int:
        with self._cond:
            return len(self._queued)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
