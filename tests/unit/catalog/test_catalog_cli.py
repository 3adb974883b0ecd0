"""The ``trainyard catalog`` command lines (a contract): output, exit codes, and nothing written on error."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from catalog_builders import snapshot
from trainyard.cli.main import app

runner = CliRunner()


def run(catalog_dir: Path, *args: str):
    return runner.invoke(app, ["catalog", "--catalog-dir", str(catalog_dir), "--stacks-dir", str(catalog_dir.parent / "stacks"), *args])


def test_list_as_table_and_json(catalog_dir):
    table = run(catalog_dir, "list")
    assert table.exit_code == 0, table.output
    assert "1.2.0" in table.output and "deprecated" in table.output and "torch-distributed-topology" in table.output
    rows = json.loads(run(catalog_dir, "list", "--json").stdout)
    assert [(r["version"], r["status"], r["locked"]) for r in rows] == [("1.2.0", "current", True), ("1.1.0", "supported", True), ("1.0.0", "deprecated", True)]
    assert "torch-distributed-topology" in rows[1]["runtimes"] and "torch-distributed-topology" not in rows[2]["runtimes"]


def test_catalog_dir_from_environment(catalog_dir, monkeypatch):
    monkeypatch.setenv("TRAINYARD_CATALOG_DIR", str(catalog_dir))
    (catalog_dir / "catalog.yaml").write_text((catalog_dir / "catalog.yaml").read_text().replace("First catalog release", "Env release"))
    assert "Env release" in runner.invoke(app, ["catalog", "list", "--json"]).stdout


@pytest.mark.parametrize(
    "args, want_kind, want_count, want_support, want_namespace",
    [
        (["show", "1.1.0"], "ClusterTrainingRuntime", 14, None, None),
        (["show", "1.0.0", "jax-distributed"], "ClusterTrainingRuntime", 1, "deprecated", None),
        (["show", "1.1.0", "torch-distributed", "--tenant-queue", "q-a", "--priority-class", "p-a", "--namespace", "team-a"], "TrainingRuntime", 1, None, "team-a"),
    ],
    ids=["current release", "deprecated runtime", "tenant runtime"],
)
def test_show_prints_a_yaml_stream(catalog_dir, args, want_kind, want_count, want_support, want_namespace):
    result = run(catalog_dir, *args)
    assert result.exit_code == 0, result.output
    objects = list(yaml.safe_load_all(result.stdout))
    assert len(objects) == want_count and {o["kind"] for o in objects} == {want_kind}
    assert objects[0]["metadata"]["labels"].get("trainer.kubeflow.org/support") == want_support
    assert objects[0]["metadata"].get("namespace") == want_namespace
    if want_namespace:
        assert objects[0]["spec"]["template"]["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "q-a"
        assert objects[0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["priorityClassName"] == "p-a"


@pytest.mark.parametrize(
    "args, want",
    [
        (["show", "9.9.9"], "no release 9.9.9"),
        (["show", "1.0.0", "torch-distributed-topology"], "has no runtime 'torch-distributed-topology'"),
        (["show", "1.1.0", "--tenant-queue", "q"], "needs both --tenant-queue and --namespace"),
        (["diff", "1.0.0", "7.0.0"], "no release 7.0.0"),
    ],
    ids=["unknown release", "unknown runtime", "tenant without namespace", "diff unknown"],
)
def test_bad_arguments_exit_non_zero_with_a_fix(catalog_dir, args, want):
    result = run(catalog_dir, *args)
    assert result.exit_code == 1 and want in result.stderr and "fix:" in result.stderr


def test_diff_between_releases(catalog_dir):
    result = run(catalog_dir, "diff", "1.0.0", "1.1.0")
    assert result.exit_code == 0, result.output
    assert "  + torch-distributed-topology (added)" in result.stdout
    assert "  ~ deepspeed-distributed (changed)" in result.stdout
    assert "-                  image: ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.2.0" in result.stdout


def test_lint_passes_on_the_shipped_catalog_and_fails_on_an_edited_release(catalog_dir):
    ok = run(catalog_dir, "lint")
    assert ok.exit_code == 0, ok.output
    assert "39 runtimes in 3 releases ok" in ok.stdout and "team-b pins deprecated release 1.0.0" in ok.stderr
    template = catalog_dir / "releases/1.0.0/jax-distributed.yaml.j2"
    template.write_text(template.read_text().replace("numNodes: 1", "numNodes: 2"))
    bad = run(catalog_dir, "lint")
    assert bad.exit_code == 1
    assert "releases/1.0.0/jax-distributed.yaml.j2: file of a released version was edited" in bad.stderr
    assert "trainyard catalog new <next> --from 1.2.0" in bad.stderr


def test_lint_and_release_fail_loudly_without_the_controller(catalog_dir, monkeypatch):
    assert run(catalog_dir, "new", "1.3.0", "--from", "1.2.0").exit_code == 0
    monkeypatch.setitem(sys.modules, "trainyard.controller.admission", None)  # makes the import raise ImportError
    before = snapshot(catalog_dir)
    for args in (["lint"], ["release", "1.3.0", "--changelog", "x"]):
        result = run(catalog_dir, *args)
        assert result.exit_code == 1, result.output
        assert "catalog lint needs trainyard.controller" in result.stderr and "fix:" in result.stderr
        assert "skipped" not in result.output
    assert snapshot(catalog_dir) == before


def test_new_then_release_moves_current(catalog_dir):
    before = (catalog_dir / "catalog.yaml").read_text()
    started = run(catalog_dir, "new", "1.3.0", "--from", "1.2.0")
    assert started.exit_code == 0, started.output
    assert (catalog_dir / "releases/1.3.0/torch-distributed.yaml.j2").is_file()
    after = (catalog_dir / "catalog.yaml").read_text()
    assert before in after.replace("- version: 1.3.0\n  status: draft\n  changelog: 'TODO: say what changed and why'\n", "")
    values = catalog_dir / "releases/1.3.0/values.yaml"
    values.write_text(values.read_text().replace("jax:25.10-py3", "jax:26.01-py3"))
    drafts = {r["version"]: r["status"] for r in json.loads(run(catalog_dir, "list", "--json").stdout)}
    assert drafts["1.3.0"] == "draft"
    released = run(catalog_dir, "release", "1.3.0", "--changelog", "JAX 26.01.")
    assert released.exit_code == 0, released.output
    statuses = {r["version"]: r["status"] for r in json.loads(run(catalog_dir, "list", "--json").stdout)}
    assert statuses == {"1.3.0": "current", "1.2.0": "supported", "1.1.0": "supported", "1.0.0": "deprecated"}
    lock = json.loads((catalog_dir / "catalog.lock.json").read_text())
    assert set(lock["releases"]) == {"1.0.0", "1.1.0", "1.2.0", "1.3.0"}
    diff = run(catalog_dir, "diff", "1.2.0", "1.3.0").stdout
    assert "  ~ jax-distributed (changed)" in diff and diff.count("(changed)") == 1
    assert run(catalog_dir, "lint").exit_code == 0


def test_new_retargets_the_version_headers_of_the_copied_release(catalog_dir):
    values = catalog_dir / "releases/1.2.0/values.yaml"
    assert values.read_text().startswith("# Parameters of catalog release ")
    template = catalog_dir / "releases/1.2.0/jax-distributed.yaml.j2"
    template.write_text("# jax runtime of release 1.2.0 (upstream v2.3.0)\n" + template.read_text())
    assert run(catalog_dir, "new", "1.3.0", "--from", "1.2.0").exit_code == 0
    copied = sorted((catalog_dir / "releases/1.3.0").iterdir())
    comments = [line for path in copied for line in path.read_text().splitlines() if line.lstrip().startswith(("#", "{#"))]
    named = [line for line in comments if re.search(r"release \d+\.\d+\.\d+", line)]
    assert named and all("release 1.3.0" in line for line in named), named
    assert (catalog_dir / "releases/1.3.0/values.yaml").read_text().startswith("# Parameters of catalog release 1.3.0 (")
    assert "# jax runtime of release 1.3.0 (upstream v2.3.0)" in (catalog_dir / "releases/1.3.0/jax-distributed.yaml.j2").read_text()


def _edit_draft_template(root: Path) -> None:
    path = root / "releases/1.3.0/jax-distributed.yaml.j2"
    path.write_text(path.read_text().replace("images.jax", "images.jaxx"))


@pytest.mark.parametrize(
    "prepare, args, want",
    [
        (None, ["new", "1.1.0", "--from", "1.0.0"], "release 1.1.0 already exists"),
        (None, ["new", "1.3.0", "--from", "0.1.0"], "no release 0.1.0"),
        (None, ["new", "1.0.1", "--from", "1.0.0"], "not newer than 1.2.0"),
        (None, ["release", "1.0.0"], "released versions are immutable"),
        ("draft", ["release", "1.3.0", "--changelog", "x"], "releases/1.3.0/jax-distributed.yaml.j2, runtime jax-distributed: unknown placeholder on line "),
        ("draft-no-changelog", ["release", "1.3.0"], "has no changelog"),
        (None, ["retire", "1.0.0"], "tenant team-b (namespace team-b) in stack local still pins 1.0.0"),
        (None, ["retire", "1.1.0"], "only a deprecated release can be retired"),
        (None, ["deprecate", "1.2.0"], "is current"),
    ],
    ids=["new existing", "new unknown source", "new older", "release released", "release bad draft", "release without changelog", "retire pinned", "retire current", "deprecate current"],
)
def test_bad_lifecycle_commands_change_nothing(catalog_dir, prepare, args, want):
    if prepare:
        assert run(catalog_dir, "new", "1.3.0", "--from", "1.2.0").exit_code == 0
        if prepare == "draft":
            _edit_draft_template(catalog_dir)
    before = snapshot(catalog_dir)
    result = run(catalog_dir, *args)
    assert result.exit_code == 1, result.output
    assert want in result.stderr and "fix:" in result.stderr
    assert snapshot(catalog_dir) == before


def test_retire_after_tenants_moved_and_deprecate_a_runtime(catalog_dir):
    for stack in (catalog_dir.parent / "stacks").glob("Pulumi.*.yaml"):
        stack.write_text(stack.read_text().replace("catalogVersion: 1.0.0", "catalogVersion: 1.1.0"))
    assert run(catalog_dir, "retire", "1.0.0").exit_code == 0
    assert run(catalog_dir, "deprecate", "1.1.0", "torch-distributed-cpu").exit_code == 0
    shown = yaml.safe_load(run(catalog_dir, "show", "1.1.0", "torch-distributed-cpu").stdout)
    assert shown["metadata"]["labels"]["trainer.kubeflow.org/support"] == "deprecated"
    statuses = {r["version"]: r["status"] for r in json.loads(run(catalog_dir, "list", "--json").stdout)}
    assert statuses["1.0.0"] == "retired"
    result = run(catalog_dir, "lint")
    assert result.exit_code == 0, result.output
    assert "28 runtimes in 2 releases ok" in result.stdout


def test_retire_without_stacks_is_refused(catalog_dir, tmp_path):
    result = runner.invoke(app, ["catalog", "--catalog-dir", str(catalog_dir), "--stacks-dir", str(tmp_path / "none"), "retire", "1.0.0"])
    assert result.exit_code == 1 and "stacks directory not found" in result.stderr
