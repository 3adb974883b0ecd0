"""The controller's work queue: dedupe, no concurrent processing of one key, backoff, retry budget."""

import threading
import time

import pytest

from trainyard.controller.runtime.workqueue import WorkQueue


def test_adding_a_queued_key_coalesces():
    q = WorkQueue()
    q.add("a"); q.add("b"); q.add("a")
    assert [q.get(0.1), q.get(0.1), q.get(0.05)] == ["a", "b", None]


def test_a_key_in_flight_is_requeued_once_after_done_not_handed_out_twice():
    q = WorkQueue()
    q.add("a")
    assert q.get(0.1) == "a"
    q.add("a"); q.add("a")
    assert q.get(0.05) is None, "a is still being processed"
    q.done("a")
    assert q.get(0.1) == "a"
    q.done("a")
    assert q.get(0.05) is None


def test_add_after_delays():
    q = WorkQueue()
    q.add_after("a", 0.2)
    assert q.get(0.05) is None
    started = time.monotonic()
    assert q.get(1.0) == "a"
    assert time.monotonic() - started >= 0.1


@pytest.mark.parametrize("failures,expected_min_delay", [(1, 0.05), (2, 0.1), (3, 0.2)])
def test_retry_backs_off_exponentially(failures, expected_min_delay):
    q = WorkQueue(base_delay=0.05)
    for _ in range(failures - 1):
        q.retry("a")
        assert q.get(2) == "a"
        q.done("a")
    started = time.monotonic()
    assert q.retry("a")
    assert q.get(2) == "a"
    assert time.monotonic() - started >= expected_min_delay * 0.9
    assert q.failures("a") == failures


def test_retry_budget_then_forget_resets():
    q = WorkQueue(base_delay=0.0001, max_retries=2)
    assert q.retry("a") and q.retry("a")
    assert not q.retry("a"), "third failure exceeds the budget"
    q.retry("b"); q.forget("b")
    assert q.failures("b") == 0


def test_workers_never_process_one_key_concurrently():
    q = WorkQueue()
    active, overlaps, seen = set(), [], []
    lock = threading.Lock()

    def worker():
        while True:
            key = q.get(0.3)
            if key is None:
                return
            with lock:
                if key in active:
                    overlaps.append(key)
                active.add(key)
            time.sleep(0.002)
            with lock:
                active.discard(key)
                seen.append(key)
            q.done(key)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(200):
        q.add(i % 5)
    for t in threads:
        t.join()
    assert overlaps == []
    assert set(seen) == set(range(5))


def test_shutdown_wakes_getters():
    q = WorkQueue()
    result = []
    t = threading.Thread(target=lambda: result.append(q.get()))
    t.start()
    q.shutdown()
    t.join(1)
    assert result == [None]


LOW, NORMAL = -100, 0


@pytest.mark.parametrize("adds,order", [
    ([("a", NORMAL), ("b", NORMAL), ("c", NORMAL)], ["a", "b", "c"]),  # one priority: first come, first served
    ([("old-1", LOW), ("old-2", LOW), ("new", NORMAL)], ["new", "old-1", "old-2"]),
    ([("a", LOW), ("b", NORMAL), ("a", NORMAL)], ["b", "a"]),  # raised: joins the tail of its new priority
    ([("a", NORMAL), ("b", NORMAL), ("a", LOW)], ["a", "b"]),  # a lower re-add never lowers a queued key
    ([("a", 5), ("b", NORMAL), ("c", 5)], ["a", "c", "b"]),
], ids=["fifo", "fresh-work-overtakes-a-listed-backlog", "raise-priority", "no-lowering", "higher-first"])
def test_priority_order(adds, order):
    q = WorkQueue()
    for key, priority in adds:
        q.add(key, priority)
    assert [q.get(0.1) for _ in order] + [q.get(0.01)] == order + [None]


def test_a_key_added_while_in_flight_comes_back_with_the_highest_priority_it_was_added_with():
    q = WorkQueue()
    q.add("a")
    assert q.get(0.1) == "a"
    q.add("a", LOW); q.add("a", NORMAL)
    q.add("b", LOW)
    q.done("a")
    assert [q.get(0.1), q.get(0.1)] == ["a", "b"]


def test_a_delayed_add_keeps_its_priority():
    q = WorkQueue()
    q.add("listed", LOW)
    q.add_after("later", 0.05, NORMAL)
    time.sleep(0.1)
    assert [q.get(0.1), q.get(0.1)] == ["later", "listed"]
