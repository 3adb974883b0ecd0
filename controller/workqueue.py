"""A deduplicating work queue with delayed adds and per-key exponential backoff.

Same contract as client-go's rate-limited queue: a key is processed by at most one worker at a
time; adding a key that is queued or in flight coalesces; failures requeue with backoff up to a
retry budget, after which the key is dropped (the next watch event brings it back).
"""

from __future__ import annotations

import heapq
import threading
import time
from typing import Hashable


class WorkQueue:
    def __init__(self, base_delay: float = 0.05, max_delay: float = 60.0, max_retries: int = 15):
        self._cond = threading.Condition()
        self._queue: list[Hashable] = []
        self._queued: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._dirty: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._failures: dict[Hashable, int] = {}
        self._seq = 0
        self._shutdown = False
        self.base_delay, self.max_delay, self.max_retries = base_delay, max_delay, max_retries

    def add(self, key: Hashable) -> None:
        with self._cond:
            if self._shutdown:
                return
            if key in self._processing:
                self._dirty.add(key)
                return
            if key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            self._seq += 1
            heapq.heappush(self._delayed, (time.monotonic() + delay, self._seq, key))
            self._cond.notify()

    def retry(self, key: Hashable) -> bool:
        """Requeue after a failure with exponential backoff; False once the retry budget is spent."""
        with self._cond:
            count = self._failures.get(key, 0) + 1
            if count > self.max_retries:
                self._failures.pop(key, None)
                return False
            self._failures[key] = count
        self.add_after(key, min(self.max_delay, self.base_delay * 2 ** (count - 1)))
        return True

    def forget(self, key: Hashable) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None) -> Hashable | None:
        """Next key to process, or None on shutdown/timeout. Call done(key) afterwards."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                self._promote_due()
                if self._queue:
                    key = self._queue.pop(0)
                    self._queued.discard(key)
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

    def done(self, key: Hashable) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                if key not in self._queued:
                    self._queued.add(key)
                    self._queue.append(key)
                    self._cond.notify()

    def _promote_due(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            if key in self._processing:
                self._dirty.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
