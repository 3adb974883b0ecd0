"""Two stacks, one workload: the what-if's verdicts (shares, waits, jobs that could never run) follow the change."""

import pytest

from trainyard.scheduling.trace import TraceJob
from trainyard.whatif.compare import compare, never_runnable_lines, refusal, table_rows
from trainyard.whatif.scenario import scenario
from trainyard.whatif.workload import generated

from stackfiles import config, edited, local_document, roomy, tenants


def backlog(tenant: str, count: int, gpus: int, prefix: str) -> list[TraceJob]:
    return [TraceJob(f"{prefix}{i}", tenant, 0.0, 60.0, 1, gpus, None) for i in range(count)]


def test_doubling_a_tenants_weight_raises_its_share(tmp_path):
    """Both tenants have the same backlog of 2-GPU jobs: at 1:1 each holds half; at 1:2 team-b's deserved share is
    two thirds (21 GPUs, so 20 in 2-GPU jobs) and it holds them while both still ask (then team-a works off the
    rest alone, which is not competition and not counted)."""
    base = roomy(local_document())
    doubled = edited(base, lambda d: tenants(d)["team-b"]["queue"].update(weight=2))
    trace = backlog("team-a", 60, 2, "a") + backlog("team-b", 60, 2, "b")
    result = compare(scenario(config(base, tmp_path, "a.yaml")), scenario(config(doubled, tmp_path, "b.yaml")),
                     trace, seed=0)
    before, after = result["current"]["tenants"], result["proposed"]["tenants"]
    assert before["team-b"]["share"] == pytest.approx(0.5, abs=0.02)
    assert after["team-b"]["share"] == pytest.approx(20 / 32, abs=0.02)
    assert after["team-b"]["share"] > before["team-b"]["share"] + 0.1
    assert after["team-b"]["entitlement"] == pytest.approx(2 / 3, abs=0.01)
    assert after["team-b"]["wait_p50_s"] < before["team-b"]["wait_p50_s"]
    assert after["team-a"]["wait_p50_s"] > before["team-a"]["wait_p50_s"]


def test_a_quota_cut_below_a_tenants_largest_job_reports_it_never_runnable(tmp_path):
    base = roomy(local_document())

    def cut(doc):
        team = tenants(doc)["team-a"]
        team["quota"]["gpu"] = 8
        team["queue"]["capability"]["nvidia.com/gpu"] = 8
    current = scenario(config(base, tmp_path, "a.yaml"))
    trace = generated(current, ["team-a", "team-b"], seed=1, jobs=80)
    largest = max((j for j in trace if j.tenant == "team-a"), key=lambda j: j.gpus)
    assert largest.gpus > 8
    result = compare(current, scenario(config(edited(base, cut), tmp_path, "b.yaml")), trace, seed=1)
    assert result["current"]["never_runnable"] == []
    never = {e["job"]: e for e in result["proposed"]["never_runnable"]}
    assert largest.name in never
    assert never[largest.name]["reason"] == f"needs {largest.gpus} GPUs, above team-a's quota of 8"
    assert set(never) == {j.name for j in trace if j.tenant == "team-a" and j.gpus > 8}
    assert result["proposed"]["tenants"]["team-a"]["never_runnable"] == len(never)
    ((line,),) = [never_runnable_lines(result)]
    assert line.startswith(f"never runnable under the proposal: team-a, {len(never)} jobs (")
    assert line.endswith("): needs 16 GPUs, above team-a's quota of 8") and largest.gpus == 16
    assert table_rows(result)[-1] == ["jobs never runnable", "0", str(len(never)), f"+{len(never)}"]


def test_granting_a_priority_class_makes_its_jobs_runnable_and_served_first(tmp_path):
    base = roomy(local_document())
    granted = edited(base, lambda d: tenants(d)["team-b"].update(priorityClasses=["training-high"]))
    urgent = TraceJob("urgent", "team-b", 1.0, 30.0, 1, 8, None, priority_class="training-high")
    trace = backlog("team-b", 12, 8, "b") + [urgent]
    result = compare(scenario(config(base, tmp_path, "a.yaml")), scenario(config(granted, tmp_path, "b.yaml")),
                     trace, seed=0)
    assert result["current"]["never_runnable"] == [
        {"job": "urgent", "tenant": "team-b", "gpus": 8, "reason": "priority class training-high is not granted to team-b"}]
    assert result["proposed"]["never_runnable"] == []
    assert never_runnable_lines(result) == [
        "runnable again under the proposal: team-b, 1 job (urgent): priority class training-high is not granted to team-b"]
    # served before the backlog that arrived earlier: it starts when the first of the running four ends
    assert result["proposed"]["tenants"]["team-b"]["wait_p95_s"] >= 59.0


