"""Bad input at scale, fast slice (issue 10.4): generated TrainJob/runtime pairs through admission, the
strict checks and the build, generated stack configs through stack validation; no unexpected exception,
every refusal a clear message. `bench/bad_input.py` runs the full counts (10,000 pairs, 2,000 stacks).
"""

import pytest

from bench_modules import load_bench


@pytest.fixture(scope="module")
def bad_input():
    return load_bench("bad_input")


def test_generated_trainjob_runtime_pairs_never_crash_and_refuse_clearly(bad_input):
    tally = bad_input.run_pairs(300)
    assert tally.generated == 300
    assert not tally.unexpected and not tally.unclear, "\n".join(tally.samples)
    assert tally.admitted and tally.refused and tally.built and tally.build_refused  # both outcomes exercised


def test_generated_stack_configs_never_crash_and_name_field_and_fix(bad_input):
    tally = bad_input.run_stacks(300)
    assert tally.generated == 300
    assert not tally.unexpected and not tally.unclear, "\n".join(tally.samples)
    assert tally.admitted and tally.refused


@pytest.mark.parametrize("message,why", [
    ("spec.trainer.numNodes: Invalid value: 0: must be at least 1", None),
    ("", "empty message"),
    ("the runtime template is malformed (AttributeError: 'NoneType' object has no attribute 'get')",
     "Python internals in the message (object has no attribute)"),
    ("the runtime template is malformed (KeyError: 'spec')", "Python internals in the message (KeyError)"),
    ("trainyard:tenants[team-b].quota.cpu: 'KeyError' is not a Kubernetes quantity", None),  # the user's value
])
def test_what_counts_as_a_clear_message(bad_input, message, why):
    assert bad_input.unclear(message) == why
