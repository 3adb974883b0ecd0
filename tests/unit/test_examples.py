"""Every TrainJob in examples/ passes strict validation against the release its tenant pins, and every
runtime family of the current catalog release has an example (the platform test applies them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from trainyard.cli.main import app
from trainyard.paths import repo_root

EXAMPLES = sorted((repo_root() / "examples").glob("*.yaml"))
LOCAL_TENANTS = {t["namespace"]: t for t in yaml.safe_load((repo_root() / "stacks" / "Pulumi.local.yaml").read_text())
                 ["config"]["trainyard:tenants"]}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_validates_strictly_against_its_tenants_release(example: Path):
    namespace = yaml.safe_load(example.read_text())["metadata"]["namespace"]
    release = LOCAL_TENANTS[namespace]["catalogVersion"]  # the release the local platform gives this tenant
    result = CliRunner().invoke(app, ["validate", str(example), "--catalog", release, "--tenant", namespace])
    assert result.exit_code == 0, result.output
    assert result.output.strip().endswith("OK")


def test_every_runtime_family_of_the_catalog_has_an_example():
    from trainyard.runtimes import load_catalog, render_cluster_runtimes

    runtimes = {r["metadata"]["name"]: r["metadata"]["labels"].get("trainer.kubeflow.org/framework")
                for r in render_cluster_runtimes(load_catalog())}
    used = {yaml.safe_load(p.read_text())["spec"]["runtimeRef"]["name"] for p in EXAMPLES}
    families = {runtimes[name] for name in used}
    assert {"torch", "deepspeed", "mpi", "jax", "xgboost", "torchtune"} <= families, families
    assert all(p.read_text().count("kubectl create -f examples/") == 1 for p in EXAMPLES), "each says how to apply it"
