"""`report --since` plots: GPUs per tenant over time (stacked) and each tenant's GPUs against its entitlement."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from trainyard.usage.series import TenantSeries

STACKED = "usage_gpus_by_tenant.png"
AGAINST_ENTITLEMENT = "usage_share_vs_entitlement.png"


def write_plots(series: TenantSeries, out: Path) -> list[str]:
    """PNG files written under `out` (names relative to it); none when no tenant held a GPU."""
    if not series.held:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    times = mdates.date2num([dt.datetime.fromtimestamp(t, dt.timezone.utc) for t in series.middles])
    names = list(series.held)
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.stackplot(times, [series.held[n] for n in names], labels=names, step="mid")
    ax.set_title("GPUs held per tenant (stacked)")
    ax.set_ylabel("GPUs")
    ax.legend(loc="upper left", fontsize="small")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(out / STACKED, dpi=90)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(9, 4))
    for index, name in enumerate(names):
        color = f"C{index % 10}"
        ax.step(times, series.held[name], where="mid", color=color, label=f"{name} held")
        if name in series.entitled:
            ax.step(times, series.entitled[name], where="mid", color=color, linestyle="--",
                    label=f"{name} entitled")
    ax.set_title("GPUs held against entitlement (dashed): above it is borrowed")
    ax.set_ylabel("GPUs")
    ax.legend(loc="upper left", fontsize="small", ncol=2)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(out / AGAINST_ENTITLEMENT, dpi=90)
    plt.close(fig)
    return [STACKED, AGAINST_ENTITLEMENT]
