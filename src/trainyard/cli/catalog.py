"""``trainyard catalog ...``: list, show, diff, lint and move releases through their lifecycle.

Thin shell: read the catalog directory, call the pure functions, write only when
nothing raised. Bad input prints findings (file, runtime, fix) and exits 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import wraps
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from rich.console import Console
from rich.table import Table

from trainyard.problems import Problem
from trainyard.runtimes.model import CatalogTenant
from trainyard.runtimes import lifecycle, store
from trainyard.runtimes.diff import diff_releases, format_changes
from trainyard.runtimes.lint import errors, lint_catalog, lint_release, load_controller_checks
from trainyard.runtimes.model import DRAFT, RETIRED, Catalog, CatalogError, Finding
from trainyard.runtimes.publish import cluster_runtimes_of, render_release_runtimes, tenant_runtimes_of
from trainyard.platform.catalog_tenants import load_stack_tenants

STACKS_DIR_ENV = "TRAINYARD_STACKS_DIR"
_META_KEY = "trainyard.runtimes.options"

catalog_app = typer.Typer(
    help="The versioned catalog of training runtimes: list, show, diff, lint, new, release, deprecate, retire.",
    no_args_is_help=True,
)

_STATUS_STYLE = {"current": "bold green", "supported": "green", "deprecated": "yellow", "retired": "dim", "draft": "cyan"}


@dataclass(frozen=True)
class CatalogOptions:
    catalog_dir: Path
    stacks_dir: Path


@catalog_app.callback()
def _options(
    ctx: typer.Context,
    catalog_dir: Optional[Path] = typer.Option(
        None, "--catalog-dir", envvar=store.CATALOG_DIR_ENV, help="Catalog root (catalog.yaml, lock, releases/)."
    ),
    stacks_dir: Optional[Path] = typer.Option(
        None, "--stacks-dir", envvar=STACKS_DIR_ENV, help="Pulumi stack files with trainyard:tenants (default: <catalog dir>/../stacks)."
    ),
) -> None:
    root = (catalog_dir or store.default_catalog_dir()).resolve()
    ctx.meta[_META_KEY] = CatalogOptions(root, (stacks_dir or root.parent / "stacks").resolve())


def _opts(ctx: typer.Context) -> CatalogOptions:
    return ctx.meta[_META_KEY]


def _fail(findings: list[Problem] | tuple[Problem, ...]) -> None:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    for finding in findings:
        style = "red" if finding.severity == "error" else "yellow"
        console.print(f"[{style}]{finding.severity}[/{style}]: {finding}", markup=True)
    raise typer.Exit(1)


def _reporting_errors(command):
    """Turn CatalogError into printed findings and exit 1 (nothing has been written at that point)."""

    @wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CatalogError as err:
            _fail(err.findings)

    return wrapper


def _load(ctx: typer.Context) -> Catalog:
    return store.load_catalog(_opts(ctx).catalog_dir)


def _load_stacks(ctx: typer.Context, required: bool) -> dict[str, list[CatalogTenant]]:
    stacks_dir = _opts(ctx).stacks_dir
    if not stacks_dir.is_dir():
        if required:
            raise CatalogError(
                Finding(
                    "stacks directory not found; cannot tell which tenants pin which release",
                    file=str(stacks_dir),
                    fix=f"pass --stacks-dir or set ${STACKS_DIR_ENV}",
                )
            )
        return {}
    return load_stack_tenants(stacks_dir)


@catalog_app.command("list")
@_reporting_errors
def list_releases(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Releases, their status and runtimes."""
    catalog = _load(ctx)
    rows: list[dict[str, Any]] = [
        {
            "version": r.version,
            "status": r.status,
            "runtimes": list(catalog.sources[r.version].templates) if r.version in catalog.sources else [],
            "deprecatedRuntimes": list(r.deprecated_runtimes),
            "locked": r.version in (catalog.lock.get("releases") or {}),
            "changelog": r.changelog,
        }
        for r in catalog.releases
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Training runtime catalog")
    for column in ("Version", "Status", "Runtimes", "Changelog"):
        table.add_column(column, overflow="fold")
    for row in rows:
        style = _STATUS_STYLE.get(row["status"], "")
        names = [f"{n} (deprecated)" if n in row["deprecatedRuntimes"] else n for n in row["runtimes"]]
        table.add_row(row["version"], f"[{style}]{row['status']}[/{style}]", "\n".join(names), " ".join(row["changelog"].split()))
    Console(soft_wrap=False, width=max(140, Console().width)).print(table)


@catalog_app.command("show")
@_reporting_errors
def show(
    ctx: typer.Context,
    version: str = typer.Argument(..., help="Release version."),
    runtime: Optional[str] = typer.Argument(None, help="Only this runtime."),
    tenant_queue: Optional[str] = typer.Option(None, "--tenant-queue", help="Render TrainingRuntimes for this Volcano queue."),
    priority_class: Optional[str] = typer.Option(None, "--priority-class", help="Tenant default priority class."),
    namespace: Optional[str] = typer.Option(None, "--namespace", help="Tenant namespace (with --tenant-queue)."),
    image: list[str] = typer.Option([], "--image", help=(
        "KEY=IMAGE: render with another image for the release's images.KEY (or `all`), e.g. the locally built "
        "all=trainyard.local/training:local for real nodes. Repeatable; the release itself is not changed.")),
    real_nodes: bool = typer.Option(False, "--real-nodes", help="Pin every pod to the local cluster's real nodes "
                                    "(their label and a toleration of their taint)."),
    name_suffix: str = typer.Option("", "--name-suffix", help="Append to each runtime's name (e.g. -real), so the "
                                    "copies sit beside the tenant's pinned runtimes."),
) -> None:
    """Print a release's runtimes as a YAML stream (ClusterTrainingRuntimes, or TrainingRuntimes with tenant options)."""
    catalog = _load(ctx)
    if tenant_queue or priority_class or namespace:
        if not (tenant_queue and namespace):
            raise CatalogError(
                Finding("tenant rendering needs both --tenant-queue and --namespace", fix="pass both (and optionally --priority-class)")
            )
        tenant = CatalogTenant(namespace, namespace, version, tenant_queue, priority_class)
        objects = tenant_runtimes_of(catalog, version, tenant, runtime)
    else:
        objects = cluster_runtimes_of(catalog, version, runtime)
    if image or real_nodes or name_suffix:
        from trainyard.cluster.real_node_spec import REAL_NODE_LABEL
        from trainyard.runtimes.overrides import name_names_the_model, override_runtime, parse_image_overrides

        images = parse_image_overrides(image, catalog, version)
        if name_suffix and runtime is None:  # the whole release: leave out what a suffix would break, and say so
            for left_out in [o for o in objects if name_names_the_model(o)]:
                typer.echo(f"{left_out['metadata']['name']}: left out: a torchtune runtime's name names its model, so "
                           f"it cannot take --name-suffix; render it without into a namespace of its own", err=True)
            objects = [o for o in objects if not name_names_the_model(o)]
        selector = {REAL_NODE_LABEL: "true"} if real_nodes else None
        tolerations = [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}] if real_nodes else None
        objects = [override_runtime(o, images=images, node_selector=selector, tolerations=tolerations,
                                    name_suffix=name_suffix) for o in objects]
    typer.echo(yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True, width=120), nl=False)


