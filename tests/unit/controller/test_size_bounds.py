"""Upper bounds on numNodes and numProcPerNode: refused with the bound in the message, before anything is built
per node or per process (an unbounded count used to exhaust memory in `trainyard validate`)."""

import resource
import subprocess
import sys
import textwrap

import pytest

from trainyard.controller.admission import validate_runtime, validate_trainjob
from trainyard.controller.api import MAX_NUM_NODES, MAX_PROCS_PER_NODE

from ctl_builders import runtime, trainjob


def messages(result):
    return [str(e) for e in result.errors]


@pytest.mark.parametrize("trainer,ml,expected", [
    ({"numNodes": 3_000_000}, {"torch": {}}, f"spec.trainer.numNodes in body should be less than or equal to {MAX_NUM_NODES}"),
    ({"numNodes": 2_147_483_647}, {"mpi": {}}, f"less than or equal to {MAX_NUM_NODES}"),
    ({"numProcPerNode": 2_147_483_648}, {"torch": {}}, f"numProcPerNode must be at most {MAX_PROCS_PER_NODE}"),
    ({"numProcPerNode": MAX_PROCS_PER_NODE + 1}, {"torch": {}}, f"numProcPerNode must be at most {MAX_PROCS_PER_NODE}"),
])
def test_trainjob_counts_above_the_bounds_are_refused(trainer, ml, expected):
    result = validate_trainjob(trainjob(trainer=trainer), runtime(ml=ml))
    assert not result.allowed and any(expected in m for m in messages(result)), messages(result)


@pytest.mark.parametrize("trainer", [{"numNodes": MAX_NUM_NODES}, {"numProcPerNode": MAX_PROCS_PER_NODE}])
def test_counts_at_the_bounds_are_admitted(trainer):
    assert validate_trainjob(trainjob(trainer=trainer), runtime(ml={"torch": {}})).allowed


@pytest.mark.parametrize("ml,expected", [
    ({"numNodes": MAX_NUM_NODES + 1, "torch": {}}, f"less than or equal to {MAX_NUM_NODES}"),
    ({"mpi": {"numProcPerNode": MAX_PROCS_PER_NODE + 1}}, f"less than or equal to {MAX_PROCS_PER_NODE}"),
    ({"flux": {"numProcPerNode": 2_147_483_647}}, f"less than or equal to {MAX_PROCS_PER_NODE}"),
    ({"torch": {"elasticPolicy": {"minNodes": 1, "maxNodes": 10**9}}}, f"less than or equal to {MAX_NUM_NODES}"),
])
def test_runtime_counts_above_the_bounds_are_refused(ml, expected):
    result = validate_runtime(runtime(ml=ml))
    assert not result.allowed and any(expected in m for m in messages(result)), messages(result)


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.parametrize("field", ["numNodes", "numProcPerNode"])
def test_validate_refuses_a_huge_count_within_bounded_memory(tmp_path, field):
    """The CLI reports the bound and exits 1 under a 1 GiB address-space limit (before: MemoryError traceback)."""
    path = tmp_path / "tj.yaml"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainJob
        metadata: {{name: huge, namespace: team-a}}
        spec:
          runtimeRef: {{name: torch-distributed-volcano}}
          trainer: {{{field}: 2147483647}}
        """))
    run = subprocess.run([sys.executable, "-m", "trainyard.cli", "validate", str(path), "--catalog", "1.2.0",
                          "--tenant", "team-a"], capture_output=True, text=True, timeout=120, preexec_fn=_limit_memory)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and "MemoryError" not in run.stderr
    assert f"spec.trainer.{field}" in run.stderr
