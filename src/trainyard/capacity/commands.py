"""`trainyard fit` and `trainyard report`: the live platform's answer for one TrainJob, and its capacity report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from kubernetes.client.exceptions import ApiException

from trainyard import k8s as K
from trainyard import yaml_input
from trainyard.errors import TrainyardError

EXIT_FITS, EXIT_WAITS, EXIT_REFUSED = 0, 1, 2

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


def _api_error(exc: ApiException) -> str:
    from .live import _message

    return _message(exc)


@capacity_commands.command("fit")
def fit_command(
    trainjob_file: Path = typer.Argument(..., help="the TrainJob YAML to try"),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="default: the file's, else 'default'"),
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="default: $KUBECONFIG / ~/.kube/config"),
    output: str = typer.Option("text", "--output", "-o", help="text or json"),
) -> None:
    """Dry-run a TrainJob against the live platform: admitted? queue room? does the gang fit the free GPUs now?

    Nothing is written (server-side dry-run only). Prints the checks in order and the first blocking reason;
    exit 0 if it would run now, 1 if it would wait, 2 if it would be refused."""
    trainjob = _load_trainjob(trainjob_file)
    trainjob.setdefault("metadata", {})
    trainjob["metadata"]["namespace"] = namespace or trainjob["metadata"].get("namespace") or "default"
    try:
        lines, code = run_fit(trainjob, kubeconfig)
    except TrainyardError as err:
        typer.echo(f"Error: {err}", err=True)
        raise typer.Exit(EXIT_REFUSED)
    except ApiException as exc:
        typer.echo(f"Error: the API server refused a read: {_api_error(exc)}", err=True)
        raise typer.Exit(EXIT_REFUSED)
    if output == "json":
        typer.echo(json.dumps({"exitCode": code, "checks": lines}, indent=2))
    else:
        for line in lines:
            typer.echo(line)
    raise typer.Exit(code)


def run_fit(trainjob: dict, kubeconfig: str | None) -> tuple[list[str], int]:
    """The printed lines and the exit code."""
    from trainyard.controller.build import build_objects
    from trainyard.controller.errors import ControllerError

    from . import live
    from .fit import REFUSED, check_quota, exit_code, fit, gang_from_objects, priority_note
    from .model import nodes_from, pending_reason, pod_group_key, queue_uses

    api = live.connect(kubeconfig)
    ns, name = trainjob["metadata"]["namespace"], trainjob["metadata"].get("name", "")
    lines = [f"TrainJob {ns}/{name}"]
    errors, warnings = live.admission(api, trainjob, quotas=False)
    lines += [f"  warning: {w}" for w in warnings]
    if errors:
        return lines + [f"refused: admission: {e}" for e in errors], EXIT_REFUSED
    runtime = live.fetch_runtime(api, trainjob)
    if runtime is None:
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        return lines + [f"refused: runtime {ref.get('kind', 'ClusterTrainingRuntime')} {ref.get('name')} not found"], \
            EXIT_REFUSED
    try:
        objects = build_objects(trainjob, runtime, live.namespace_object(api, ns))
        gang = gang_from_objects(objects)
    except (ControllerError, ValueError) as err:
        return lines + [f"refused: the controller cannot build it: {err}"], EXIT_REFUSED
    topology = f", networkTopology {gang.topology}" if gang.topology else ""
    gang_line = (f"gang: {len(gang.pods)} pod{'s' if len(gang.pods) != 1 else ''}, {_resources(gang.total)}, "
                 f"{gang.queue_text}, priority class {gang.priority_class or '-'}{topology}")
    snap = live.snapshot(api, ns)
    never = check_quota(gang, snap.quotas)
    if never is not None and never.outcome == REFUSED:  # admission refuses it at create in these words
        return lines + [gang_line, never.line], exit_code(never)
    refusal = live.dry_run_create(api, trainjob, live.TRAINJOBS)
    if refusal:
        return lines + [f"refused: the API server: {refusal}"], EXIT_REFUSED
    lines.append("ok: admitted (trainyard admission; server-side dry-run create: RBAC, webhooks, quota on TrainJobs)")
    group = next((o for o in objects if o.get("kind") == "PodGroup"), None)
    if group is not None and group.get("apiVersion") == live.PODGROUPS.api_version:
        refusal = live.dry_run_create(api, group, live.PODGROUPS)
        if refusal and "cannot create resource" not in refusal:  # RBAC: only the controller creates PodGroups
            return lines + [f"refused: its PodGroup: {refusal}"], EXIT_REFUSED
    lines.append(gang_line)
    why = {pod_group_key(g): pending_reason(g, snap.events) for g in snap.pod_groups}
    queues = queue_uses(snap.queues, snap.pod_groups, snap.pods, why)
    nodes = nodes_from(snap.nodes, snap.pods, snap.hypernodes)
    verdicts = fit(gang, snap.quotas, queues, nodes)
    final = verdicts[-1]
    passed = {"quota": "ok: quota", "queue": "ok: queue"}
    for check in ("quota", "queue") if gang.in_volcano else ("quota",):
        if final.check == check:
            break
        lines.append(passed[check] + _queue_note(check, gang, queues))
    if final.check != "quota" and gang.in_volcano:
        lines.append("  " + priority_note(gang, queues.get(gang.queue or "default"), live.priority_values(api)))
    lines.append(final.line)
    return lines, exit_code(final)


def _queue_note(check: str, gang, queues) -> str:
    if check != "queue":
        return ""
    queue = queues.get(gang.queue or "default")
    gpus = (queue.capability.get(K.GPU_RESOURCE) if queue else None)
    if queue is None or gpus is None:
        return ""
    from .model import number

    return (f" {queue.name}: capability {K.GPU_RESOURCE} {number(gpus)}, allocated "
            f"{number(queue.allocated.get(K.GPU_RESOURCE, 0))}, this job needs {number(gang.total.get(K.GPU_RESOURCE, 0))}")


def _resources(values: dict) -> str:
    from .model import number

    return ", ".join(f"{k} {number(v)}" for k, v in sorted(values.items())) or "no requests"


@capacity_commands.command("report")
def report_command(
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="default: $KUBECONFIG / ~/.kube/config"),
    out: Optional[Path] = typer.Option(None, "--out", help="also write index.html, report.json and plots here"),
) -> None:
    """Capacity and queue report of a live platform: GPUs by node and rack, queues, pending gangs, tenant quotas."""
    from . import live
    from .report import build_report, render_text

    try:
        snap = live.snapshot(live.connect(kubeconfig))
    except TrainyardError as err:
        typer.echo(f"Error: {err}", err=True)
        raise typer.Exit(2)
    except ApiException as exc:
        typer.echo(f"Error: the API server refused a read: {_api_error(exc)}", err=True)
        raise typer.Exit(2)
    report = build_report(snap)
    typer.echo(render_text(report))
    if out is not None:
        from .html import write_html

        path = write_html(report, out)
        typer.echo(f"\nwrote {path}")


def register(app: typer.Typer) -> None:
    """Add `fit` and `report` as top-level commands of the trainyard CLI."""
    for info in capacity_commands.registered_commands:
        app.registered_commands.append(info)
