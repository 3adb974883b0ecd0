"""Checkpoints in the model: an evicted job resumes from its last checkpoint, goodput keeps the work it saved, the
lost work is counted per eviction, and reclaim prefers victims that would lose the least."""

from fractions import Fraction

import pytest

from trainyard.schedtrace import metrics as M
from trainyard.schedtrace.summary import lost_per_eviction, lost_share
from trainyard.scheduling.reclaim import RunningJob
from trainyard.scheduling.simulator import ModelNode, ModelPolicy, simulate
from trainyard.scheduling.trace import TraceJob, generate, saved_work, with_checkpoints
from trainyard.whatif.workload import parse_trace, trace_document


def job(name, tenant, arrival, duration, pods=1, gpus=8, every=None):
    return TraceJob(name, tenant, arrival, duration, pods, gpus, None, checkpoint_every=every)


@pytest.mark.parametrize("every, ran, saved", [
    (None, 100.0, 0.0), (30.0, 29.9, 0.0), (30.0, 30.0, 30.0), (30.0, 95.0, 90.0), (30.0, 0.0, 0.0), (0.0, 50.0, 0.0),
])
def test_saved_work_is_the_last_checkpoint_before_the_eviction(every, ran, saved):
    assert saved_work(job("j", "a", 0, 100, every=every), ran) == saved


def test_a_running_job_puts_at_stake_only_what_its_last_checkpoint_did_not_keep():
    assert RunningJob(("", "j"), "a", Fraction(8), frozenset({"n0"}), ran_s=95.0, saved_s=90.0).lost_work == 40.0
    assert RunningJob(("", "j"), "a", Fraction(8), frozenset({"n0"}), ran_s=95.0).lost_work == 760.0


def reclaimed(every: float | None, ask_s: float | None = None) -> list[M.PodRecord]:
    """b's two jobs borrow a's half of the cluster; a's gang arrives and reclaim evicts one of them for it: the
    one that would lose less (`borrower` checkpoints every `every` seconds, `keeper` never)."""
    trace = [job("keeper", "b", 0.0, 300.0, pods=2), job("borrower", "b", 0.0, 200.0, pods=2, every=every),
             job("gang", "a", 45.0, 20.0, pods=2)]
    nodes = [ModelNode(f"n{i}", "rack-0", "spine-0", 8) for i in range(4)]
    policy = ModelPolicy(queue_plugin="capacity", deserved={"a": 16, "b": 16}, reclaim_after_s=5.0, checkpoint_ask_s=ask_s)
    _, pods, _ = simulate(trace, nodes, {"a": 1, "b": 1}, policy, seed=0)
    return pods


def test_an_evicted_job_resumes_from_its_last_checkpoint_and_loses_only_the_rest():
    without, with_ = reclaimed(None), reclaimed(30.0)
    assert all(p.succeeded for p in with_ if p.job == "keeper"), "the job without checkpoints is left alone"
    evicted = [p for p in with_ if p.job == "borrower" and not p.succeeded]
    assert evicted and all(p.kept_s == 30.0 for p in evicted), evicted  # evicted ~50 s in: one checkpoint, at 30 s
    rerun = [p for p in with_ if p.job == "borrower" and p.succeeded]
    assert rerun[0].ended - rerun[0].bound == pytest.approx(170.0)  # 200 s of work less the 30 s kept
    rerun_from_start = [p for p in without if not p.succeeded]
    assert rerun_from_start and all(p.kept_s == 0.0 for p in rerun_from_start)
    assert lost_share(with_) < lost_share(without)
    lost = lost_per_eviction(with_)
    assert lost["evictions"] == 1
    assert lost["max_gpu_s"] == pytest.approx(sum(p.gpus * (p.ended - p.bound - 30.0) for p in evicted))


def test_an_asked_victim_saves_before_it_goes_and_loses_nothing_but_holds_its_gpus_meanwhile():
    """Asked first, the checkpointing job goes 5 s (its save) plus a reclaim round after the ask, keeping all it did:
    the rerun does only the rest, and it starts after the old pods are gone (never two placements at once)."""
    asked, not_asked = reclaimed(30.0, ask_s=5.0), reclaimed(30.0)
    evicted = [p for p in asked if p.job == "borrower" and not p.succeeded]
    assert evicted and all(p.kept_s == pytest.approx(p.ended - p.bound) for p in evicted), evicted
    first_gone = [p for p in not_asked if p.job == "borrower" and not p.succeeded][0].ended
    assert evicted[0].ended == pytest.approx(first_gone + 5.0 + 1.0)  # the save, then the next reclaim round
    rerun = [p for p in asked if p.job == "borrower" and p.succeeded]
    assert rerun[0].bound >= evicted[0].ended
    assert rerun[0].ended - rerun[0].bound == pytest.approx(200.0 - evicted[0].kept_s)
    assert lost_share(asked) == 0.0 < lost_share(not_asked)


def test_goodput_counts_an_evicted_pods_work_up_to_its_checkpoint():
    trace = [job("j", "a", 0.0, 100.0)]
    kept = [M.PodRecord("j", 8, "n0", bound=0.0, ended=50.0, succeeded=False, kept_s=30.0),
            M.PodRecord("j", 8, "n0", bound=50.0, ended=120.0, succeeded=True)]
    lost = [M.PodRecord("j", 8, "n0", bound=0.0, ended=50.0, succeeded=False),
            M.PodRecord("j", 8, "n0", bound=50.0, ended=150.0, succeeded=True)]
    for pods, expected in ((kept, (30 + 70) / 120), (lost, 100 / 150)):
        line = M.timeline(trace, M.by_job(pods), {"j": 0.0}, max(p.ended for p in pods), step=0.5)
        assert M.goodput_while_saturated(line, pods, 8) == pytest.approx(expected, abs=0.01)


def test_checkpoint_intervals_are_drawn_apart_from_the_trace_and_survive_a_trace_file():
    base = generate(5, 40, 64)
    drawn = with_checkpoints(base, 5)
    assert [(j.arrival, j.duration, j.pods) for j in drawn] == [(j.arrival, j.duration, j.pods) for j in base]
    assert any(j.checkpoint_every is None for j in drawn) and any(j.checkpoint_every for j in drawn)
    assert parse_trace(trace_document(drawn), "t.json") == drawn
    assert "checkpointEvery" not in trace_document(base)["jobs"][0]  # a trace without checkpoints reads as before
