"""The workload both sides replay: a generated trace the stack in effect can serve, or a trace file read strictly."""

import json

import pytest

from trainyard.scheduling.trace import RACK_TIER, SPINE_TIER, TraceJob
from trainyard.whatif.scenario import scenario
from trainyard.whatif.workload import TraceError, entitled_gpus, generated, parse_trace, read_trace, trace_document

from stackfiles import config, local_document, roomy


def test_a_generated_trace_is_seeded_and_sized_for_the_stack_in_effect(tmp_path):
    current = scenario(config(local_document(), tmp_path))
    first = generated(current, ["team-a", "team-b"], seed=4, jobs=120)
    assert first == generated(current, ["team-a", "team-b"], seed=4, jobs=120)
    assert first != generated(current, ["team-a", "team-b"], seed=5, jobs=120)
    entitled = entitled_gpus(current)  # weights 2:1 on 32 GPUs, each capped at 16
    assert entitled == pytest.approx({"team-a": 16.0, "team-b": 32 / 3})
    for job in first:
        assert job.gpus <= max(entitled[job.tenant], job.gpus_per_pod), job
        assert job.gpus_per_pod <= 8
        assert job.tier is None if job.pods == 1 else job.tier in (RACK_TIER, SPINE_TIER)
    counts = {name: sum(1 for j in first if j.tenant == name) for name in ("team-a", "team-b")}
    assert counts["team-a"] > counts["team-b"] > 0  # submitted in proportion to what each may expect (16 : 10.7)


def test_a_generated_trace_has_gangs_where_the_stack_allows_them(tmp_path):
    current = scenario(config(roomy(local_document()), tmp_path))
    trace = generated(current, ["team-a", "team-b"], seed=0, jobs=200)
    gangs = [j for j in trace if j.pods > 1]
    assert gangs and all(j.pods <= 2 for j in gangs)  # 16 GPUs each: at most two whole nodes
    assert all(j.tier == RACK_TIER for j in gangs)  # two nodes fit a local rack


def test_a_trace_file_round_trips(tmp_path):
    trace = [TraceJob("b", "team-a", 5.0, 30.0, 2, 8, 1, priority_class="training-high"),
             TraceJob("a", "team-b", 0.0, 10.0, 1, 4, None)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace_document(trace)))
    assert read_trace(path) == sorted(trace, key=lambda j: j.arrival)


GOOD = {"name": "j1", "tenant": "team-a", "arrival": 0, "duration": 60, "pods": 2, "gpusPerPod": 8, "tier": 1}


@pytest.mark.parametrize("job, field, fix", [
    ({**GOOD, "pods": 0}, "jobs[0].pods", "1 or more"),
    ({**GOOD, "duration": 0}, "jobs[0].duration", "more than 0"),
    ({**GOOD, "arrival": -1}, "jobs[0].arrival", "0 or more"),
    ({**GOOD, "tier": 3}, "jobs[0].tier", "1 (rack), 2 (spine) or null"),
    ({**GOOD, "gpusPerPod": "8"}, "jobs[0].gpusPerPod", "a whole number"),
    ({**GOOD, "pods": True}, "jobs[0].pods", "a whole number"),
    ({k: v for k, v in GOOD.items() if k != "tenant"}, "jobs[0].tenant", "add tenant"),
    ({**GOOD, "gpus": 8}, "jobs[0].gpus", "use only name, tenant"),
    ("j1", "jobs[0]", "write each job as an object"),
    ({**GOOD, "checkpointEvery": 0}, "jobs[0].checkpointEvery", "more than 0"),
    ({**GOOD, "checkpointEvery": "1m"}, "jobs[0].checkpointEvery", "a whole number or a number or null"),
])
def test_a_bad_trace_names_the_field_and_the_fix(job, field, fix):
    with pytest.raises(TraceError) as err:
        parse_trace({"jobs": [job]}, "t.json")
    problem = next(p for p in err.value.problems if p.field == field)
    assert fix in problem.fix, (problem, fix)
    assert "t.json" in str(err.value)


def test_a_trace_without_jobs_or_with_a_name_twice_is_refused(tmp_path):
    for document, field in (({}, "jobs"), ({"jobs": []}, "jobs"), ({"jobs": [GOOD, GOOD]}, "jobs[1].name")):
        with pytest.raises(TraceError) as err:
            parse_trace(document, "t.json")
        assert [p.field for p in err.value.problems] == [field]
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(TraceError, match="not JSON"):
        read_trace(tmp_path / "broken.json")
    with pytest.raises(TraceError, match="cannot read it"):
        read_trace(tmp_path / "missing.json")
