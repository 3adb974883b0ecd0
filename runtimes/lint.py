"""``catalog lint``: every rendered runtime of every live release, checked the way the cluster will check it.

Checks, in order: released sources match the lock; templates render; catalog
rules (framework label, pinned images, ancestor labels on the Job template);
the runtime CRD's openAPIV3Schema; upstream runtime admission; and a sample
TrainJob building a JobSet (and, for the tenant form, a Volcano PodGroup in the
tenant's queue) through the controller pipeline. The controller parts are
passed in as ``ControllerChecks`` so the rules stay pure; ``load_controller_checks``
imports them lazily from ``trainyard.controller`` and fails (a ``CatalogError``)
if any part cannot be imported: lint never silently skips a check.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from trainyard.k8s import TRAINER_GROUP
from trainyard.k8s import VOLCANO_GROUP, jobset_jobs
from trainyard.runtimes.model import CatalogTenant
from trainyard.problems import Problem
from trainyard.runtimes.lock import catalog_drift
from trainyard.runtimes.model import DEPRECATED, PINNABLE_STATUSES, RETIRED, Catalog, CatalogError, Finding
from trainyard.runtimes.publish import as_tenant_runtime, render_release_runtimes
from trainyard.k8s import TRAINER_API_VERSION
from trainyard.runtimes.render import CLUSTER_KIND
from trainyard.runtimes.rules import CATALOG_RULES, check_sdk_describable, replicated_jobs
from trainyard.runtimes.schema import validate
from trainyard.toolchain.flux_templates import read_flux_templates

TENANT_KIND = "TrainingRuntime"
LINT_TENANT = CatalogTenant(name="catalog-lint", namespace="catalog-lint", catalog_version="", queue="catalog-lint", priority_class="catalog-lint")


@dataclass(frozen=True)
class ControllerChecks:
    """The controller's view of a runtime: every part is required."""

    schemas: Mapping[str, Mapping[str, Any]]
    """Runtime kind -> openAPIV3Schema (from ``trainyard.controller.crds.crd_objects``)."""
    validate_runtime: Callable[..., Any]
    """``trainyard.controller.admission.validate_runtime(runtime, old=None)`` -> has ``.errors``/``.warnings``."""
    build_objects: Callable[..., list[dict]]
    """``trainyard.controller.build.build_objects(trainjob, runtime, existing, flux_templates=...)`` -> objects to apply."""
    flux_templates: Callable[[], Mapping[str, str]]
    """Reads upstream's Flux script templates for the sample build (``trainyard.toolchain.flux_templates``)."""


def runtime_schemas(crds: list[dict]) -> dict[str, Mapping[str, Any]]:
    """ClusterTrainingRuntime/TrainingRuntime openAPIV3Schemas (served version v1alpha1) out of CRD objects."""
    schemas = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind")
        if spec.get("group") != TRAINER_GROUP or kind not in (CLUSTER_KIND, TENANT_KIND):
            continue
        for version in spec.get("versions") or []:
            if version.get("name") == TRAINER_API_VERSION.split("/")[1]:
                schemas[kind] = (version.get("schema") or {}).get("openAPIV3Schema") or {}
    return schemas


def load_controller_checks() -> ControllerChecks:
    """Import the controller pipeline lazily; raise ``CatalogError`` if any part of it is unavailable."""
    try:
        from trainyard.controller.admission import validate_runtime
        from trainyard.controller.build import build_objects
        from trainyard.controller.crds import crd_objects
    except ImportError as err:
        raise CatalogError(
            Finding(
                f"catalog lint needs trainyard.controller (CRD schema, runtime admission, sample TrainJob build), "
                f"which cannot be imported: {type(err).__name__}: {err}",
                fix="reinstall trainyard (pip install -e .); the controller ships in the same distribution",
            )
        ) from err
    schemas = runtime_schemas(crd_objects())
    missing = [kind for kind in (CLUSTER_KIND, TENANT_KIND) if not schemas.get(kind)]
    if missing:
        raise CatalogError(
            Finding(
                f"trainyard.controller.crds.crd_objects() has no {TRAINER_API_VERSION} openAPIV3Schema for {', '.join(missing)}",
                fix="report the controller bug: catalog lint cannot check runtimes against the CRD without it",
            )
        )
    return ControllerChecks(schemas, validate_runtime, build_objects, read_flux_templates)


