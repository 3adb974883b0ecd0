"""Kubernetes API groups, well-known labels and quantities are spelled once, in `trainyard.k8s`."""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from pathlib import Path

import pytest

from trainyard import k8s
from trainyard.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("src", "controller", "runtimes", "queues", "platform", "bench")
SPELLED_ONCE = (k8s.TRAINER_GROUP, k8s.JOBSET_GROUP, k8s.VOLCANO_GROUP, k8s.COSCHEDULING_GROUP, f"{k8s.TRAINYARD_DOMAIN}/")
"""Not to appear in any string literal elsewhere (a documentation link, https://..., is not an API name)."""


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for stmt in body:  # module, class and function docstrings and attribute docstrings
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    ids.add(id(stmt.value))
    return ids


def literal_spellings() -> list[str]:
    found = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "src" / "trainyard" / "k8s.py":
                continue
            tree = ast.parse(path.read_text())
            skip = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                    text = node.value
                    spelled = any(name in re.sub(r"https://\S+", "", text) for name in SPELLED_ONCE)
                    if spelled or text in (k8s.GPU_RESOURCE, k8s.PART_OF_LABEL):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return found


def test_api_groups_and_labels_are_spelled_only_in_trainyard_k8s():
    assert literal_spellings() == []


@pytest.mark.parametrize("text, amount", [
    ("500m", Fraction(1, 2)), ("16Gi", 16 * 2**30), (2, 2), ("1e3", 1000), ("1E", 10**18), ("1E3", 1000),
    ("12E-2", Fraction(12, 100)), ("2.5k", 2500), (".5", Fraction(1, 2)), ("-2Mi", -2 * 2**20), ("3u", Fraction(3, 10**6)),
    ("1.", 1), (0.25, Fraction(1, 4)),
    # exact beyond the default decimal context's 28 digits
    ("1234567890123456789012345678901234.5n", Fraction(12345678901234567890123456789012345, 10**10))])
def test_quantities(text, amount):
    assert k8s.parse_quantity(text) == amount
    assert k8s.quantity_or_none(text) == amount


def test_bad_quantity_names_the_field_and_the_fix():
    with pytest.raises(InputError, match=r"^spec.x: invalid quantity '1K'.*use a number or a string"):
        k8s.parse_quantity("1K", "spec.x")
    assert k8s.quantity_or_none("NaN") is None


@pytest.mark.parametrize("text", ["1e1.5", "1e99", "1e-99", "1e999999999"])
def test_quantities_out_of_range_or_with_a_fractional_exponent_are_refused(text):
    with pytest.raises(InputError, match=r"^spec.x: invalid quantity .*out of range"):
        k8s.parse_quantity(text, "spec.x")


def test_replicated_job_access_reads_through_bad_levels():
    job = {"name": "node", "template": {"metadata": {"labels": {k8s.LABEL_ANCESTOR: "trainer"}},
                                        "spec": {"template": {"spec": {"containers": [{"name": "node"}, "x"],
                                                                       "initContainers": [{"name": "init"}]}}}}}
    runtime = {"spec": {"template": {"spec": {"replicatedJobs": [job, "not-a-job"]}}}}
    assert k8s.runtime_jobs(runtime) == [job] == k8s.jobset_jobs(runtime["spec"]["template"]["spec"])
    assert k8s.ancestor_of(job) == "trainer"
    assert [c["name"] for c in k8s.job_containers(job)] == ["node"]
    assert [c["name"] for c in k8s.job_containers(job, init=True)] == ["init"]
    assert k8s.runtime_jobs({"spec": {"template": "oops"}}) == [] and k8s.job_pod_spec({"template": 3}) == {}
