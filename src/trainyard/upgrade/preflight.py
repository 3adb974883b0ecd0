"""`trainyard platform preflight`: before an upgrade of trainyard, what the new version does to every TrainJob in
the cluster (the thin I/O layer over `verdicts` and `differences`).

It is run with the new version's code against the cluster the old version runs. Each unfinished TrainJob is built
as the new controller would build it, from what the old one left (its runtime snapshot, its Secrets and ConfigMaps,
its Namespace, the status server its JobSet was given); a running one as its resume would rebuild it. Where the new
JobSet differs from the one in the cluster and the TrainJob is suspended, the API server is asked with a dry-run
server-side apply, through every admission layer (JobSet's webhook included), whether the new controller's apply
would pass. Nothing is written.
"""

from __future__ import annotations

import copy
from pathlib import Path
from dataclasses import asdict, replace
from types import ModuleType
from typing import Any, Sequence

from trainyard import k8s as K
from trainyard.controller.build import build_objects, is_managed_by_us
from trainyard.controller.constants import TRAINING_RUNTIME_KIND
from trainyard.controller.errors import ControllerError
from trainyard.controller.plugins import REGISTRY
from trainyard.controller.plugins.framework import StatusServerConfig
from trainyard.controller.plugins.trainjobstatus import CA_FILE, ENV_URL, status_path, tls_config_map_name
from trainyard.controller.runtime.apiserver import RESOURCES, ApiServer
from trainyard.controller.runtime.reconciler import existing_objects, fetch_runtime, get_typed, namespace_objects_of
from trainyard.controller.snapshot import runtime_key, snapshot_name
from trainyard.controller.status import is_finished
from trainyard.toolchain.flux_templates import read_flux_templates
from trainyard.runtimes import Catalog, CatalogError, CatalogTenant, render_tenant_runtimes
from trainyard.upgrade.catalog_moves import CatalogMove, JobInFlight, JobMove, blocking, job_moves, runtime_changes
from trainyard.upgrade.differences import differences
from trainyard.upgrade.verdicts import FINISHED, RUNNING, SUSPENDED, JobFinding, finding, job_state, summary

LIFECYCLE_PATHS = ("spec.suspend ",)
"""Differences that are the TrainJob's lifecycle, not its workload (a running job is built as its resume would be)."""


def survey(api: ApiServer, namespace: str | None = None,
           plugins: Sequence[ModuleType] = REGISTRY) -> list[JobFinding]:
    """A finding for every TrainJob trainyard manages (in `namespace`, or everywhere), by namespace and name.
    `plugins`: the build's registry, the new version's (tests pass one with a change of render)."""
    items = api.list(RESOURCES["TrainJob"], namespace).get("items") or []
    found = []
    for trainjob in sorted(items, key=lambda t: (t["metadata"]["namespace"], t["metadata"]["name"])):
        trainjob.setdefault("apiVersion", K.TRAINER_API_VERSION)
        trainjob.setdefault("kind", "TrainJob")
        if is_managed_by_us(trainjob):
            found.append(examine(api, trainjob, plugins))
    return found


def examine(api: ApiServer, trainjob: dict, plugins: Sequence[ModuleType] = REGISTRY) -> JobFinding:
    namespace, name = trainjob["metadata"]["namespace"], trainjob["metadata"]["name"]
    jobset = api.get(RESOURCES["JobSet"], name, namespace)
    state = job_state(is_finished(trainjob), jobset)
    snapshot = get_typed(api, RESOURCES["ConfigMap"], snapshot_name(trainjob), namespace)
    kind, _ = runtime_key(trainjob)
    runtime_words = f"{kind}/{K.mapping(trainjob['spec'].get('runtimeRef')).get('name', '')}"
    pinned, paused = snapshot is not None, bool(K.mapping(trainjob.get("spec")).get("suspend"))
    if state == FINISHED:
        return finding(namespace, name, state, runtime_words, snapshot=pinned, suspended=paused)
    runtime = None if snapshot is not None else fetch_runtime(api, trainjob)
    namespace_objects = namespace_objects_of(api, namespace)
    existing = existing_objects(api, trainjob, snapshot, runtime, plugins, next(iter(namespace_objects), None))
    as_built = trainjob
    if state == RUNNING:  # the pipeline leaves a running JobSet out: build what its resume would apply
        as_built = copy.deepcopy(trainjob)
        as_built["spec"]["suspend"] = True
    try:
        objects = build_objects(as_built, runtime, existing + namespace_objects,
                                status_server=status_server_of(api, jobset, trainjob), plugins=plugins,
                                flux_templates=read_flux_templates)
    except ControllerError as exc:
        return finding(namespace, name, state, runtime_words, build_error=str(exc), snapshot=pinned, suspended=paused)
    rendered = next((obj for obj in objects if obj.get("kind") == "JobSet"), None)
    if jobset is None or rendered is None:
        return finding(namespace, name, state, runtime_words, snapshot=pinned, suspended=paused)
    changed = tuple(d for d in differences(rendered, jobset) if not d.startswith(LIFECYCLE_PATHS))
    refusal = api.dry_run_apply(rendered) if changed and state == SUSPENDED else None
    return finding(namespace, name, state, runtime_words, changed, refusal, snapshot=pinned, suspended=paused)