# --- controller checks --------------------------------------------------------------------------


def check_schema(runtime: dict, checks: ControllerChecks) -> list[Problem]:
    kind = runtime.get("kind", "")
    schema = checks.schemas.get(kind)
    if not schema:
        return [Finding(f"CRD schema: no runtime CRD for kind {kind!r}", fix=f"use kind {CLUSTER_KIND}")]
    from trainyard.controller.strict import job_spec_unknown_fields
    from trainyard.toolchain.k8s_fields import pinned_job_fields

    found: list[Problem] = [Finding(f"CRD schema: {problem}", fix="correct the field to match the runtime CRD")
                            for problem in validate(runtime, schema)]
    return found + [Finding(f"Kubernetes schema: {problem}", fix="correct the field to match the Kubernetes Job and pod API")
           for problem in job_spec_unknown_fields(runtime, True, pinned_job_fields())]


def check_admission(runtime: dict, checks: ControllerChecks) -> list[Problem]:
    try:
        result = checks.validate_runtime(runtime)
    except Exception as err:  # a crash is a finding, not a lint crash
        return [Finding(f"admission raised {type(err).__name__}: {err}", fix="fix the runtime (or report the controller bug)")]
    return [Finding(f"admission: {error}", fix="fix the runtime so upstream's runtime webhook admits it") for error in result.errors]


def sample_trainjob(runtime: dict) -> dict:
    """The smallest TrainJob that exercises a runtime: its own defaults, one TrainJob name."""
    metadata = runtime["metadata"]
    num_nodes = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("numNodes", 1)
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "catalog-lint", "namespace": metadata.get("namespace", "catalog-lint"), "uid": "00000000-0000-4000-8000-00000000c47a"},
        "spec": {
            "runtimeRef": {"apiGroup": TRAINER_GROUP, "kind": runtime["kind"], "name": metadata["name"]},
            "trainer": {"numNodes": num_nodes},
        },
    }


def check_build(runtime: dict, checks: ControllerChecks, queue: str | None = None) -> list[Problem]:
    """A sample TrainJob must build a JobSet with the runtime's jobs (and, for tenants, a PodGroup in the queue)."""
    fix = "fix the runtime so the controller can build a JobSet from it"
    try:
        objects = checks.build_objects(sample_trainjob(runtime), runtime, [], flux_templates=checks.flux_templates)
    except Exception as err:
        return [Finding(f"sample TrainJob failed to build: {type(err).__name__}: {err}", fix=fix)]
    jobsets = [o for o in objects if o.get("kind") == "JobSet"]
    if len(jobsets) != 1:
        return [Finding(f"sample TrainJob built {len(jobsets)} JobSets, expected 1", fix=fix)]
    want = [job.get("name") for job in replicated_jobs(runtime)]
    got = [job.get("name") for job in jobset_jobs(jobsets[0].get("spec"))]
    problems: list[Problem] = [] if got == want else [Finding(f"built JobSet has jobs {got}, runtime has {want}", fix=fix)]
    if queue is not None:
        groups = [o for o in objects if o.get("kind") == "PodGroup" and str(o.get("apiVersion", "")).partition("/")[0] == VOLCANO_GROUP]
        if not groups or (groups[0].get("spec") or {}).get("queue") != queue:
            problems.append(Finding(f"tenant form did not build a Volcano PodGroup in queue {queue!r}", fix="keep podGroupPolicy Volcano-compatible"))
    return problems


