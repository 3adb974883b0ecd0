"""`trainyard validate` / `render` are strict like `kubectl --validate=strict` (issue 14.2): one test per case."""

import json
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from trainyard.cli.main import app
from trainyard.controller.errors import InputError
from trainyard.k8s import parse_quantity

from ctl_builders import job, runtime, trainjob

runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()


def write(tmp_path: Path, name: str, *docs) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs)))
    return str(path)


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def check(tmp_path, tj, rt, *extra, command="validate"):
    return run(command, write(tmp_path, "tj.yaml", tj), "--runtime", write(tmp_path, "rt.yaml", rt), *extra)


def gpu_job(requests=None, limits=None):
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return job("node", "trainer", containers=[{"name": "node", "image": "img", "resources": resources}])


# (id, TrainJob, runtime, error line on stderr)
REFUSED = [
    ("typo'd trainer field", trainjob(trainer={"numNode": 2}), runtime(ml={"torch": {}}),
     "Error: spec.trainer.numNode: Unknown field: not in the TrainJob schema (did you mean 'numNodes'?); "
     "the API server would drop it silently: fix the name or remove it"),
    ("typo'd pod group policy", trainjob(), runtime(ml={"torch": {}}, pod_group={"volcanoo": {}}),
     "Error: spec.podGroupPolicy.volcanoo: Unknown field: not in the ClusterTrainingRuntime schema "
     "(did you mean 'volcano'?)"),
    ("negative GPUs", trainjob(trainer={"resourcesPerNode": {"requests": {"nvidia.com/gpu": -2}}}), runtime(),
     "Error: spec.trainer.resourcesPerNode.requests.nvidia.com/gpu: Invalid value: -2: must be greater than or equal to 0"),
    ("memory in GB", trainjob(trainer={"resourcesPerNode": {"requests": {"memory": "8GB"}}}), runtime(),
     "Error: spec.trainer.resourcesPerNode.requests.memory: Invalid value: \"8GB\": invalid quantity '8GB': not in "
     "the Kubernetes quantity grammar (the API server refuses it)"),
    ("zero nodes", trainjob(trainer={"numNodes": 0}), runtime(),
     "Error: spec.trainer.numNodes: Invalid value: 0: must be at least 1 (a training job needs a node)"),
    ("zero nodes in the runtime", trainjob(), runtime(ml={"numNodes": 0, "torch": {}}),
     "Error: spec.mlPolicy.numNodes: Invalid value: 0: must be at least 1"),
    ("half a GPU", trainjob(trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": "0.5"}}}), runtime(),
     "Error: spec.trainer.resourcesPerNode.limits.nvidia.com/gpu: Invalid value: \"0.5\": must be an integer"),
    ("GPU request below its limit", trainjob(trainer={"resourcesPerNode": {"requests": {"nvidia.com/gpu": 4},
                                                                           "limits": {"nvidia.com/gpu": 8}}}), runtime(),
     "Error: spec.trainer.resourcesPerNode.requests.nvidia.com/gpu: Invalid value: 4: must be equal to nvidia.com/gpu limit of 8"),
    ("bad quantity inside the runtime's pod template", trainjob(),
     runtime(jobs=[gpu_job(requests={"cpu": "two"})]),
     "Error: spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.requests.cpu: "
     "Invalid value: \"two\": invalid quantity 'two'"),
    ("huge quantity", trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "1e999999999"}}}), runtime(),
     "Error: spec.trainer.resourcesPerNode.requests.cpu: Invalid value: \"1e999999999\": invalid quantity "
     "'1e999999999': out of range"),
]