def status_server_of(api: ApiServer, jobset: dict | None, trainjob: dict) -> StatusServerConfig | None:
    """The status server the old controller gave this TrainJob's pods (TrainJobStatus gate): its URL from the
    JobSet's env, its CA from the TrainJob's TLS ConfigMap; None when the JobSet has none."""
    namespace, name = trainjob["metadata"]["namespace"], trainjob["metadata"]["name"]
    url = _env_value(jobset or {}, ENV_URL)
    suffix = status_path(namespace, name)
    if url is None or not url.endswith(suffix):
        return None
    config_map = api.get(RESOURCES["ConfigMap"], tls_config_map_name(name), namespace) or {}
    ca = (config_map.get("data") or {}).get(CA_FILE)
    return StatusServerConfig(base_url=url[: -len(suffix)], ca_pem=ca) if ca else None


def _env_value(jobset: dict, env_name: str) -> str | None:
    for job in K.jobset_jobs(jobset.get("spec")):
        for container in K.job_containers(job):
            for env in container.get("env") or []:
                if env.get("name") == env_name and isinstance(env.get("value"), str):
                    return env["value"]
    return None


def catalog_survey(api: ApiServer, tenants: Sequence[CatalogTenant], catalog: Catalog,
                   findings: Sequence[JobFinding] | None = None) -> tuple[list[CatalogMove], list[JobMove]]:
    """Each tenant whose namespace holds another release's TrainingRuntimes than the stack pins: the runtimes the
    move changes, adds and removes, and what happens to its TrainJobs in flight (`findings` from `survey`, or
    surveyed here in the moving tenants' namespaces only)."""
    moves: list[CatalogMove] = []
    jobs: list[JobMove] = []
    for tenant in tenants:
        items = api.list(RESOURCES["TrainingRuntime"], tenant.namespace).get("items") or []
        deployed = sorted({v for r in items if (v := K.mapping(r["metadata"].get("labels")).get(K.CATALOG_VERSION_LABEL))})
        older = [v for v in deployed if v != tenant.catalog_version]
        if not older:
            continue
        old: dict[str, dict] = {}
        for version in older:
            old.update(_release_runtimes(catalog, tenant, version, items))
        move = CatalogMove(tenant.name, tenant.namespace, ", ".join(older), tenant.catalog_version,
                           runtime_changes(old, _release_runtimes(catalog, tenant, tenant.catalog_version, [])))
        moves.append(move)
        here = survey(api, tenant.namespace) if findings is None else findings
        jobs += job_moves(move, [JobInFlight(f.name, f.state, f.runtime.partition("/")[2], f.snapshot, f.suspended)
                                 for f in here if f.namespace == tenant.namespace
                                 and f.runtime.startswith(f"{TRAINING_RUNTIME_KIND}/")])
    return moves, jobs


def _release_runtimes(catalog: Catalog, tenant: CatalogTenant, version: str, deployed: Sequence[dict]) -> dict[str, dict]:
    """The tenant's TrainingRuntimes of one release as the platform renders them; for a release the catalog can no
    longer render (retired), the cluster's copies (every one then reads as changed)."""
    try:
        rendered = render_tenant_runtimes(catalog, replace(tenant, catalog_version=version))
    except CatalogError:
        rendered = [r for r in deployed if K.mapping(r["metadata"].get("labels")).get(K.CATALOG_VERSION_LABEL) == version]
    return {r["metadata"]["name"]: r for r in rendered}


def report(findings: Sequence[JobFinding], moves: Sequence[CatalogMove] = (),
           job_moves_found: Sequence[JobMove] = ()) -> dict[str, Any]:
    counted = summary(list(findings))
    counted["blocking"] += blocking(job_moves_found)
    return {"summary": counted, "trainjobs": [f.as_dict() for f in findings],
            "catalog": {"moves": [asdict(m) for m in moves], "trainjobs": [m.as_dict() for m in job_moves_found]}}


def stack_tenants(stack_path: Path) -> tuple[list[CatalogTenant], Catalog]:
    """The stack file's tenants as the catalog renders them, and the catalog (raises what `platform validate`
    reports for a bad stack or catalog)."""
    from trainyard.platform.stack_source import read_stack_source
    from trainyard.runtimes import load_catalog
    from trainyard.whatif.stacks import load

    config = load(read_stack_source(stack_path))
    return [t.as_catalog_tenant() for t in config.tenants], load_catalog()


def catalog_preview(stack_path: Path, kubeconfig: str) -> str:
    """For `platform preview`: the tenants the stack file moves to another catalog release, against the cluster (the
    runtimes that change, what happens to their TrainJobs in flight); a line saying why when it cannot be read."""
    from trainyard.capacity.live import connect
    from trainyard.controller.runtime.transport import ApiError
    from trainyard.errors import TrainyardError
    from trainyard.upgrade import catalog_moves

    try:
        tenants, catalog = stack_tenants(stack_path)
        moves, jobs = catalog_survey(connect(kubeconfig), tenants, catalog)
    except (TrainyardError, ApiError, OSError, ValueError) as exc:
        return f"catalog moves not checked against the cluster: {exc}"
    return catalog_moves.render(moves, jobs)
