"""The periodic loop: a failed round is retried, and halting does not wait out a long round."""

import threading
import time

from trainyard.capacity.loop import Loop
from waiting import wait_for


class Rounds(Loop):
    def __init__(self, period, round_s=0.0, fail_first=False):
        super().__init__(period)
        self.round_s, self.fail_first, self.done = round_s, fail_first, 0
        self.started = threading.Event()

    def step(self):
        self.started.set()
        time.sleep(self.round_s)
        self.done += 1
        if self.fail_first and self.done == 1:
            raise RuntimeError("busy API server")


def test_a_failed_round_is_followed_by_the_next():
    loop = Rounds(0.01, fail_first=True).start()
    wait_for(lambda: loop.done >= 3, 5, "three rounds", 0.01, error=None)
    loop.halt()
    assert loop.done >= 3


def test_halt_returns_within_its_grace_while_a_round_is_still_running():
    loop = Rounds(60, round_s=30).start()
    assert loop.started.wait(5)
    began = time.monotonic()
    loop.halt(grace=0.5)
    assert time.monotonic() - began < 5
    assert loop.done == 0
