"""The agreement's stack changes are valid stacks of eight kinds, and a case scores the model's predicted change
against the cluster's measured one: signs only beyond the spread, errors in points and seconds."""

import pytest

from trainyard.scheduling.trace import TraceJob
from trainyard.whatif import agreement as A
from trainyard.whatif.scenario import scenario
from trainyard.whatif.stacks import scheduling_changes

from stackfiles import config, local_document


def test_eight_kinds_of_change_each_a_valid_stack_that_changes_a_scheduling_setting(tmp_path):
    assert len({c.kind for c in A.CHANGES}) == 8
    current = config(A.base(local_document()), tmp_path, "Pulumi.base.yaml")
    for change in A.CHANGES:
        proposal = config(A.proposed(A.base(local_document()), change), tmp_path, f"Pulumi.{change.name}.yaml")
        assert scheduling_changes(current, proposal), change.name
        assert scenario(proposal).capacity == 32


def test_the_base_gives_each_tenant_the_whole_cluster(tmp_path):
    terms = scenario(config(A.base(local_document()), tmp_path)).tenants
    assert {name: t.cap_gpus for name, t in terms.items()} == {"team-a": 32, "team-b": 32}


def test_one_team_b_job_in_four_names_the_high_class():
    trace = [TraceJob(f"j{i}", "team-b" if i % 2 else "team-a", i, 10.0, 1, 8, None) for i in range(16)]
    marked = A.with_high_priority(trace)
    assert [j.name for j in marked if j.priority_class == A.HIGH] == ["j7", "j15"]
    assert all(j.priority_class is None for j in marked if j.tenant == "team-a")


def side(allocation, share_a, p50_small):
    return {"allocation": allocation, "goodput": allocation, "tenants": {"team-a": {"share": share_a}},
            "wait_by_size": {"1x8": {"p50_s": p50_small, "p95_s": p50_small * 2}}}


@pytest.mark.parametrize("model_after, cluster_after, noise, scored, agrees, error", [
    (0.70, 0.72, 0.5, True, True, 2.0),     # both up: agrees, 2 points apart
    (0.70, 0.58, 0.5, True, False, 12.0),   # model up, cluster down beyond its spread: disagrees
    (0.70, 0.598, 1.0, False, None, 10.2),  # cluster's change within its spread: sign not scored
    (0.60, 0.58, 0.5, True, False, 2.0),    # the model predicts no change, the cluster a fall beyond its spread
    (0.6002, 0.6, 0.0, False, None, 0.02),  # both no change
])
def test_a_case_scores_signs_beyond_the_spread_and_errors_always(model_after, cluster_after, noise, scored, agrees,
                                                                 error):
    model = {"current": side(0.60, 0.5, 100), "proposed": side(model_after, 0.4, 160)}
    cluster = {"current": side(0.60, 0.5, 100), "proposed": side(cluster_after, 0.45, 90)}
    found = A.case(A.CHANGES[0], 31, model, cluster, {"allocation": noise})
    row = found["figures"]["allocation"]
    assert (row["sign_scored"], row["sign_agrees"], row["error"]) == (scored, agrees, pytest.approx(error, abs=0.01))
    assert found["figures"]["share.team-a"]["error"] == pytest.approx(5.0)
    assert found["figures"]["wait_p50.1x8"] == {"model": 60.0, "cluster": -10.0, "error": 70.0, "spread": 0.0,
                                                "sign_scored": True, "sign_agrees": False, "model_sd": None,
                                                "within_model_spread": None}


def test_the_summary_counts_changes_seeds_and_the_largest_errors():
    model = {"current": side(0.60, 0.5, 100), "proposed": side(0.70, 0.4, 160)}
    cluster = {"current": side(0.60, 0.5, 100), "proposed": side(0.72, 0.45, 100)}
    cases = [A.case(change, seed, model, cluster, {}) for change in A.CHANGES[:2] for seed in (31, 32)]
    found = A.summary(cases)
    assert (found["changes"], found["seeds"], found["cases"]) == (2, 2, 4)
    assert found["max_allocation_error_points"] == pytest.approx(2.0)
    assert found["max_share_error_points"] == pytest.approx(5.0)
    # allocation, goodput and share agree; wait p50 (+60 vs 0: not beyond a zero spread... 0 is not > 0) unscored
    assert found["sign_agreement"] == pytest.approx(1.0)


def test_the_new_tenant_is_judged_on_a_third_of_team_b_jobs_and_every_other_change_on_the_trace_itself():
    trace = A.with_high_priority([TraceJob(f"j{i}", "team-b", i, 10.0, 1, 8, None) for i in range(12)])
    by_name = {c.name: c for c in A.CHANGES}
    moved = A.workload(by_name["new-tenant"], trace)
    assert [j.name for j in moved if j.tenant == "team-c"] == ["j2", "j5", "j8", "j11"]
    assert all(j.priority_class is None for j in moved if j.tenant == "team-c")
    assert A.workload(by_name["weight"], trace) == trace


