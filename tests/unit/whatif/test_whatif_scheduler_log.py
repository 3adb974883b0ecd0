"""vc-scheduler's own words on the queues it held back, per queue and per scheduling cycle, from its log (-v=3)."""

from trainyard.whatif.cluster_engine import queues_held_back

LOG = """\
I1128 12:33:16.823473   21394 proportion.go:307] Queue <team-a> is overused: deserved <nvidia.com/gpu 1000.00>, allocated <nvidia.com/gpu 1000.00>, share <1>
I1128 12:33:16.823498   21394 allocate.go:289] Queue <team-a> is overused, ignore it.
I1128 12:33:17.100000   21394 allocate.go:572] Queue <team-b> is overused when considering task <team-b/j1-node-0-0-x>, ignore it.
I1128 12:33:17.100400   21394 allocate.go:572] Queue <team-b> is overused when considering task <team-b/j1-node-0-1-x>, ignore it.
I1128 12:33:17.600000   21394 allocate.go:572] Queue <team-b> is overused when considering task <team-b/j1-node-0-0-x>, ignore it.
I1128 12:33:18.323498   21394 allocate.go:289] Queue <team-a> is overused, ignore it.
I1128 12:33:18.400000   21394 allocate.go:300] Try to allocate resource for job team-a/j2
"""


def test_each_queue_held_back_is_counted_in_cycles_and_given_in_trace_seconds():
    # team-a: 2 cycles skipped whole (the proportion.go line says why, it is not a cycle of its own);
    # team-b: 2 cycles with a task refused (two tasks of one gang in the first)
    assert queues_held_back(LOG, seconds_per_cycle=2.0) == {"team-a": {"overused_s": 4.0, "refused_s": 0.0},
                                                            "team-b": {"overused_s": 0.0, "refused_s": 4.0}}


def test_a_missing_or_quiet_log_holds_nothing_back():
    assert queues_held_back("", 2.0) == {}
    assert queues_held_back("I1128 12:00:00.000000 1 allocate.go:300] Try to allocate resource\n", 2.0) == {}
