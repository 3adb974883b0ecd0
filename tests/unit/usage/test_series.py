"""GPUs per tenant over time, in bins that add up to the GPU-hours `usage` prints, and the plots of them."""

from __future__ import annotations

import pytest

from trainyard.usage.account import account
from trainyard.usage.plots import AGAINST_ENTITLEMENT, STACKED, write_plots
from trainyard.usage.record import PodSpan, Tenancy, UsageRecord
from trainyard.usage.series import tenant_series


def record():
    return UsageRecord(since=0.0, until=1000.0, pods=[
        PodSpan("a", "p1", 8, 50.0, 275.0), PodSpan("a", "p2", 16, 300.0, None), PodSpan("b", "p3", 4, -100.0, 130.0)],
        namespaces={"a": Tenancy("team-a", "qa"), "b": Tenancy("team-b", "qb")},
        entitlement={"qa": [(0.0, 8.0), (500.0, 24.0)], "qb": [(0.0, 8.0)]})


@pytest.mark.parametrize("bins", [1, 7, 10, 120])
def test_the_bins_add_up_to_the_gpu_hours_usage_prints(bins):
    series = tenant_series(record(), bins)
    width = 1000.0 / bins
    rows = {row.group: row.gpu_hours for row in account(record(), "tenant")}
    for tenant, values in series.held.items():
        assert sum(values) * width / 3600 == pytest.approx(rows[tenant])


def test_a_bin_holds_the_average_gpus_over_it_and_the_entitlement_at_its_middle():
    series = tenant_series(record(), 10)
    assert series.held["team-a"][:4] == pytest.approx([4.0, 8.0, 6.0, 16.0])  # p1 from 50 s; a gap 275..300
    assert series.held["team-b"][:2] == pytest.approx([4.0, 1.2])
    assert series.entitled["team-a"][4:6] == [8.0, 24.0] and series.entitled["team-b"] == [8.0] * 10


def test_both_plots_are_written(tmp_path):
    assert write_plots(tenant_series(record(), 20), tmp_path) == [STACKED, AGAINST_ENTITLEMENT]
    assert all((tmp_path / name).stat().st_size > 1000 for name in (STACKED, AGAINST_ENTITLEMENT))


def test_no_plot_when_no_tenant_held_a_gpu(tmp_path):
    assert write_plots(tenant_series(UsageRecord(since=0.0, until=10.0), 5), tmp_path) == []
