"""The measuring shared by the benchmarks: /proc parsing, Prometheus text, the children-seen bookkeeping."""

import os
import time

import pytest

from trainyard.benchkit import ChildrenWatch, RssTrace, counter_sum, histogram_buckets, parse_process_usage, process_usage

STAT = "4242 (python3 (x) y) S 1 4242 4242 0 -1 4194560 2000 0 0 0 1234 566 0 0 20 0 9 0 100 500000 3000"
STATUS = "Name:\tpython3\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t9\n"

METRICS = """# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="pods",verb="LIST"} 10
apiserver_request_total{code="201",resource="trainjobs",verb="POST"} 5
apiserver_request_total{code="200",resource="pods",verb="WATCH"} 2.5
# HELP volcano_e2e_scheduling_latency_milliseconds E2e scheduling latency.
# TYPE volcano_e2e_scheduling_latency_milliseconds histogram
volcano_e2e_scheduling_latency_milliseconds_bucket{le="5"} 1
volcano_e2e_scheduling_latency_milliseconds_bucket{le="10"} 3
volcano_e2e_scheduling_latency_milliseconds_bucket{le="+Inf"} 4
volcano_e2e_scheduling_latency_milliseconds_sum 31
volcano_e2e_scheduling_latency_milliseconds_count 4
"""


def test_process_usage_parses_a_command_name_with_parentheses_and_spaces():
    usage = parse_process_usage(STAT, STATUS)
    assert (usage.cpu_s, usage.peak_rss_mib, usage.rss_mib) == (18.0, 200.0, 100.0)


def test_process_usage_of_this_process_grows_with_work():
    before = process_usage(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    after = process_usage(os.getpid())
    assert after.cpu_s >= before.cpu_s + 0.2
    assert 0 < after.rss_mib <= after.peak_rss_mib


def test_rss_trace_samples_a_live_process():
    trace = RssTrace(os.getpid(), time.monotonic(), every=0.05)
    time.sleep(0.3)
    points = trace.finish()
    assert len(points) >= 2 and all(mib > 0 for _, mib in points)


@pytest.mark.parametrize("name, match, expected", [
    ("apiserver_request_total", {}, 17.5),
    ("apiserver_request_total", {"resource": "pods"}, 12.5),
    ("apiserver_request_total", {"resource": "pods", "verb": "LIST"}, 10.0),
    ("apiserver_request", {"verb": "POST"}, 5.0),
    ("apiserver_request_total", {"resource": "jobsets"}, 0.0),
    ("no_such_metric_total", {}, 0.0),
])
def test_counter_sum(name, match, expected):
    assert counter_sum(METRICS, name, **match) == expected


def test_histogram_buckets_are_cumulative_by_bound():
    assert histogram_buckets(METRICS, "volcano_e2e_scheduling_latency_milliseconds") == {
        5.0: 1.0, 10.0: 3.0, float("inf"): 4.0}


def test_children_watch_times_a_trainjob_when_both_kinds_were_seen():
    watch = ChildrenWatch(new_custom_api=None)  # not started: only the bookkeeping
    watch.saw("jobsets", ("ns", "a"), now=1.0)
    watch.saw("jobsets", ("ns", "a"), now=2.0)
    assert watch.count([("ns", "a")]) == 0
    watch.saw("podgroups", ("ns", "a"), now=3.0)
    watch.saw("podgroups", ("ns", "a"), now=4.0)
    watch.saw("podgroups", ("other", "a"), now=5.0)
    assert watch.both == {("ns", "a"): 3.0}
    assert watch.count([("ns", "a"), ("other", "a"), ("ns", "b")]) == 1
