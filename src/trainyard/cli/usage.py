"""`trainyard usage`: who used how many GPU-hours, within their entitlement or borrowed, how long they waited, and
how their TrainJobs ended, read from the platform's Prometheus."""

from __future__ import annotations

import time
from typing import NoReturn, Optional

import typer

from trainyard.cluster.spec import ClusterSpec

usage_commands = typer.Typer()
EXIT_UNREADABLE = 2


@usage_commands.command("usage")
def usage_command(
    since: str = typer.Option("7d", "--since", help="the window: this long before --until (90m, 36h, 7d, 2w)"),
    until: Optional[str] = typer.Option(None, "--until", help="the window's end, RFC 3339 (default: now)"),
    by: str = typer.Option("tenant", "--by", help="group by tenant, queue, runtime or priority"),
    output: str = typer.Option("table", "-o", "--output", help="table, json (one object per group) or csv"),
    prometheus: Optional[str] = typer.Option(None, "--prometheus", help="the platform's Prometheus URL (default: "
                                             "$TRAINYARD_PROMETHEUS, else the local cluster's)"),
    name: str = typer.Option(ClusterSpec().name, "--name", help="the local cluster whose Prometheus is read"),
) -> None:
    """GPU-hours (within entitlement and borrowed), queue wait p50/p95, TrainJobs completed and failed."""
    from trainyard.errors import TrainyardError
    from trainyard.timestamps import parse_time
    from trainyard.usage import account, prometheus as reader, render

    def refuse(message: str) -> NoReturn:
        typer.echo(f"Error: {message}", err=True)
        raise typer.Exit(EXIT_UNREADABLE)

    if by not in account.GROUPINGS:
        refuse(f"--by {by!r}: use one of {', '.join(account.GROUPINGS)}")
    if output not in render.FORMATS:
        refuse(f"-o {output!r}: use one of {', '.join(render.FORMATS)}")
    try:
        span = render.parse_duration(since)
        end = time.time() if until is None else parse_time(until).timestamp()
    except ValueError as exc:
        refuse(str(exc) if "--since" in str(exc) else f"--until {until!r} is not an RFC 3339 time "
               f"(such as 2026-11-27T09:00:00Z): {exc}")
    try:
        server = reader.Prometheus(reader.resolve_url(prometheus, name))
        record = reader.read_record(server, end - span, end)
        budgets = budget_forecasts(server, record) if by == "tenant" else {}
    except TrainyardError as exc:
        refuse(str(exc))
    typer.echo(render.render(output, by, account.account(record, by), end - span, end, budgets))


def budget_forecasts(server, record) -> dict[str, dict]:
    """Tenant -> its budget this period (spent so far, state, when it runs out at the period's pace); the
    period may reach back before the window, so it is read on its own."""
    import datetime as dt

    from trainyard.usage import budgets as B, prometheus as reader

    if not record.budgets:
        return {}
    now = dt.datetime.fromtimestamp(record.until, dt.timezone.utc)
    earliest = min(B.period_bounds(b.period, now)[0] for b in record.budgets.values()).timestamp()
    spans = record.pods if earliest >= record.since else reader.read_pod_spans(server, earliest, record.until,
                                                                                sorted(record.budgets))
    out = {}
    for namespace, budget in record.budgets.items():
        start = B.period_bounds(budget.period, now)[0].timestamp()
        spent = sum(s.held_within(start, record.until) for s in spans if s.namespace == namespace) / 3600
        out[record.tenancy(namespace).tenant] = B.forecast(budget, spent, now)
    return out


def register(app: typer.Typer) -> None:
    for info in usage_commands.registered_commands:
        app.registered_commands.append(info)
