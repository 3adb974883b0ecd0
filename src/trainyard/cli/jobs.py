"""CLI: `trainyard render` and `trainyard validate` (pure: files in, YAML / messages out).

Bad input (unreadable file, malformed YAML, wrong kind, wrongly typed field) prints one line
`Error: <field>: <problem and fix>` on stderr and exits with status 2 - never a traceback.
Both are strict like `kubectl --validate=strict` (`strict.py`): unknown fields, bad quantities and
zero node counts are errors (unknown fields only warn with `--lenient`). Errors and warnings go to
stderr, results to stdout; `-o json` prints one JSON document for machines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
import yaml

from trainyard import yaml_input
from trainyard.errors import TrainyardError
from trainyard.toolchain.k8s_fields import pinned_job_fields
from trainyard.timestamps import now_time
from trainyard.toolchain.flux_templates import read_flux_templates

from trainyard.controller import constants as C
from trainyard.controller import k8s
from trainyard.controller.admission import validate_runtime, validate_trainjob
from trainyard.controller.build import build_objects
from trainyard.controller.errors import ControllerError, InputError
from trainyard.controller.inputs import load_runtime, load_trainjob
from trainyard.controller.schema import FieldError
from trainyard.controller.strict import strict_problems
from trainyard.controller.plugins.framework import StatusServerConfig
from trainyard.controller.status import build_status

from .runtime_choice import catalog_runtime, pick_runtime

EXIT_INVALID = 1
EXIT_BAD_INPUT = 2


class _BadInput(TrainyardError):
    """The input file cannot be read or parsed (exit code 2)."""


def _load_stream(path: Path) -> list[dict]:
    try:
        docs = [d for d in yaml_input.load_all(yaml_input.read_text(path), str(path)) if d is not None]
    except yaml_input.YamlInputError as err:
        raise _BadInput(str(err)) from None
    for doc in docs:
        if not isinstance(doc, dict):
            raise _BadInput(f"{path}: every YAML document must be a mapping (an object with apiVersion and kind)")
    expanded = []
    for doc in docs:
        expanded += [i for i in doc.get("items") or [] if isinstance(i, dict)] if str(doc.get("kind", "")).endswith("List") else [doc]
    return expanded


def _one(path: Path, kinds: tuple[str, ...]) -> dict:
    return _some(path, kinds, many=False)[0]


def _some(path: Path, kinds: tuple[str, ...], many: bool = True) -> list[dict]:
    docs = _load_stream(path)
    matching = [d for d in docs if d.get("kind") in kinds]
    if not matching or (len(matching) > 1 and not many):
        found = ", ".join(str(d.get("kind")) for d in docs) or "nothing"
        raise _BadInput(f"{path}: expected exactly one {' or '.join(kinds)}, found {found}; "
                        f"pass a file holding {'one' if not many else 'a'} {kinds[0]}")
    return matching


def _cluster(paths: Optional[List[Path]]) -> list[dict]:
    objects: list[dict] = []
    for path in paths or []:
        objects += _load_stream(path)
    return objects


def _fail(message: str, output: str = "text") -> None:
    if output == "json":
        typer.echo(json.dumps({"ok": False, "errors": [{"message": message}], "warnings": []}))
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


TRAINJOB = typer.Argument(..., metavar="TRAINJOB.yaml", help="The TrainJob manifest.")
RUNTIME = typer.Option(None, "--runtime", help="The (Cluster)TrainingRuntime it references, or a file of several "
                       "(e.g. `trainyard catalog show 1.2.0` output): the one runtimeRef names is used.")
CATALOG = typer.Option(None, "--catalog", metavar="VERSION",
                       help="Take the runtime runtimeRef names from this catalog release (instead of --runtime).")
TENANT = typer.Option(None, "--tenant", help="With --catalog: the tenant (stacks/) whose TrainingRuntime to use.")
CLUSTER = typer.Option(None, "--cluster", help="Objects already in the cluster (repeatable).")
LENIENT = typer.Option(False, "--lenient", help="Unknown (pruned) fields are warnings, not errors.")
OUTPUT = typer.Option("text", "--output", "-o", help="text, or json (one JSON document on stdout).")


def _inputs(trainjob_file: Path, runtime: Optional[Path], catalog: Optional[str], tenant: Optional[str]
            ) -> tuple[dict, dict, list[dict]]:
    """The TrainJob, the runtime it names (from --runtime or --catalog, exactly one of them) and the
    platform objects that come with a catalog tenant runtime (its Queue, PriorityClass)."""
    if (runtime is None) == (catalog is None):
        raise _BadInput("pass --runtime FILE or --catalog VERSION (one of them)")
    if tenant and not catalog:
        raise _BadInput("--tenant goes with --catalog VERSION")
    trainjob = _one(trainjob_file, (C.TRAINJOB_KIND,))
    if catalog:
        return (trainjob, *catalog_runtime(trainjob, catalog, tenant))
    assert runtime is not None  # exactly one of --runtime and --catalog, checked above
    return trainjob, pick_runtime(_some(runtime, C.RUNTIME_KINDS), trainjob, str(runtime)), []


def _strict(trainjob: dict, runtime: dict, lenient: bool) -> tuple[list[FieldError], list[str]]:
    """Strict errors and warnings; `lenient` turns unknown fields into warnings."""
    from trainyard.runtimes import CatalogError, load_catalog

    try:
        catalog = load_catalog()
    except CatalogError:
        catalog = None  # no catalog at hand: the deprecation label still warns
    found = strict_problems(trainjob, runtime, catalog, pinned_job_fields())
    errors, warnings = found["errors"], list(found["warnings"])
    if lenient:
        warnings += [str(e) for e in found["unknown"]]
    else:
        errors = found["unknown"] + errors
    return errors, warnings


def _report(errors: list, warnings: list[str], output: str, extra: Optional[dict] = None) -> None:
    if output == "json":
        typer.echo(json.dumps({"ok": not errors, **(extra or {}), "errors": [_json_error(e) for e in errors],
                               "warnings": warnings}, indent=2))
    for warning in warnings:
        typer.echo(f"Warning: {warning}", err=True)
    for error in errors:
        typer.echo(f"Error: {error}", err=True)


def _json_error(error) -> dict:
    if isinstance(error, FieldError):
        return {"field": error.field, "type": error.kind, "message": error.message, "text": str(error)}
    return {"message": str(error)}


def _check_output(output: str) -> None:
    if output not in ("text", "json"):
        raise _BadInput(f"--output {output!r}: use text or json")


def render(
    trainjob_file: Path = TRAINJOB,
    runtime: Optional[Path] = RUNTIME,
    cluster: Optional[List[Path]] = CLUSTER,
    status: bool = typer.Option(False, "--status", help="Print the TrainJob with the .status one reconcile writes."),
    now: Optional[str] = typer.Option(None, "--now", help="Current time for --status (RFC 3339; default: now)."),
    status_server_url: Optional[str] = typer.Option(
        None, "--status-server-url", help="Render as with the TrainJobStatus gate on: pods report to https://host:port."),
    status_server_ca: Optional[Path] = typer.Option(None, "--status-server-ca", help="CA file for --status-server-url."),
    catalog: Optional[str] = CATALOG,
    tenant: Optional[str] = TENANT,
    lenient: bool = LENIENT,
    output: str = OUTPUT,
) -> None:
    """Print, as a YAML stream (or JSON), every object one reconcile would apply (strict input checks, no admission)."""
    try:
        _check_output(output)
        status_server = _status_server(status_server_url, status_server_ca)
        trainjob, runtime_obj, platform = _inputs(trainjob_file, runtime, catalog, tenant)
        existing = platform + _cluster(cluster)
        errors, warnings = _strict(trainjob, runtime_obj, lenient)
        if errors:
            _report(errors, warnings, output)
            raise typer.Exit(EXIT_BAD_INPUT)
        for warning in warnings:
            typer.echo(f"Warning: {warning}", err=True)
        if status:
            jobset = k8s.find_object(existing, "JobSet", k8s.name_of(trainjob), k8s.namespace_of(trainjob))
            stamp = now or now_time()
            objects = [{**trainjob, "status": build_status(trainjob, jobset, stamp)}]
        else:
            objects = build_objects(trainjob, runtime_obj, existing, status_server=status_server,
                                    flux_templates=read_flux_templates)
        typer.echo(json.dumps(objects, indent=2) if output == "json" else _dump(objects), nl=output == "json")
    except _BadInput as err:
        _fail(str(err), output)
    except ControllerError as err:
        _fail(str(err) if err.field else f"spec: {err}", output)
    except ValueError as err:  # e.g. an unparsable --now
        _fail(f"--now: {err}; use RFC 3339 such as 2025-01-02T03:04:05Z", output)


def validate(
    trainjob_file: Path = TRAINJOB,
    runtime: Optional[Path] = RUNTIME,
    cluster: Optional[List[Path]] = CLUSTER,
    catalog: Optional[str] = CATALOG,
    tenant: Optional[str] = TENANT,
    lenient: bool = LENIENT,
    output: str = OUTPUT,
) -> None:
    """Strict checks, then admission for creating the runtime and the TrainJob; exit 1 on any error."""
    try:
        _check_output(output)
        trainjob, runtime_obj, platform = _inputs(trainjob_file, runtime, catalog, tenant)
        existing = platform + _cluster(cluster)
        load_trainjob(trainjob)  # wrongly typed fields are bad input (exit 2), not admission errors
        load_runtime(runtime_obj)
    except (_BadInput, InputError) as err:
        _fail(str(err), output)
        return
    errors, warnings = _strict(trainjob, runtime_obj, lenient)
    for result in (validate_runtime(runtime_obj), validate_trainjob(trainjob, runtime_obj, None, existing,
                                                                          flux_templates=read_flux_templates)):
        warnings += [w for w in result.warnings if w not in warnings]
        errors += [e for e in result.errors if e.field not in {s.field for s in errors}]
    meta = runtime_obj.get("metadata") or {}
    _report(errors, warnings, output, {"runtime": {"kind": runtime_obj.get("kind"), "name": meta.get("name"),
                                                   "namespace": meta.get("namespace")}})
    if errors:
        raise typer.Exit(EXIT_INVALID)
    if output == "text":
        typer.echo("OK")


def register(app: typer.Typer) -> None:
    """Add `render` and `validate` as top-level commands of the trainyard CLI."""
    app.command("render")(render)
    app.command("validate")(validate)