@catalog_app.command("diff")
@_reporting_errors
def diff(ctx: typer.Context, old: str = typer.Argument(..., help="Older release."), new: str = typer.Argument(..., help="Newer release.")) -> None:
    """What changed per runtime between two releases (added, removed, unified diff of the rendered YAML)."""
    catalog = _load(ctx)
    before, after = render_release_runtimes(catalog, old), render_release_runtimes(catalog, new)
    changes = diff_releases(old, before, new, after)
    changed = {c.name for c in changes}
    unchanged = sorted(name for name in before if name in after and name not in changed)
    typer.echo(format_changes(old, new, changes, unchanged), nl=False)


@catalog_app.command("lint")
@_reporting_errors
def lint(ctx: typer.Context) -> None:
    """Validate every rendered runtime of every non-retired release (schema, admission, sample build, lock)."""
    catalog = _load(ctx)
    checks = load_controller_checks()
    findings = lint_catalog(catalog, _load_stacks(ctx, required=False), checks)
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    for finding in findings:
        style = "red" if finding.severity == "error" else "yellow"
        console.print(f"[{style}]{finding.severity}[/{style}]: {finding}")
    live = [r for r in catalog.releases if r.status != RETIRED]
    count = sum(len(catalog.sources[r.version].templates) for r in live if r.version in catalog.sources)
    if errors(findings):
        typer.echo(f"catalog lint: {len(errors(findings))} error(s) in {len(live)} release(s)", err=True)
        raise typer.Exit(1)
    typer.echo(f"catalog lint: {count} runtimes in {len(live)} releases ok ({len(findings)} warning(s))")


