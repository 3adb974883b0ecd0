"""`trainyard tools build` says what it does while it works: each tool as it starts and ends, the time so far and
what is left, estimated from this machine's last build of each tool or its typical cold build."""

from __future__ import annotations

import pytest

from trainyard.toolchain import progress as P
from trainyard.toolchain.versions import Tool


def tool(name: str, typical: int) -> Tool:
    return Tool(name=name, version="v1", module=name, binaries=(name,), typical_build_s=typical)


TOOLS = [tool("kubernetes", 680), tool("etcd", 90), tool("kwok", 170)]


@pytest.mark.parametrize("log, seconds", [
    ("# building etcd v1\n$ go build\n\n# done in 93s\n", 93),
    ("# building etcd v1\n$ go build\n", None),  # a build that failed or was stopped
    ("# done in 10s\n# building again\n# done in 12s\n", 12),
])
def test_the_last_finished_build_is_read_from_the_tools_log(log, seconds):
    assert P.last_build_seconds(log) == seconds


@pytest.mark.parametrize("seconds, words", [(0, "0 s"), (59.6, "1 min 00 s"), (61, "1 min 01 s"), (3725, "1 h 02 min")])
def test_durations_in_words(seconds, words):
    assert P.duration(seconds) == words


def test_lines_count_down_from_measured_builds_else_typical_ones():
    measured = {"kubernetes": 600}  # this machine built it before: 10 min
    assert P.starting(0, TOOLS, measured, 0) == \
        "[1/3] building kubernetes v1 (about 10 min 00 s); 0 s so far, about 14 min 20 s left"
    assert P.finished(0, TOOLS, measured, 620, 621) == \
        "[1/3] kubernetes v1 built in 10 min 20 s; 10 min 21 s so far, about 4 min 20 s left"
    assert P.starting(2, TOOLS, measured, 700) == "[3/3] building kwok v1 (about 2 min 50 s); 11 min 40 s so far, about 2 min 50 s left"
    assert P.finished(2, TOOLS, measured, 160, 860) == "[3/3] kwok v1 built in 2 min 40 s; 14 min 20 s so far"


def test_every_pinned_tool_states_a_typical_build_time():
    from trainyard.toolchain.versions import _pins

    assert all("typical_build_s" in spec for spec in _pins()["tools"].values())