@pytest.mark.parametrize("tj,rt,line", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_validate_refuses_on_stderr(tmp_path, tj, rt, line):
    result = check(tmp_path, tj, rt)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert any(err.startswith(line) for err in result.stderr.splitlines()), result.stderr


@pytest.mark.parametrize("tj,rt,line", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_render_refuses_the_same_and_prints_nothing(tmp_path, tj, rt, line):
    result = check(tmp_path, tj, rt, command="render")
    assert result.exit_code == 2 and result.stdout == ""
    assert any(err.startswith(line) for err in result.stderr.splitlines()), result.stderr


def test_lenient_turns_unknown_fields_into_warnings(tmp_path):
    result = check(tmp_path, trainjob(trainer={"numNode": 2}), runtime(ml={"torch": {}}), "--lenient")
    assert result.exit_code == 0 and result.stdout.strip() == "OK"
    assert result.stderr.startswith("Warning: spec.trainer.numNode: Unknown field")


def test_lenient_render_of_a_typod_volcano_policy_warns_that_the_podgroup_is_lost(tmp_path):
    result = check(tmp_path, trainjob(), runtime(ml={"torch": {}}, pod_group={"volcanoo": {}}), "--lenient",
                   command="render")
    assert result.exit_code == 0
    assert "PodGroup" not in [d["kind"] for d in yaml.safe_load_all(result.stdout)]
    assert "spec.podGroupPolicy.volcanoo" in result.stderr


def test_json_output_for_machines(tmp_path):
    bad = check(tmp_path, trainjob(trainer={"numNodes": 0}), runtime(), "-o", "json")
    doc = json.loads(bad.stdout)
    assert bad.exit_code == 1 and doc["ok"] is False
    assert doc["errors"][0]["field"] == "spec.trainer.numNodes" and doc["errors"][0]["type"] == "Invalid"
    good = json.loads(check(tmp_path, trainjob(), runtime(), "-o", "json").stdout)
    assert good == {"ok": True, "runtime": {"kind": "ClusterTrainingRuntime", "name": "rt", "namespace": None},
                    "errors": [], "warnings": []}


def test_json_output_of_bad_input_is_json_too(tmp_path):
    result = run("validate", write(tmp_path, "tj.yaml", trainjob(trainer={"numNodes": "x"})), "--runtime",
                 write(tmp_path, "rt.yaml", runtime()), "-o", "json")
    assert result.exit_code == 2 and json.loads(result.stdout)["ok"] is False


def test_render_json_prints_the_objects(tmp_path):
    result = check(tmp_path, trainjob(), runtime(ml={"torch": {}}), "-o", "json", command="render")
    assert result.exit_code == 0
    assert [o["kind"] for o in json.loads(result.stdout)] == ["ConfigMap", "JobSet"]


def test_runtime_file_may_hold_a_whole_release(tmp_path):
    release = run("catalog", "show", "1.2.0").stdout
    (tmp_path / "release.yaml").write_text(release)
    tj = trainjob(runtime_name="torch-distributed-gpu")
    result = run("validate", write(tmp_path, "tj.yaml", tj), "--runtime", tmp_path / "release.yaml", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["runtime"]["name"] == "torch-distributed-gpu"
    missing = run("validate", write(tmp_path, "tj.yaml", trainjob(runtime_name="nope")), "--runtime",
                  tmp_path / "release.yaml")
    assert missing.exit_code == 2
    assert "has no ClusterTrainingRuntime 'nope' (has: ClusterTrainingRuntime/deepspeed-distributed" in missing.stderr


def test_catalog_picks_the_runtime_named_by_runtime_ref(tmp_path):
    result = run("validate", write(tmp_path, "tj.yaml", trainjob(runtime_name="torch-distributed")),
                 "--catalog", "1.2.0", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["runtime"] == {"kind": "ClusterTrainingRuntime", "name": "torch-distributed",
                                                    "namespace": None}


@pytest.mark.parametrize("kind", ["ClusterTrainingRuntime", "TrainingRuntime"])
def test_an_unknown_tenant_is_refused_whatever_runtime_kind(tmp_path, kind):
    """Before: a ClusterTrainingRuntime job ignored --tenant nobody and printed OK."""
    result = run("validate", write(tmp_path, "tj.yaml", trainjob(runtime_name="torch-distributed", kind=kind)),
                 "--catalog", "1.2.0", "--tenant", "nobody")
    assert result.exit_code == 2 and "--tenant: no tenant 'nobody' in the stacks (known: " in result.stderr, result.stderr


def test_catalog_tenant_runtime_of_a_deprecated_release_warns_naming_the_release_to_move_to(tmp_path):
    tj = trainjob(runtime_name="torch-distributed", kind="TrainingRuntime")
    tj["metadata"]["namespace"] = "team-b"
    result = run("validate", write(tmp_path, "tj.yaml", tj), "--catalog", "1.0.0", "--tenant", "team-b")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines()[0] == (
        'Warning: TrainingRuntime "torch-distributed" comes from catalog release 1.0.0 and release 1.0.0 is '
        "deprecated; move the tenant to release 1.2.0 (its catalogVersion in the stack) before it is retired")


@pytest.mark.parametrize("args,message", [
    (["--catalog", "1.2.0"], "--tenant: runtimeRef names a TrainingRuntime, which lives in a tenant namespace; add --tenant T"),
    (["--catalog", "1.2.0", "--tenant", "nobody"], "--tenant: no tenant 'nobody' in the stacks (known: "),
    (["--catalog", "9.9.9", "--tenant", "team-a"], "no release 9.9.9 in the catalog"),
    (["--tenant", "team-a"], "pass --runtime FILE or --catalog VERSION"),
    (["--catalog", "1.2.0", "--runtime", "x.yaml"], "pass --runtime FILE or --catalog VERSION (one of them)"),
    (["--catalog", "1.2.0", "--tenant", "team-a", "-o", "yaml"], "--output 'yaml': use text or json"),
])
def test_catalog_selection_errors_are_bad_input(tmp_path, args, message):
    tj = trainjob(runtime_name="torch-distributed", kind="TrainingRuntime")
    result = run("validate", write(tmp_path, "tj.yaml", tj), *args)
    assert result.exit_code == 2 and message in result.stderr, result.stderr


@pytest.mark.parametrize("text,value", [
    ("500m", Fraction(1, 2)), ("16Gi", 16 * 2**30), (2, 2), ("1e3", 1000), (0.5, Fraction(1, 2)), ("-2", -2),
    ("+1.5", Fraction(3, 2)), (".5", Fraction(1, 2)), ("1E", 10**18), ("8G", 8 * 10**9), ("1Ki", 1024),
])
def test_quantities_parse_as_the_api_server_does(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["8GB", "1K", "1ki", "NaN", " 2", "1_000", "", "1e", "Infinity", True, None, [1],
                                  float("nan"), "1e999999999", 10**40])
def test_quantities_the_api_server_refuses_are_refused(text):
    with pytest.raises(InputError):
        parse_quantity(text, "f")
