"""`trainyard platform up | preview | destroy | validate | whatif`: thin Typer commands over trainyard.stack_deploy,
the stack checks and trainyard.whatif (`validate` and `whatif` run offline: no Pulumi, no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from trainyard import stack_deploy

platform_app = typer.Typer(help="The platform program (Pulumi) on one environment's stack.", no_args_is_help=True)
console = Console()
STACK = typer.Option(stack_deploy.LOCAL_STACK, "--stack", "-s", help="Stack = environment (stacks/Pulumi.<stack>.yaml).")
CLUSTER = typer.Option(stack_deploy.DEFAULT_CLUSTER, "--cluster",
                       help="The local cluster a local-controllers stack (the local stack) deploys onto.")
EXTRA = typer.Argument(None, help="Extra pulumi flags (after --).")


def _guarded(action, *args) -> None:
    try:
        action(*args)
    except stack_deploy.StackError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1)


@platform_app.command("up")
def up(stack: str = STACK, cluster: str = CLUSTER, extra: Optional[List[str]] = EXTRA) -> None:
    """`pulumi up` of the stack (non-interactive), then a refresh."""
    _guarded(stack_deploy.up, stack, extra or [], cluster)


@platform_app.command("preview")
def preview(stack: str = STACK, cluster: str = CLUSTER, extra: Optional[List[str]] = EXTRA) -> None:
    """`pulumi preview` of the stack (add `-- --policy-pack platform/policy_pack` for the guardrails). When the working
    copy changes a scheduling setting (queues, quotas, priority classes, scheduler, cluster), the what-if of that
    change against the last commit comes first (`trainyard platform whatif`)."""
    from trainyard.whatif.run import preview_summary

    path = stack_deploy.stack_file(stack)
    summary = preview_summary(path, stack_deploy.repo_root()) if path.is_file() else None
    if summary:
        typer.echo(summary)
    moves = _catalog_moves_text(stack)
    if moves:
        typer.echo(moves)
    _guarded(stack_deploy.run, stack, "preview", extra or [], cluster)


def _catalog_moves_text(stack: str) -> str:
    from trainyard.upgrade.preflight import catalog_preview

    try:
        kubeconfig = stack_deploy.stack_kubeconfig(stack)
    except stack_deploy.StackError as exc:
        return f"catalog moves not checked against the cluster: {exc}"
    return catalog_preview(stack_deploy.stack_file(stack), kubeconfig)


@platform_app.command("destroy")
def destroy(stack: str = STACK, cluster: str = CLUSTER) -> None:
    """`pulumi destroy` of the stack (CRDs are retained unless the stack opts out)."""
    _guarded(stack_deploy.run, stack, "destroy", [], cluster)


@platform_app.command("validate")
def validate(stack: str = STACK) -> None:
    """Check the stack file offline with the same rules `pulumi up` applies; exit 1 on errors."""
    code = stack_deploy.validate(stack, echo=typer.echo)
    if code:
        raise typer.Exit(code)


@platform_app.command("usage-config")
def usage_config(out: Path = typer.Option(Path("usage-config"), "--out", help="directory to write the files to")) -> None:
    """Files that make a platform's own Prometheus and kube-state-metrics carry the usage record (what `trainyard
    usage`, `report --since` and the budget loop read): kube-state-metrics' custom-resource metrics, flags and
    ClusterRole, and Prometheus' recording rules."""
    from trainyard.cluster.monitoring import external_files

    out.mkdir(parents=True, exist_ok=True)
    for name, text in external_files().items():
        (out / name).write_text(text)
        typer.echo(f"wrote {out / name}")


@platform_app.command("whatif")
def whatif(
    stack: str = STACK,
    proposed: Optional[Path] = typer.Option(None, "--proposed", help="A proposed stack file (default: the working "
                                            "copy of stacks/Pulumi.<stack>.yaml against its last commit)."),
    trace: str = typer.Option("generated", "--trace", help="generated (seeded, sized for the stack in effect), "
                              "recorded, or a trace file (JSON: {\"jobs\": [...]})."),
    seed: int = typer.Option(0, "--seed", help="Seeds the generated trace and the model's tie-breaks."),
    jobs: int = typer.Option(150, "--jobs", min=1, help="Jobs in a generated trace."),
    output: str = typer.Option("table", "--output", "-o", help="table or json"),
    save_trace: Optional[Path] = typer.Option(None, "--save-trace", help="Also write the replayed workload to this "
                                              "file, as a trace file --trace reads back (to edit and replay)."),
    engine: str = typer.Option("model", "--engine", help="model (trainyard's model of vc-scheduler, seconds) or "
                               "cluster (each side on a throw-away local cluster shaped as its stack, with the real "
                               "vc-scheduler, JobSet and trainyard controllers; minutes)."),
    speedup: float = typer.Option(4.0, "--speedup", min=1.0, help="With --engine cluster: trace seconds per cluster "
                                  "second (arrivals and run times are divided by it, figures reported in trace seconds)."),
    port_base: int = typer.Option(28200, "--port-base", help="With --engine cluster: first loopback port of the "
                                  "throw-away cluster (trainyard-whatif-<port base>)."),
) -> None:
    """Replay one workload under the stack in effect and under the proposed one; print what changes: GPU allocation,
    each tenant's share against its entitlement, waits by tenant and job size, jobs that could never run."""
    from trainyard.errors import TrainyardError
    from trainyard.whatif.cluster_plan import EngineLimit
    from trainyard.whatif.run import ENGINES, what_if_files
    from trainyard.whatif.text import caveats, render
    from trainyard.whatif.workload import trace_document

    if output not in ("table", "json"):
        console.print(f"[red]error:[/] --output {output!r}: use table or json")
        raise typer.Exit(2)
    if engine not in ENGINES:
        console.print(f"[red]error:[/] --engine {engine!r}: use {' or '.join(ENGINES)}")
        raise typer.Exit(2)
    path = stack_deploy.stack_file(stack)
    if not path.is_file():
        console.print(f"[red]error:[/] {stack_deploy.missing_stack_message(stack)}")
        raise typer.Exit(2)
    try:
        result = what_if_files(path, stack_deploy.repo_root(), proposed, trace, seed, jobs, engine=engine,
                               speedup=speedup, port_base=port_base, echo=lambda line: typer.echo(line, err=True))
    except (TrainyardError, EngineLimit) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2)
    if save_trace is not None:
        save_trace.write_text(json.dumps(trace_document(result.trace), indent=1) + "\n")
    if output == "json":
        typer.echo(json.dumps({**result.result, "proposed": {**result.result["proposed"], "changes": result.changes,
                                                             "caveats": caveats(result.result, result.changes)}},
                              indent=2))
    else:
        typer.echo(render(result.result, result.changes), nl=False)


@platform_app.command("preflight")
def preflight(
    stack: str = STACK,
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="The cluster to examine (default: the "
                                             "stack's trainyard:kubeconfig)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="Only this namespace's TrainJobs."),
    output: str = typer.Option("text", "--output", "-o", help="text or json"),
) -> None:
    """Run with the new version before `trainyard platform up` upgrades a stack: what it does to every TrainJob in the
    cluster (built again as the new controller builds it; a suspended one's new JobSet tried with a dry-run apply),
    and what moving a tenant to the catalog release the stack now pins does to its runtimes and TrainJobs in
    flight; what the operator must do first. Writes nothing; exit 1 when a TrainJob needs the operator."""
    from trainyard.controller.runtime.transport import ApiError
    from trainyard.errors import TrainyardError
    from trainyard.upgrade import catalog_moves
    from trainyard.upgrade.preflight import catalog_survey, report, stack_tenants, survey
    from trainyard.upgrade.text import render

    if output not in ("text", "json"):
        console.print(f"[red]error:[/] --output {output!r}: use text or json")
        raise typer.Exit(2)
    try:
        target = kubeconfig or stack_deploy.stack_kubeconfig(stack)
        tenants, catalog = stack_tenants(stack_deploy.stack_file(stack))
    except (stack_deploy.StackError, TrainyardError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    from trainyard.capacity.live import connect

    tenants = [t for t in tenants if namespace in (None, t.namespace)]
    try:
        api = connect(target)
        findings = survey(api, namespace)
        moves, moved_jobs = catalog_survey(api, tenants, catalog, findings)
    except (ApiError, OSError) as exc:
        console.print(f"[red]error:[/] cannot examine the cluster of {target}: {exc}")
        raise typer.Exit(2)
    summary = report(findings, moves, moved_jobs)
    if output == "json":
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo(render(findings) + catalog_moves.render(moves, moved_jobs), nl=False)
    if summary["summary"]["blocking"]:
        raise typer.Exit(1)
