"""The profile summary the benches publish: self and total shares from py-spy's collapsed stacks."""

import pytest

from trainyard.profiles import NO_PYTHON_FRAME, format_entries, parse_collapsed, top_as_json, top_entries

STACKS = """\
main (run.py);loop (run.py);decode (json/decoder.py) 6
main (run.py);loop (run.py);build (build.py);dump (yaml.py) 3
main (run.py);loop (run.py) 1
"""


def test_self_share_is_the_top_frame_and_total_share_any_frame():
    entries = {e.function: e for e in top_entries(parse_collapsed(STACKS), by="self")}
    assert entries["decode (json/decoder.py)"].self_share == pytest.approx(0.6)
    assert entries["dump (yaml.py)"].self_share == pytest.approx(0.3)
    assert entries["loop (run.py)"].self_share == pytest.approx(0.1)
    assert entries["loop (run.py)"].total_share == pytest.approx(1.0)
    assert entries["dump (yaml.py)"].total_share == pytest.approx(0.3)


def test_ranked_by_total_puts_callers_first_and_limit_cuts():
    ranked = top_entries(parse_collapsed(STACKS), limit=3, by="total")
    assert [e.function for e in ranked][:2] in (["main (run.py)", "loop (run.py)"], ["loop (run.py)", "main (run.py)"])
    assert ranked[2].function == "decode (json/decoder.py)"
    assert len(ranked) == 3


def test_recursion_counts_once_per_sample():
    entries = top_entries(parse_collapsed("walk (a.py);walk (a.py);walk (a.py) 4\n"), by="total")
    assert entries[0].total_share == pytest.approx(1.0) and entries[0].self_share == pytest.approx(1.0)


@pytest.mark.parametrize("line", ["no count here", "frames x12", "7x"])
def test_a_line_that_is_not_a_collapsed_stack_is_refused(line):
    with pytest.raises(ValueError, match="collapsed stack"):
        parse_collapsed(line)


def test_a_sample_outside_python_frames_is_counted_apart():
    entries = top_entries(parse_collapsed("f (a.py) 3\n  1\n"))
    assert [(e.function, e.self_share) for e in entries] == [("f (a.py)", 0.75), (NO_PYTHON_FRAME, 0.25)]


def test_empty_profile_has_no_entries_and_by_is_checked():
    assert top_entries(parse_collapsed("")) == []
    with pytest.raises(ValueError, match="by must be"):
        top_entries(parse_collapsed(STACKS), by="wall")


def test_table_prints_percentages():
    text = format_entries(top_entries(parse_collapsed(STACKS), limit=1))
    assert "60.0" in text and "decode (json/decoder.py)" in text


def test_top_as_json_is_both_lists_rounded():
    stacks = parse_collapsed("main;work 3\nmain;idle 1\n")
    found = top_as_json(stacks, 1)
    assert found == {"by_self": [{"function": "work", "self": 0.75, "total": 0.75}],
                     "by_total": [{"function": "main", "self": 0.0, "total": 1.0}]}