def check_runtime(runtime: dict, checks: ControllerChecks) -> list[Problem]:
    """All rules for one rendered runtime (cluster form) and its tenant form."""
    problems = [p for rule in CATALOG_RULES for p in rule(runtime)]
    problems += check_schema(runtime, checks) + check_admission(runtime, checks) + check_build(runtime, checks)
    try:
        tenant_form = as_tenant_runtime(runtime, LINT_TENANT)
    except CatalogError as err:
        return problems + [Finding(f.message, fix=f.fix) for f in err.findings]
    tenant_problems = check_schema(tenant_form, checks) + check_build(tenant_form, checks, queue=LINT_TENANT.queue)
    return problems + [replace(p, message=f"as TrainingRuntime: {p.message}") for p in tenant_problems]


# --- catalog-wide ------------------------------------------------------------------------------


def lint_release(catalog: Catalog, version: str, checks: ControllerChecks) -> list[Problem]:
    """Render one release and check each runtime; render errors come back as findings."""
    release = catalog.release(version)
    try:
        rendered = render_release_runtimes(catalog, version)
    except CatalogError as err:
        return list(err.findings)
    sources = catalog.sources_of(version)
    findings: list[Problem] = [
        Finding(
            f"deprecatedRuntimes lists {name!r}, which release {version} does not have",
            file=catalog.catalog_file,
            release=version,
            fix="remove it or correct the name",
        )
        for name in release.deprecated_runtimes
        if name not in rendered
    ]
    for name, runtime in rendered.items():
        place: dict[str, Any] = {"file": sources.path_of(name), "runtime": name, "release": version}
        findings += [replace(problem, **place) for problem in check_runtime(runtime, checks)]
        # Released sources are frozen: what only a later release can fix is a warning there.
        severity = "warning" if release.released else "error"
        findings += [replace(problem, severity=severity, **place) for problem in check_sdk_describable(runtime)]
        for warning in _admission_warnings(runtime, checks):
            findings.append(Finding(f"admission warning: {warning}", severity="warning", **place))
    return findings


def _admission_warnings(runtime: dict, checks: ControllerChecks) -> list[str]:
    try:
        return [str(w) for w in checks.validate_runtime(runtime).warnings]
    except Exception:
        return []  # already reported by check_admission


def lint_pins(catalog: Catalog, stacks: Mapping[str, list[CatalogTenant]]) -> list[Problem]:
    """Every tenant must pin a released, live version; pinning a deprecated one is a warning."""
    findings: list[Problem] = []
    statuses = {r.version: r.status for r in catalog.releases}
    for stack, tenants in sorted(stacks.items()):
        for tenant in tenants:
            status = statuses.get(tenant.catalog_version)
            file = f"stacks/Pulumi.{stack}.yaml"
            move = f"set catalogVersion: {catalog.current.version} for tenant {tenant.name}"
            if status not in PINNABLE_STATUSES:
                state = "not in the catalog" if status is None else status
                findings.append(Finding(f"tenant {tenant.name} pins {tenant.catalog_version}, which is {state}", file=file, fix=move))
            elif status == DEPRECATED:
                findings.append(
                    Finding(f"tenant {tenant.name} pins deprecated release {tenant.catalog_version}", file=file, fix=move, severity="warning")
                )
    return findings


def lint_catalog(catalog: Catalog, stacks: Mapping[str, list[CatalogTenant]], checks: ControllerChecks) -> list[Problem]:
    """Everything ``catalog lint`` reports, errors and warnings, in reading order."""
    findings = catalog_drift(catalog)
    known = {r.version for r in catalog.releases}
    findings += [
        Finding(f"lock has release {version}, which catalog.yaml does not list", file=catalog.lock_file, fix="restore catalog.yaml; released versions are never removed")
        for version in (catalog.lock.get("releases") or {})
        if version not in known
    ]
    for release in catalog.releases:
        if release.status != RETIRED:
            findings += lint_release(catalog, release.version, checks)
    findings += lint_pins(catalog, stacks)
    return list(dict.fromkeys(findings))  # drift and lint_release may both report a render error


def errors(findings: list[Problem]) -> list[Problem]:
    return [f for f in findings if f.severity == "error"]
