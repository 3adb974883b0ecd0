"""`trainyard render` / `trainyard validate` through Typer's CliRunner."""

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from trainyard.cli.main import app

from builders import tenant_namespace
from ctl_builders import runtime, trainjob

runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()


def write(tmp_path: Path, name: str, *docs) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs)) if docs and not isinstance(docs[0], str) else (docs[0] if docs else ""))
    return str(path)


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_render_prints_every_object_deterministically(tmp_path):
    tj = write(tmp_path, "tj.yaml", trainjob(trainer={"numNodes": 2}))
    rt = write(tmp_path, "rt.yaml", runtime(ml={"torch": {}}, pod_group={"coscheduling": {}}))
    first, second = run("render", tj, "--runtime", rt), run("render", tj, "--runtime", rt)
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    assert [d["kind"] for d in yaml.safe_load_all(first.stdout)] == ["ConfigMap", "PodGroup", "JobSet"]


def test_render_with_cluster_snapshot_and_running_jobset(tmp_path):
    tj_doc, rt_doc = trainjob(), runtime()
    tj, rt = write(tmp_path, "tj.yaml", tj_doc), write(tmp_path, "rt.yaml", rt_doc)
    objects = list(yaml.safe_load_all(run("render", tj, "--runtime", rt).stdout))
    cluster = write(tmp_path, "cluster.yaml", *objects)  # snapshot + running JobSet already applied
    assert run("render", tj, "--runtime", rt, "--cluster", cluster).stdout.strip() in ("", "[]")


def test_render_status(tmp_path):
    tj = write(tmp_path, "tj.yaml", trainjob())
    rt = write(tmp_path, "rt.yaml", runtime())
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "tj", "namespace": "ns"},
          "status": {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "done",
                                     "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}
    result = run("render", tj, "--runtime", rt, "--cluster", write(tmp_path, "c.yaml", js), "--status", "--now", "2025-01-01T01:00:00Z")
    assert result.exit_code == 0, result.output
    (doc,) = yaml.safe_load_all(result.stdout)
    assert doc["kind"] == "TrainJob" and doc["status"]["conditions"][0]["type"] == "Complete"


def test_validate_prints_warnings_and_errors(tmp_path):
    rt = runtime(ml={"torch": {}}, labels={"trainer.kubeflow.org/support": "deprecated"})
    result = run("validate", write(tmp_path, "tj.yaml", trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "1"}]})),
                 "--runtime", write(tmp_path, "rt.yaml", rt))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()  # messages on stderr (issue 14.2), stdout stays for results
    assert lines[0].startswith('Warning: ClusterTrainingRuntime "rt" is deprecated')
    assert lines[1].startswith('Warning: Referenced ClusterTrainingRuntime "rt" is deprecated')
    assert lines[2] == "Error: spec.trainer.env: Invalid value: [...]: must not have reserved envs, invalid envs configured: [PET_NNODES]"


def test_validate_ok(tmp_path):
    result = run("validate", write(tmp_path, "tj.yaml", trainjob()), "--runtime", write(tmp_path, "rt.yaml", runtime()))
    assert result.exit_code == 0 and result.stdout.strip() == "OK"


@pytest.mark.parametrize("command", ["render", "validate"])
@pytest.mark.parametrize("tj_text,message", [
    ("kind: TrainJob\nspec: [unclosed", "tj.yaml:2: malformed YAML"),
    (yaml.safe_dump(dict(trainjob(), kind="JobSet")), "expected exactly one TrainJob, found JobSet"),
    (yaml.safe_dump(trainjob(trainer={"numNodes": "x"})), "spec.trainer.numNodes: must be of type integer, got string"),
    ("- a\n- b\n", "every YAML document must be a mapping"),
])
def test_bad_input_exit_2_one_line(tmp_path, command, tj_text, message):
    result = run(command, write(tmp_path, "tj.yaml", tj_text), "--runtime", write(tmp_path, "rt.yaml", runtime()))
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("Error: ") and message in err and "\n" not in err and "Traceback" not in err


def test_missing_file_exit_2(tmp_path):
    result = run("render", tmp_path / "nope.yaml", "--runtime", tmp_path / "rt.yaml")
    assert result.exit_code == 2 and "cannot read file" in result.stderr


def test_build_refusal_is_exit_2(tmp_path):
    rt = runtime(ml={"torch": {"elasticPolicy": {"metrics": [{"type": "Resource"}]}}})
    result = run("render", write(tmp_path, "tj.yaml", trainjob()), "--runtime", write(tmp_path, "rt.yaml", rt))
    assert result.exit_code == 2 and "mlPolicy.torch.elasticPolicy.metrics" in result.stderr


@pytest.mark.parametrize("args,message", [
    (["--feature-gates", "TrainJobStatus=maybe"], "use TrainJobStatus=true or TrainJobStatus=false"),
    (["--feature-gates", "Nope=true"], "unknown feature gate 'Nope'"),
    (["--feature-gates", "TrainJobStatus=true"], "TrainJobStatus needs --cert-dir"),
    (["--feature-gates", "TrainJobStatus=true", "--cert-dir", "/tmp", "--status-url", "http://x:1"], "--status-url https://"),
])
def test_controller_run_refuses_bad_feature_gate_settings_before_starting(args, message):
    result = runner.invoke(app, ["controller", "run", *args])
    assert result.exit_code == 2 and message in result.stderr


def test_render_with_the_status_server_gate(tmp_path):
    ca = tmp_path / "ca.crt"
    ca.write_text("PEM")
    tj, rt = tmp_path / "tj.yaml", tmp_path / "rt.yaml"
    tj.write_text(yaml.safe_dump(trainjob()))
    rt.write_text(yaml.safe_dump(runtime(ml={"torch": {}})))
    result = run("render", tj, "--runtime", rt, "--status-server-url", "https://s:10443", "--status-server-ca", ca)
    assert result.exit_code == 0, result.stderr
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(result.stdout)]
    assert "tj-tls-config" in names
    bad = run("render", tj, "--runtime", rt, "--status-server-url", "https://s:10443")
    assert bad.exit_code != 0 and "go together" in bad.stderr


def test_render_and_validate_see_the_tenant_namespace_given_with_cluster(tmp_path):
    """A Namespace among --cluster objects carries the tenant's queue and priority grants (controller/tenant_namespace.py)."""
    namespace = tenant_namespace(queue="team-a", granted="team-a-default", default="team-a-default")
    rt = write(tmp_path, "rt.yaml", runtime(ml={"torch": {}}, pod_group={"volcano": {}}))
    cluster = write(tmp_path, "ns.yaml", namespace)
    rendered = run("render", write(tmp_path, "tj.yaml", trainjob()), "--runtime", rt, "--cluster", cluster)
    pg = next(d for d in yaml.safe_load_all(rendered.stdout) if d["kind"] == "PodGroup")
    assert pg["spec"]["queue"] == "team-a" and pg["spec"]["priorityClassName"] == "team-a-default"
    high = trainjob()
    high["metadata"]["labels"] = {"trainyard.dev/priority-class": "training-high"}
    refused = run("validate", write(tmp_path, "high.yaml", high), "--runtime", rt, "--cluster", cluster)
    assert refused.exit_code == 1
    assert refused.stderr.strip() == ('Error: metadata.labels[trainyard.dev/priority-class]: Unsupported value: '
                                      '"training-high": supported values: "team-a-default" (the priority classes '
                                      'namespace ns was granted)')
