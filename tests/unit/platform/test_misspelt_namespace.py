"""A stack key in a namespace a typo away from `trainyard:` is named (Pulumi would read it as another provider's
config and the stack would silently lose the setting); other providers' keys are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainyard.platform.stack_source import parse_stack_source
from trainyard.platform.stack_validation import check_stack_file


@pytest.mark.parametrize("key, named", [
    ("trainyrd:scheduler", True), ("trianyard:scheduler", True), ("Trainyard:scheduler", True),
    ("trainyard-:scheduler", True), ("trainyard:scheduler", False), ("kubernetes:context", False),
    ("pulumi:tags", False), ("train:scheduler", False), ("no-namespace", False),
])
def test_a_namespace_within_two_edits_of_trainyard_is_named_with_the_rename(key, named):
    source = parse_stack_source(f"config:\n  trainyard:kubeContext: x\n  {key}: {{profile: gang}}\n", "s.yaml")
    found = [str(p) for p in source.misspelt]
    assert bool(found) is named
    if named:
        assert found[0].startswith(f"s.yaml:3: warning: {key}:")
        assert f"rename the key to trainyard:{key.partition(':')[2]}" in found[0]


def test_platform_validate_reports_it(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    shipped = (Path(__file__).parents[3] / "stacks" / "Pulumi.local.yaml").read_text()
    path.write_text(shipped.replace("trainyard:scheduler:", "trainyrd:scheduler:"))
    problems = [str(p) for p in check_stack_file(path, "Pulumi.x.yaml")]
    assert any("trainyrd:scheduler" in p and "warning" in p for p in problems), problems
