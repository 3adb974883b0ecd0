"""Hostile files through the real CLI, the classes of issue 18.5 fixed so far (bench/bad_files.py prints every
class, the open ones included): each is refused with a message, within 1 GiB and the time limit, no traceback."""

import pytest

from bench_modules import load_bench

FIXED = ("alias bomb", "non-UTF-8 byte", "duplicate key", "huge count", "unknown tenant", "stack rules", "metadata",
         "pod spec typo")
BAD_FILES = load_bench("bad_files")


@pytest.mark.parametrize("case", [c for c in BAD_FILES.cases() if c.klass in FIXED], ids=lambda c: f"{c.klass}: {c.name}")
def test_hostile_file_is_refused_clearly(case):
    outcome, output = BAD_FILES.run_case(case)
    assert outcome == "refused clearly", output
    assert "error" in output.lower() and not any(bad in output for bad in ("NoneType", "KeyError", "TypeError")), output


def test_every_class_of_the_issue_is_generated():
    assert {c.klass for c in BAD_FILES.cases()} >= set(FIXED) | {"pod spec typo", "metadata"}
