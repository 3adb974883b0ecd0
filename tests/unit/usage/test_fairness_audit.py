"""The fairness audit (pure): received share against entitlement while the cluster is saturated, starvation
intervals and Jain's index, on the trace benchmark's definitions."""

from __future__ import annotations

import pytest

from trainyard.usage.fairness_audit import audit, jain_index
from trainyard.usage.record import Demand, PodSpan, Tenancy, UsageRecord


def record(a_held=16, b_held=16, seconds=1000.0):
    """Two tenants (weights 2:1) on 32 GPUs, each demanding all 32 for the whole window."""
    return UsageRecord(
        since=0.0, until=seconds,
        pods=[PodSpan("a", "a0", a_held, 0.0, None), PodSpan("b", "b0", b_held, 0.0, None)],
        namespaces={"a": Tenancy("team-a", "qa"), "b": Tenancy("team-b", "qb")},
        demands=[Demand("a", "ja", 32, 0.0, None), Demand("b", "jb", 32, 0.0, None)],
        weights={"qa": 2.0, "qb": 1.0}, capacity=32.0)


def test_shares_against_the_weighted_fair_share_while_saturated():
    found = audit(record(), starve_min_s=60, step=1.0)
    a, b = found["tenants"]["team-a"], found["tenants"]["team-b"]
    assert found["saturated_s"] == pytest.approx(1000.0) and found["allocation"] == pytest.approx(1.0)
    assert (a["share"], a["fair_share"], a["weight_share"]) == (pytest.approx(0.5), pytest.approx(2 / 3),
                                                                 pytest.approx(2 / 3))
    assert (b["share"], b["fair_share"]) == (pytest.approx(0.5), pytest.approx(1 / 3))
    assert a["deviation_points"] == pytest.approx(-16.67, abs=0.01)
    # team-a held 16 of its fair 21.3 while 16 of its demand waited, the whole time: starved
    assert a["starved_s"] == pytest.approx(1000.0) and a["starvation"] == [{"from_s": 0.0, "to_s": 1000.0}]
    assert b["starved_s"] == 0 and b["starvation"] == []
    assert found["jain_index"] == pytest.approx((0.75 + 1.5) ** 2 / (2 * (0.75 ** 2 + 1.5 ** 2)))


def test_a_fair_split_has_no_starvation_and_a_jain_index_of_one():
    found = audit(record(a_held=21, b_held=11), starve_min_s=60, step=1.0)  # as near 21.3/10.7 as whole GPUs go
    assert found["jain_index"] == pytest.approx(1.0, abs=1e-3)
    assert all(t["starvation"] == [] for t in found["tenants"].values())


def test_starvation_shorter_than_the_set_time_is_not_reported():
    short = record()
    short.pods[0] = PodSpan("a", "a0", 16, 0.0, 30.0)  # then team-a holds its fair share
    short.pods.append(PodSpan("a", "a1", 21, 30.0, None))
    assert audit(short, starve_min_s=60, step=1.0)["tenants"]["team-a"]["starvation"] == []
    assert audit(short, starve_min_s=20, step=1.0)["tenants"]["team-a"]["starvation"] == [{"from_s": 0.0, "to_s": 30.0}]


def test_an_unsaturated_cluster_has_no_audit_figures():
    idle = record()
    idle.demands = [Demand("a", "ja", 8, 0.0, None)]
    found = audit(idle, step=1.0)
    assert found["saturated_s"] == 0 and found["allocation"] is None
    assert found["tenants"]["team-a"]["share"] is None


@pytest.mark.parametrize("values, index", [([1, 1, 1], 1.0), ([1, 0, 0, 0], 0.25), ([], None), ([0, 0], None)])
def test_jains_index(values, index):
    assert jain_index(values) == (pytest.approx(index) if index is not None else None)


def test_the_audit_reads_as_a_table():
    from trainyard.usage.render import fairness_text

    text = fairness_text(audit(record(), starve_min_s=60, step=1.0))
    assert text.splitlines()[0] == "Fairness while saturated (17 min; allocation 100.0 %; Jain's index 0.900)"
    team_a = next(line for line in text.splitlines() if line.startswith("team-a")).split()
    assert team_a == ["team-a", "66.7", "%", "66.7", "%", "50.0", "%", "-16.7", "16.7m", "16.7m"]
    assert "never saturated" in fairness_text(audit(UsageRecord(since=0, until=10), step=1.0) | {"saturated_s": 0})
