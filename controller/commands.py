"""CLI: `trainyard render` and `trainyard validate` (pure: files in, YAML / messages out).

Bad input (unreadable file, malformed YAML, wrong kind, wrongly typed field) prints one line
`Error: <field>: <problem and fix>` and exits with status 2 - never a traceback.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import List, Optional

import typer
import yaml

from . import constants as C
from . import k8s
from .admission import validate_runtime, validate_trainjob
from .build import build_objects
from .errors import ControllerError, InputError
from .inputs import load_runtime, load_trainjob
from .plugins.trainjobstatus import StatusServerConfig
from .status import build_status

EXIT_INVALID = 1
EXIT_BAD_INPUT = 2


class _BadInput(Exception):
    pass


def _load_stream(path: Path) -> list[dict]:
    try:
        text = path.read_text()
    except OSError as err:
        raise _BadInput(f"{path}: cannot read file ({err.strerror}); check the path")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise _BadInput(f"{path}: malformed YAML{where}: {getattr(err, 'problem', None) or err}; fix the YAML syntax")
    for doc in docs:
        if not isinstance(doc, dict):
            raise _BadInput(f"{path}: every YAML document must be a mapping (an object with apiVersion and kind)")
    expanded = []
    for doc in docs:
        expanded += [i for i in doc.get("items") or [] if isinstance(i, dict)] if str(doc.get("kind", "")).endswith("List") else [doc]
    return expanded


def _one(path: Path, kinds: tuple[str, ...]) -> dict:
    docs = _load_stream(path)
    matching = [d for d in docs if d.get("kind") in kinds]
    if len(matching) != 1:
        found = ", ".join(str(d.get("kind")) for d in docs) or "nothing"
        raise _BadInput(f"{path}: expected exactly one {' or '.join(kinds)}, found {found}; "
                        f"pass a file holding one {kinds[0]}")
    return matching[0]


def _cluster(paths: Optional[List[Path]]) -> list[dict]:
    objects: list[dict] = []
    for path in paths or []:
        objects += _load_stream(path)
    return objects


def _fail(message: str) -> None:
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _dump(objects: list[dict]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False)


def _status_server(url: Optional[str], ca_file: Optional[Path]) -> Optional[StatusServerConfig]:
    if url is None and ca_file is None:
        return None
    if not (url and ca_file):
        raise _BadInput("--status-server-url and --status-server-ca go together")
    if not url.startswith("https://"):
        raise _BadInput(f"--status-server-url {url!r}: the status server is HTTPS; use https://host:port")
    try:
        return StatusServerConfig(base_url=url, ca_pem=ca_file.read_text(encoding="utf-8"))
    except OSError as err:
        raise _BadInput(f"--status-server-ca {ca_file}: {err.strerror}") from None


def render(
    trainjob_file: Path = typer.Argument(..., metavar="TRAINJOB.yaml", help="The TrainJob manifest."),
    runtime: Path = typer.Option(..., "--runtime", help="The (Cluster)TrainingRuntime it references."),
    cluster: Optional[List[Path]] = typer.Option(None, "--cluster", help="Objects already in the cluster (repeatable)."),
    status: bool = typer.Option(False, "--status", help="Print the TrainJob with the .status one reconcile writes."),
    now: Optional[str] = typer.Option(None, "--now", help="Current time for --status (RFC 3339; default: now)."),
    status_server_url: Optional[str] = typer.Option(
        None, "--status-server-url", help="Render as with the TrainJobStatus gate on: pods report to https://host:port."),
    status_server_ca: Optional[Path] = typer.Option(None, "--status-server-ca", help="CA file for --status-server-url."),
) -> None:
    """Print, as a YAML stream, every object one reconcile would apply (no admission checks)."""
    try:
        status_server = _status_server(status_server_url, status_server_ca)
        trainjob = _one(trainjob_file, (C.TRAINJOB_KIND,))
        runtime_obj = _one(runtime, C.RUNTIME_KINDS)
        existing = _cluster(cluster)
        if status:
            jobset = k8s.find_object(existing, "JobSet", k8s.name_of(trainjob), k8s.namespace_of(trainjob))
            stamp = now or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            typer.echo(_dump([{**trainjob, "status": build_status(trainjob, jobset, stamp)}]), nl=False)
            return
        typer.echo(_dump(build_objects(trainjob, runtime_obj, existing, status_server=status_server)), nl=False)
    except _BadInput as err:
        _fail(str(err))
    except ControllerError as err:
        _fail(str(err) if err.field else f"spec: {err}")
    except ValueError as err:  # e.g. an unparsable --now
        _fail(f"--now: {err}; use RFC 3339 such as 2025-01-02T03:04:05Z")


def validate(
    trainjob_file: Path = typer.Argument(..., metavar="TRAINJOB.yaml", help="The TrainJob manifest."),
    runtime: Path = typer.Option(..., "--runtime", help="The (Cluster)TrainingRuntime it references."),
    cluster: Optional[List[Path]] = typer.Option(None, "--cluster", help="Objects already in the cluster (repeatable)."),
) -> None:
    """Run admission for creating the runtime, then the TrainJob; exit 1 on any error."""
    try:
        trainjob = _one(trainjob_file, (C.TRAINJOB_KIND,))
        runtime_obj = _one(runtime, C.RUNTIME_KINDS)
        existing = _cluster(cluster)
        load_trainjob(trainjob)  # wrongly typed fields are bad input (exit 2), not admission errors
        load_runtime(runtime_obj)
    except _BadInput as err:
        _fail(str(err))
        return
    except InputError as err:
        _fail(str(err))
        return
    failed = False
    for result in (validate_runtime(runtime_obj), validate_trainjob(trainjob, runtime_obj, None, existing)):
        for warning in result.warnings:
            typer.echo(f"Warning: {warning}")
        for error in result.errors:
            typer.echo(f"Error: {error}")
            failed = True
    if failed:
        raise typer.Exit(EXIT_INVALID)
    typer.echo("OK")


def register(app: typer.Typer) -> None:
    """Add `render` and `validate` as top-level commands of the trainyard CLI."""
    app.command("render")(render)
    app.command("validate")(validate)