@catalog_app.command("new")
@_reporting_errors
def new(
    ctx: typer.Context,
    version: str = typer.Argument(..., help="The new release version (semver, above every existing one)."),
    from_version: str = typer.Option(..., "--from", help="Release whose sources to copy."),
    changelog: Optional[str] = typer.Option(None, "--changelog", help="Changelog entry (can be written later)."),
) -> None:
    """Start a draft release by copying another release's sources."""
    root = _opts(ctx).catalog_dir
    catalog = _load(ctx)
    releases = lifecycle.start_release(catalog, version, from_version, changelog)
    store.copy_release_sources(root, from_version, version)
    try:
        store.write_catalog(root, releases)
    except BaseException:
        store.remove_release_sources(root, version)
        raise
    typer.echo(f"started draft {version} from {from_version}: edit runtimes/releases/{version}/, then `trainyard catalog release {version}`")


@catalog_app.command("release")
@_reporting_errors
def release(
    ctx: typer.Context,
    version: str = typer.Argument(..., help="The draft to release."),
    changelog: Optional[str] = typer.Option(None, "--changelog", help="Set the changelog entry while releasing."),
) -> None:
    """Freeze a draft into the lock and make it current (the previous current becomes supported)."""
    root = _opts(ctx).catalog_dir
    catalog = _load(ctx)
    draft = catalog.release(version)
    if changelog is not None and draft.status == DRAFT:
        catalog = replace(catalog, releases=tuple(replace(r, changelog=changelog.strip()) if r is draft else r for r in catalog.releases))
    if draft.status == DRAFT:
        checks = load_controller_checks()
        problems = errors(lint_release(catalog, version, checks))
        if problems:
            raise CatalogError(*problems)
    releases, lock = lifecycle.freeze_release(catalog, version)
    store.write_lock(root, lock)
    store.write_catalog(root, releases)
    typer.echo(f"released {version}: now current; hashes frozen in {store.LOCK_FILE}")


@catalog_app.command("deprecate")
@_reporting_errors
def deprecate(
    ctx: typer.Context,
    version: str = typer.Argument(..., help="Release to deprecate (or whose runtime to deprecate)."),
    runtime: Optional[str] = typer.Argument(None, help="Deprecate only this runtime."),
) -> None:
    """Mark a supported release, or one runtime, deprecated (adds trainer.kubeflow.org/support: deprecated)."""
    root = _opts(ctx).catalog_dir
    store.write_catalog(root, lifecycle.deprecate(_load(ctx), version, runtime))
    typer.echo(f"deprecated {version}{' ' + runtime if runtime else ''}")


@catalog_app.command("retire")
@_reporting_errors
def retire(ctx: typer.Context, version: str = typer.Argument(..., help="Deprecated release to retire.")) -> None:
    """Retire a deprecated release; refused while any stack's tenant pins it."""
    root = _opts(ctx).catalog_dir
    releases = lifecycle.retire(_load(ctx), version, _load_stacks(ctx, required=True))
    store.write_catalog(root, releases)
    typer.echo(f"retired {version}: its runtimes are no longer rendered")


__all__ = ["catalog_app"]
