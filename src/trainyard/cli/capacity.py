"""`trainyard fit` and `trainyard report`: the live platform's answer for one TrainJob, and its capacity report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from trainyard import yaml_input
from trainyard.controller.runtime.transport import ApiError
from trainyard.errors import TrainyardError

# The commands are defined on this group and added to the top-level app by `register` (top-level commands).
capacity_commands = typer.Typer()


def _load_trainjob(path: Path) -> dict:
    try:
        docs = [d for d in yaml_input.load_all(yaml_input.read_text(path), str(path)) if isinstance(d, dict)]
    except yaml_input.YamlInputError as err:
        raise typer.BadParameter(str(err)) from None
    found = [d for d in docs if d.get("kind") == "TrainJob"]
    if len(found) != 1:
        raise typer.BadParameter(f"{path}: expected exactly one TrainJob, found {len(found)}")
    return found[0]


def _api_error(exc: ApiError) -> str:
    from trainyard.capacity.live import _message

    return _message(exc)


@capacity_commands.command("fit")
def fit_command(
    trainjob_file: Path = typer.Argument(..., help="the TrainJob YAML to try"),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="default: the file's, else 'default'"),
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="default: $KUBECONFIG / ~/.kube/config"),
    output: str = typer.Option("text", "--output", "-o", help="text or json"),
    default_run: float = typer.Option(3600.0, "--default-run", min=1.0, help="seconds a job runs in all when its "
                                      "trainerStatus gives no estimate (for the start estimate of a job that waits)"),
    explain: bool = typer.Option(False, "--explain", help="for a job that waits or can never start: the smallest "
                                 "changes that make it fit now (fewer nodes, a wider topology tier, after which "
                                 "running jobs end; higher granted priority classes)"),
) -> None:
    """Dry-run a TrainJob against the live platform: admitted? queue room? does the gang fit the free GPUs now?

    Nothing is written (server-side dry-run only). Prints the checks in order and the first blocking reason;
    exit 0 if it would run now, 1 if it would wait, 2 if it would be refused."""
    from trainyard.capacity.fit_check import EXIT_REFUSED, run_fit  # the model and numpy: only for fit

    trainjob = _load_trainjob(trainjob_file)
    trainjob.setdefault("metadata", {})
    trainjob["metadata"]["namespace"] = namespace or trainjob["metadata"].get("namespace") or "default"
    try:
        lines, code = run_fit(trainjob, kubeconfig, default_run, explain)
    except TrainyardError as err:
        typer.echo(f"Error: {err}", err=True)
        raise typer.Exit(EXIT_REFUSED)
    except ApiError as exc:
        typer.echo(f"Error: the API server refused a read: {_api_error(exc)}", err=True)
        raise typer.Exit(EXIT_REFUSED)
    if output == "json":
        typer.echo(json.dumps({"exitCode": code, "checks": lines}, indent=2))
    else:
        for line in lines:
            typer.echo(line)
    raise typer.Exit(code)


@capacity_commands.command("report")
def report_command(
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="default: $KUBECONFIG / ~/.kube/config"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write index.html, report.json and plots here"),
    all_rows: bool = typer.Option(False, "--all", help="print every row of every table (default: the first 25 of "
                                                       "the nodes, pending gangs and quota rows)"),
    default_run: float = typer.Option(3600.0, "--default-run", min=1.0, help="seconds a job runs in all when its "
                                      "trainerStatus gives no estimate (for the pending gangs' start estimates)"),
    since: Optional[str] = typer.Option(None, "--since", help="also the usage over this window (7d, 36h), read "
                                        "from Prometheus: GPU-hours per tenant and, with --out, its plots"),
    prometheus: Optional[str] = typer.Option(None, "--prometheus", help="with --since: the platform's Prometheus "
                                             "URL (default: $TRAINYARD_PROMETHEUS, else the local cluster's)"),
    name: str = typer.Option("trainyard", "--name", help="with --since: the local cluster whose Prometheus is read"),
) -> None:
    """Capacity and queue report of a live platform: GPUs by node and rack, queues, pending gangs, tenant quotas;
    with --since, the GPU usage of each tenant over that window."""
    from trainyard.capacity import live

    every_row = all_rows or out is not None
    try:
        api = live.connect(kubeconfig)
        reading = live.Background(live.snapshot, api, podgroup_events=every_row)
        never = live.Background(live.never_starting, api)
        # what the report then needs is imported while the lists are read (a second of CPU on a busy machine)
        import rich.table  # noqa: F401 - the tables' renderer

        from trainyard.capacity import estimates  # noqa: F401 - the start estimates' count
        from trainyard.capacity.report import TEXT_ROWS, build_report, render_text, unadmitted_shown

        snap = reading.result()
        snap.never_starting = never.result()
        if not every_row:  # why the shown gangs wait: their namespaces' Events, not every Event of the cluster
            snap.events = live.events_in(api, unadmitted_shown(snap, TEXT_ROWS))
        words = start_estimates(api, snap, default_run)
    except TrainyardError as err:
        typer.echo(f"Error: {err}", err=True)
        raise typer.Exit(2)
    except ApiError as exc:
        typer.echo(f"Error: the API server refused a read: {_api_error(exc)}", err=True)
        raise typer.Exit(2)
    report = build_report(snap, start_estimates=words)
    typer.echo(render_text(report, limit=None if all_rows else TEXT_ROWS))
    window = None if since is None else usage_window(since, prometheus, name)
    if window is not None:
        typer.echo("\n" + window.table)
    if out is not None:
        from trainyard.capacity.html import write_html

        extra = {} if window is None else window.write(out)
        path = write_html(report, out, **extra)
        typer.echo(f"\nwrote {path}")


def usage_window(since: str, prometheus: str | None, name: str):
    """The usage part of `report --since` (exit 2 with the reason when Prometheus cannot be read)."""
    from trainyard.usage.report_part import UsageWindow

    try:
        return UsageWindow.read(since, prometheus, name)
    except (TrainyardError, ValueError) as err:
        typer.echo(f"Error: {err}", err=True)
        raise typer.Exit(2)


def start_estimates(api, snap, default_run_s: float) -> dict[str, str] | None:
    """PodGroup -> its start estimate's words; None (no column) above `estimates.MOST_PENDING` waiting gangs."""
    from trainyard.capacity import estimates
    from trainyard.capacity.live import estimate_inputs
    from trainyard.scheduling.estimate import phrase

    if not 0 < estimates.waiting_count(snap.pod_groups) <= estimates.MOST_PENDING:
        return None  # decided before listing every TrainJob: at 10,000 of them that list alone takes seconds
    return {key: phrase(found) for key, found in estimates.estimates(estimate_inputs(api, snap, default_run_s)).items()}


def register(app: typer.Typer) -> None:
    """Add `fit` and `report` as top-level commands of the trainyard CLI."""
    for info in capacity_commands.registered_commands:
        app.registered_commands.append(info)
