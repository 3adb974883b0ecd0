"""One exception root and one problem record for every check in trainyard."""

from __future__ import annotations

import dataclasses

import pytest

from trainyard.controller.errors import BuildError, ControllerError, InputError, PreflightError, ValidationError
from trainyard.controller.runtime.status_server import InvalidPayload
from trainyard.errors import TrainyardError
from trainyard.platform.problems import StackConfigError
from trainyard.problems import ConfigProblem, FieldError, Finding, Problem, WARNING, errors_of, warnings_of
from trainyard.runtimes.model import CatalogError
from trainyard.stack_deploy import StackError
from trainyard.cluster.local import ClusterError
from trainyard.toolchain.build import ToolBuildError


@pytest.mark.parametrize("cls", [ControllerError, BuildError, ValidationError, InputError, PreflightError,
                                 StackConfigError, CatalogError, StackError, ClusterError, ToolBuildError, InvalidPayload])
def test_every_error_derives_from_the_root(cls):
    assert issubclass(cls, TrainyardError)


def test_value_and_runtime_error_compatibility_kept():
    assert issubclass(StackConfigError, ValueError) and issubclass(InvalidPayload, ValueError)
    assert issubclass(StackError, RuntimeError) and issubclass(ClusterError, RuntimeError)


def test_one_record_three_renderings():
    api = FieldError("spec.numNodes", "Invalid", "must be at least 1", 0)
    config = ConfigProblem("Pulumi.dev.yaml", "trainyard:tenants[0].name", "bad", "rename it", line=3)
    finding = Finding("unpinned image", file="releases/1.0.0/x.yaml.j2", runtime="x", fix="pin it")
    assert all(isinstance(p, Problem) for p in (api, config, finding))
    assert str(api) == "spec.numNodes: Invalid value: 0: must be at least 1"
    assert str(FieldError("spec.x", "Required", "")) == "spec.x: Required value: "
    assert str(FieldError("spec.x", "Forbidden", "no")) == "spec.x: Forbidden: no"
    assert str(config) == "Pulumi.dev.yaml:3: trainyard:tenants[0].name: bad\n  fix: rename it"
    assert str(finding) == "releases/1.0.0/x.yaml.j2, runtime x: unpinned image\n  fix: pin it"
    assert str(Finding("gone", release="1.0.0")) == "release 1.0.0: gone"


def test_records_replace_and_split_by_severity():
    problem = ConfigProblem("f.yaml", "a", "m", "x", severity=WARNING)
    moved = dataclasses.replace(problem, line=7)
    assert moved.line == 7 and isinstance(moved, ConfigProblem) and moved.severity == WARNING
    assert warnings_of([problem, Finding("e")]) == [problem]
    assert errors_of([problem, Finding("e")]) == [Finding("e")]


def test_problem_errors_carry_their_records():
    finding = Finding("bad", fix="fix it")
    err = CatalogError(finding)
    assert err.problems == err.findings == (finding,) and str(err) == str(finding)
    stack = StackConfigError([ConfigProblem("f.yaml", "a", "m", "x")])
    assert str(stack).startswith("1 problem in the stack configuration:\nf.yaml: a: m")