@pytest.mark.parametrize("job, reason", [
    (TraceJob("x", "team-z", 0, 1, 1, 8, None), "tenant team-z has no queue in this stack"),
    (TraceJob("x", "team-a", 0, 1, 1, 16, None), "a pod needs 16 GPUs, no node has more than 8"),
    (TraceJob("x", "team-a", 0, 1, 3, 8, 1), "3 pods of 8 GPUs do not fit one rack (room for 2)"),
    (TraceJob("x", "team-a", 0, 1, 5, 8, 2), "needs 40 GPUs, above team-a's quota of 32"),
    (TraceJob("x", "team-a", 0, 1, 4, 8, 2), None),
    (TraceJob("x", "team-a", 0, 1, 4, 4, 1), None),  # two 4-GPU pods per node: four fit a rack of two nodes
    (TraceJob("x", "team-a", 0, 1, 5, 4, 1), "5 pods of 4 GPUs do not fit one rack (room for 4)"),
])
def test_why_a_job_could_never_run(tmp_path, job, reason):
    assert refusal(job, scenario(config(roomy(local_document()), tmp_path))) == reason


def test_a_hard_tier_without_racks_never_runs(tmp_path):
    flat = scenario(config(edited(local_document(), lambda d: d["config"].pop("trainyard:topology")), tmp_path))
    assert refusal(TraceJob("x", "team-a", 0, 1, 2, 8, 1), flat) == "asks for topology tier 1, and this stack declares no racks"
    assert refusal(TraceJob("x", "team-a", 0, 1, 2, 8, None), flat) is None


def test_the_same_seed_gives_the_same_what_if(tmp_path):
    current = scenario(config(local_document(), tmp_path))
    trace = generated(current, ["team-a", "team-b"], seed=3, jobs=60)
    first = compare(current, current, trace, seed=3)
    assert compare(current, current, trace, seed=3) == first
    spread = first["proposed"].pop("change_spread")
    assert first["current"] == first["proposed"]
    assert spread and set(spread.values()) == {0.0}  # paired members of one stack: every change is exactly 0
    side = first["current"]
    assert 0 < side["allocation"] <= 1
    for figures in side["tenants"].values():
        assert set(figures) >= {"share", "entitlement", "wait_p50_s", "wait_p95_s"}


def test_goodput_shows_beside_allocation_when_the_proposal_evicts_work(tmp_path):
    """Elastic queues with the controller's reclaim: team-b's long jobs borrow the whole cluster, team-a's gang
    takes its share back by suspending two of them, whose work so far is lost. The proposal's goodput (work kept)
    falls below its allocation and the table says so; the current stack, which evicts nothing, has them equal."""
    base = roomy(local_document())

    def elastic_with_reclaim(doc):
        doc["config"].setdefault("trainyard:scheduler", {})["queuePlugin"] = "capacity"
        doc["config"]["trainyard:controllersRunLocally"] = False  # an in-cluster controller: the stack configures it
        doc["config"]["trainyard:controller"] = {"reclaim": "fair-sharing", "webhook": {"certificate": "cert-manager"}}
        for tenant in tenants(doc).values():
            tenant["queue"]["deserved"] = {"nvidia.com/gpu": 16}

    trace = ([TraceJob(f"b{i}", "team-b", 0.0, 900.0, 1, 8, None) for i in range(4)]
             + [TraceJob("a-gang", "team-a", 30.0, 120.0, 2, 8, None)]
             + [TraceJob(f"b-late{i}", "team-b", 40.0, 900.0, 1, 8, None) for i in range(2)])
    result = compare(scenario(config(base, tmp_path, "a.yaml")),
                     scenario(config(edited(base, elastic_with_reclaim), tmp_path, "b.yaml")), trace, seed=0)
    current, proposed = result["current"], result["proposed"]
    assert current["goodput"] == current["allocation"]
    assert proposed["goodput"] < proposed["allocation"]
    rows = {row[0]: row for row in table_rows(result)}
    assert "GPU goodput (work kept)" in rows
    plain = compare(scenario(config(base, tmp_path, "c.yaml")), scenario(config(base, tmp_path, "d.yaml")), trace, 0)
    assert "GPU goodput (work kept)" not in {row[0] for row in table_rows(plain)}


def test_each_started_jobs_wait_counts_from_its_first_pods_bind():
    from trainyard.scheduling.records import PodRecord
    from trainyard.whatif.compare import job_starts

    pods = [PodRecord("g", 8, "n1", bound=14.0), PodRecord("g", 8, "n0", bound=12.5),
            PodRecord("s", 1, "n2", bound=3.0), PodRecord("w", 1)]
    assert job_starts({"g": 10.0, "s": 1.0, "w": 2.0}, pods) == {
        "g": {"wait_s": 2.5, "nodes": ["n0", "n1"]}, "s": {"wait_s": 2.0, "nodes": ["n2"]}}
