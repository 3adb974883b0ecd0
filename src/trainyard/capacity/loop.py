"""The periodic loop the gang reservation and reclaim run on (a thread; a failed round is logged and retried)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class Loop:
    """Runs `step` every `period` seconds on a thread until `finish`; a failed round is logged and retried."""

    def __init__(self, period: float):
        self.period = period
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def step(self) -> object:
        raise NotImplementedError

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.step()
            except Exception:  # noqa: BLE001 - a busy API server or a conflict: the next round plans again
                log.exception("%s round failed", type(self).__name__)
            self.stop.wait(self.period)

    def start(self):
        self.thread.start()
        return self

    def halt(self, grace: float = 5.0) -> None:
        """Stop after the current round, waiting at most `grace` s: the thread is a daemon, and a process
        asked to stop must not outlive its SIGTERM by a long round (its successor needs its ports)."""
        self.stop.set()
        self.thread.join(grace)
