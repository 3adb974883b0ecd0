"""`trainyard platform whatif` and the summary `platform preview` prints, run as a user runs them: the console script
in a checkout whose stack file has a reviewed change (committed stack vs working copy), or against a proposed file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainyard.paths import repo_root
from trainyard.whatif.run import preview_summary

from stackfiles import edited, local_document, roomy, tenants, write

TRAINYARD = Path(sys.executable).parent / "trainyard"


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRAINYARD_ROOT=str(root), COLUMNS="200", NO_COLOR="1")
    return subprocess.run([str(TRAINYARD), *args], capture_output=True, text=True, env=env, cwd=root, timeout=300)


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A git checkout with the roomy local stack committed as stacks/Pulumi.t.yaml (catalog and pins linked)."""
    root = tmp_path / "checkout"
    (root / "stacks").mkdir(parents=True)
    for name in ("runtimes", "tools", "pyproject.toml"):
        (root / name).symlink_to(repo_root() / name)
    write(roomy(local_document()), root / "stacks" / "Pulumi.t.yaml")
    for args in (["init", "-q"], ["add", "stacks"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "s"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


def halve_team_a_quota(doc: dict) -> None:
    team = tenants(doc)["team-a"]
    team["quota"]["gpu"] = 8
    team["queue"]["capability"]["nvidia.com/gpu"] = 8


def test_whatif_compares_the_working_copy_with_the_last_commit(checkout):
    write(edited(roomy(local_document()), halve_team_a_quota), checkout / "stacks" / "Pulumi.t.yaml")
    out = run(checkout, "platform", "whatif", "--stack", "t", "-o", "json", "--jobs", "80", "--seed", "2")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert set(result) == {"current", "proposed"}
    for side in result.values():
        assert 0 <= side["allocation"] <= 1
        assert set(side["tenants"]) == {"team-a", "team-b"}
        for figures in side["tenants"].values():
            assert {"share", "entitlement", "wait_p50_s", "wait_p95_s"} <= set(figures)
    assert result["current"]["stack"] == "HEAD:stacks/Pulumi.t.yaml"
    assert result["current"]["never_runnable"] == []
    assert result["proposed"]["never_runnable"] and all(
        e["tenant"] == "team-a" and e["reason"] == f"needs {e['gpus']} GPUs, above team-a's quota of 8"
        for e in result["proposed"]["never_runnable"])
    assert "tenants[team-a].quota.gpu: 32 -> 8" in result["proposed"]["changes"]
    assert result["proposed"]["caveats"] == []
    again = run(checkout, "platform", "whatif", "--stack", "t", "-o", "json", "--jobs", "80", "--seed", "2")
    assert json.loads(again.stdout) == result  # deterministic for a seed

    table = run(checkout, "platform", "whatif", "--stack", "t", "--jobs", "80", "--seed", "2")
    assert table.returncode == 0, table.stderr
    assert "tenants[team-a].quota.gpu: 32 -> 8" in table.stdout
    assert "GPU allocation (saturated)" in table.stdout and "never runnable under the proposal: team-a, " in table.stdout


def test_whatif_against_a_proposed_file_and_a_trace_file(checkout, tmp_path):
    proposed = write(edited(roomy(local_document()), lambda d: tenants(d)["team-b"]["queue"].update(weight=2)),
                     tmp_path / "proposed.yaml")
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"jobs": [
        {"name": f"{t}{i}", "tenant": f"team-{t}", "arrival": 0, "duration": 60, "pods": 1, "gpusPerPod": 2,
         "tier": None} for t in "ab" for i in range(60)]}))
    out = run(checkout, "platform", "whatif", "--stack", "t", "--proposed", str(proposed), "--trace", str(trace),
              "-o", "json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["proposed"]["workload"] == {"source": str(trace), "seed": 0, "jobs": 120}
    assert result["current"]["engine"] == result["proposed"]["engine"] == {"name": "model"}
    assert result["proposed"]["tenants"]["team-b"]["share"] > result["current"]["tenants"]["team-b"]["share"] + 0.1
    assert [c.split(":")[0] for c in result["proposed"]["caveats"]] == ["queue order (weight, deserved, queue plugin)"]


@pytest.mark.parametrize("args, message", [
    (["--trace", "recorded"], "the usage record (trainyard usage) cannot be replayed as a trace yet"),
    (["--trace", "nope.json"], "cannot read it"),
    (["--stack", "nosuch"], "no stack file"),
    (["-o", "yaml"], "use table or json"),
    (["--engine", "gpu"], "--engine 'gpu': use model or cluster"),
])
def test_whatif_refuses_what_it_cannot_replay_and_says_why(checkout, args, message):
    out = run(checkout, "platform", "whatif", *(["--stack", "t"] if "--stack" not in args else []), *args)
    assert out.returncode == 2
    assert message in out.stdout + out.stderr


def test_whatif_names_the_bad_field_of_a_proposed_stack(checkout, tmp_path):
    bad = write(edited(roomy(local_document()), lambda d: tenants(d)["team-a"]["queue"].update(weight=-1)),
                tmp_path / "bad.yaml")
    out = run(checkout, "platform", "whatif", "--stack", "t", "--proposed", str(bad))
    assert out.returncode == 2
    assert "trainyard:tenants[team-a].queue.weight" in out.stderr, out.stderr


def test_preview_prints_the_whatif_only_when_a_scheduling_setting_changes(checkout):
    stack = checkout / "stacks" / "Pulumi.t.yaml"
    assert preview_summary(stack, checkout) is None  # nothing changed yet
    write(edited(roomy(local_document()), lambda d: d["config"]["trainyard:controller"]["webhook"].update(
        url="https://127.0.0.1:26999")), stack)
    assert preview_summary(stack, checkout) is None  # a change the scheduler never sees
    write(edited(roomy(local_document()), halve_team_a_quota), stack)
    summary = preview_summary(stack, checkout)
    assert summary is not None and "tenants[team-a].quota.gpu: 32 -> 8" in summary
    assert "never runnable under the proposal" in summary
    # the command prints it before Pulumi runs (which then fails here: this checkout has no cluster)
    out = run(checkout, "platform", "preview", "--stack", "t", "--cluster", "no-such-cluster")
    assert "what-if: HEAD:stacks/Pulumi.t.yaml -> stacks/Pulumi.t.yaml (working copy)" in out.stdout, out.stdout + out.stderr
    assert "tenants[team-a].quota.gpu: 32 -> 8" in out.stdout


def test_a_saved_generated_trace_replays_to_the_same_result(checkout, tmp_path):
    """`--save-trace` writes the generated workload as a trace file; replaying that file gives the same figures."""
    proposed = write(edited(roomy(local_document()), lambda d: tenants(d)["team-b"]["queue"].update(weight=2)),
                     tmp_path / "proposed.yaml")
    saved = tmp_path / "saved.json"
    first = run(checkout, "platform", "whatif", "--stack", "t", "--proposed", str(proposed), "--jobs", "40",
                "--seed", "3", "--save-trace", str(saved), "-o", "json")
    assert first.returncode == 0, first.stderr
    assert len(json.loads(saved.read_text())["jobs"]) == 40
    again = run(checkout, "platform", "whatif", "--stack", "t", "--proposed", str(proposed), "--trace", str(saved),
                "--seed", "3", "-o", "json")
    assert again.returncode == 0, again.stderr
    figures = [json.loads(out.stdout) for out in (first, again)]
    for side in figures:
        for name in ("current", "proposed"):
            side[name].pop("workload")
    assert figures[0] == figures[1]


def test_the_cluster_engine_refuses_a_stack_it_cannot_build_before_starting_anything(checkout, tmp_path):
    def named(doc):
        doc["config"]["trainyard:topology"]["racks"] = [{"name": "r1", "spine": "s1", "nodes": ["x", "y"]}]
    proposal = write(edited(roomy(local_document()), named), tmp_path / "named.yaml")
    out = run(checkout, "platform", "whatif", "--stack", "t", "--proposed", str(proposal), "--engine", "cluster")
    assert out.returncode == 2
    assert "topology.racks[0].nodes" in out.stderr and "--engine model" in out.stderr, out.stderr
    assert "starting cluster" not in out.stderr
