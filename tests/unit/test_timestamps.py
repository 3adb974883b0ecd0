"""Durations as people read them: one spelling in events and verdicts, one in table columns."""

import pytest

from trainyard.timestamps import duration_short, duration_words, format_time, parse_time


@pytest.mark.parametrize("seconds, words", [(0, "0 s"), (44, "40 s"), (89, "90 s"), (90, "2 min"), (720, "12 min"),
                                            (700, "12 min"), (5400, "1.5 h"), (200000, "2.3 days")])
def test_duration_words(seconds, words):
    assert duration_words(seconds) == words


@pytest.mark.parametrize("seconds, short", [(None, "-"), (45, "45s"), (119, "119s"), (120, "2.0m"), (7199, "120.0m"),
                                            (7200, "2.0h")])
def test_duration_short(seconds, short):
    assert duration_short(seconds) == short


def test_time_round_trip():
    assert format_time(parse_time("2026-11-25T08:45:00+01:00")) == "2026-11-25T07:45:00Z"