def test_the_spread_is_the_largest_any_seed_showed():
    assert A.pooled_spread([{"allocation": 0.4, "share.team-a": 1.0}, {"allocation": 1.2}, {}]) == {
        "allocation": 1.2, "share.team-a": 1.0}
    assert A.pooled_spread([]) == {}


def test_a_wait_change_within_one_scheduling_cycle_is_not_scored():
    model = {"current": side(0.60, 0.5, 100), "proposed": side(0.60, 0.5, 101)}
    cluster = {"current": side(0.60, 0.5, 100), "proposed": side(0.60, 0.5, 98.5)}
    row = A.case(A.CHANGES[0], 31, model, cluster, {}, wait_floor_s=2.0)["figures"]["wait_p50.1x8"]
    assert (row["spread"], row["sign_scored"], row["sign_agrees"]) == (2.0, False, None)
    unfloored = A.case(A.CHANGES[0], 31, model, cluster, {})["figures"]["wait_p50.1x8"]
    assert (unfloored["sign_scored"], unfloored["sign_agrees"]) == (True, False)
    assert A.case(A.CHANGES[0], 31, model, cluster, {}, wait_floor_s=2.0)["figures"]["allocation"]["spread"] == 0.0


def test_the_summary_names_every_scored_disagreement():
    model = {"current": side(0.60, 0.5, 100), "proposed": side(0.70, 0.4, 160)}
    cluster = {"current": side(0.60, 0.5, 100), "proposed": side(0.50, 0.45, 100)}
    found = A.summary([A.case(A.CHANGES[0], 31, model, cluster, {})])
    assert found["signs_disagreeing"] == ["weight seed 31: allocation", "weight seed 31: goodput"]


@pytest.mark.parametrize("model_sd_fraction, spread, within", [
    (0.02, 0.0, False),    # 5 points off, the model's sd 2 points: 5 > 2 x 2
    (0.03, 0.0, True),     # sd 3 points: 5 <= 6
    (0.01, 0.5, False),    # sd 1 point and a spread of 0.5: 5 > 2.5
])
def test_a_figure_is_within_the_models_spread_when_its_error_is_under_two_of_the_models_sd(model_sd_fraction, spread,
                                                                                           within):
    model = {"current": side(0.60, 0.5, 100), "proposed": {**side(0.60, 0.45, 100),
                                                           "change_spread": {"share.team-a": model_sd_fraction}}}
    cluster = {"current": side(0.60, 0.5, 100), "proposed": side(0.60, 0.40, 100)}
    row = A.case(A.CHANGES[0], 31, model, cluster, {"share.team-a": spread})["figures"]["share.team-a"]
    assert row["error"] == pytest.approx(5.0) and row["model_sd"] == pytest.approx(100 * model_sd_fraction)
    assert row["within_model_spread"] is within
    assert A.summary([A.case(A.CHANGES[0], 31, model, cluster, {"share.team-a": spread})])["within_model_spread"] == (
        1.0 if row["within_model_spread"] else 0.0)


def test_changes_the_model_says_it_leaves_out_are_scored_and_also_set_apart():
    model = {"current": side(0.60, 0.5, 100), "proposed": {**side(0.60, 0.5, 100),
                                                           "not_modelled": ["scheduler.profile fair-share: ..."]}}
    cluster = {"current": side(0.60, 0.5, 100), "proposed": side(0.44, 0.35, 100)}
    left_out = A.case(A.CHANGES[5], 32, model, cluster, {})
    assert left_out["not_modelled"] == ["scheduler.profile fair-share: ..."]
    agreeing = A.case(A.CHANGES[0], 32, {"current": side(0.6, 0.5, 100), "proposed": side(0.7, 0.6, 100)},
                      {"current": side(0.6, 0.5, 100), "proposed": side(0.7, 0.6, 100)}, {})
    found = A.summary([left_out, agreeing])
    assert found["sign_agreement"] < 1.0 and found["sign_agreement_modelled"] == 1.0
    assert found["max_allocation_error_points"] == pytest.approx(16.0)
    assert found["max_allocation_error_points_modelled"] == 0.0


def test_the_spread_of_several_replays_is_their_widest_pair():
    replays = [{"allocation": a, "tenants": {"team-a": {"share": t}}} for a, t in ((0.50, 0.30), (0.52, 0.31),
                                                                                  (0.49, 0.36))]
    found = A.spread_of_replays(replays)
    assert found == pytest.approx({"allocation": 3.0, "share.team-a": 6.0})
    assert A.spread_of_replays(replays[:2]) == pytest.approx({"allocation": 2.0, "share.team-a": 1.0})
    assert A.spread_of_replays(replays[:1]) == {}
