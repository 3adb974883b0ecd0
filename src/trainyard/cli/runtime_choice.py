"""Which runtime `trainyard validate` / `render` check a TrainJob against: the one its `runtimeRef` names.

From a file (one runtime, or a whole release as `trainyard catalog show 1.2.0` prints it) or straight
from the catalog (`--catalog VERSION`, `--tenant T` for a tenant's TrainingRuntimes).
"""

from __future__ import annotations

from pathlib import Path

from trainyard import k8s as K
from trainyard.controller import constants as C
from trainyard.controller.errors import InputError
from trainyard.k8s import VOLCANO_API_VERSION


def runtime_ref(trainjob: dict) -> tuple[str, str]:
    """(kind, name) of the TrainJob's runtimeRef, with the CRD's default kind."""
    spec = K.mapping(trainjob.get("spec"))
    ref = K.mapping(spec.get("runtimeRef"))
    return str(ref.get("kind") or C.CLUSTER_TRAINING_RUNTIME_KIND), str(ref.get("name") or "")


def pick_runtime(runtimes: list[dict], trainjob: dict, source: str) -> dict:
    """One runtime: the only one given, else the one whose kind and name the runtimeRef names."""
    if len(runtimes) == 1:
        return runtimes[0]
    kind, name = runtime_ref(trainjob)
    for runtime in runtimes:
        meta = K.mapping(runtime.get("metadata"))
        if runtime.get("kind") == kind and meta.get("name") == name:
            return runtime
    have = ", ".join(f"{r.get('kind')}/{(r.get('metadata') or {}).get('name')}" for r in runtimes) or "none"
    raise InputError(f"{source} has no {kind} {name!r} (has: {have}); point runtimeRef at one of them or pass "
                     "the file that holds it", "spec.runtimeRef")


def catalog_runtime(trainjob: dict, version: str, tenant: str | None, stacks_dir: Path | None = None
                    ) -> tuple[dict, list[dict]]:
    """The runtime the TrainJob names, rendered from catalog release `version` as the platform deploys it
    (a ClusterTrainingRuntime, or tenant `tenant`'s TrainingRuntime), plus the tenant's Volcano Queue and
    PriorityClass the platform creates with it (so admission does not report them missing)."""
    from trainyard.runtimes import CatalogError, load_catalog
    from trainyard.runtimes.publish import cluster_runtimes_of, tenant_runtimes_of

    kind, _ = runtime_ref(trainjob)
    platform: list[dict] = []
    try:
        catalog = load_catalog()
        found = _tenant(tenant, version, stacks_dir) if tenant else None  # an unknown tenant is refused for any kind
        if found is not None:
            platform = _tenant_objects(found)
        if kind == C.TRAINING_RUNTIME_KIND:
            if found is None:
                raise InputError("runtimeRef names a TrainingRuntime, which lives in a tenant namespace; add "
                                 "--tenant T (a tenant of stacks/), or use kind ClusterTrainingRuntime", "--tenant")
            runtimes = tenant_runtimes_of(catalog, version, found)
        else:
            runtimes = cluster_runtimes_of(catalog, version)
    except CatalogError as err:
        raise InputError(str(err).replace("\n", "; "), "--catalog") from None
    return pick_runtime(runtimes, trainjob, f"catalog release {version}"), platform


def _tenant_objects(tenant) -> list[dict]:
    objects: list[dict] = [{"apiVersion": VOLCANO_API_VERSION, "kind": "Queue", "metadata": {"name": tenant.queue}}]
    if tenant.priority_class:
        objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": tenant.priority_class}, "value": 1000})
    return objects


def _tenant(name: str, version: str, stacks_dir: Path | None):
    """The tenant as the stacks declare it (namespace, queue, default priority class), pinned to `version`."""
    import dataclasses

    from trainyard.paths import repo_root
    from trainyard.platform.catalog_tenants import load_stack_tenants
    from trainyard.runtimes import CatalogError

    try:
        stacks = load_stack_tenants(stacks_dir or repo_root() / "stacks")
    except CatalogError as err:
        raise InputError(str(err).replace("\n", "; "), "--tenant") from None
    found = [t for _, tenants in sorted(stacks.items()) for t in tenants if name in (t.name, t.namespace)]
    if not found:
        known = sorted({t.name for tenants in stacks.values() for t in tenants})
        raise InputError(f"no tenant {name!r} in the stacks (known: {', '.join(known) or 'none'})", "--tenant")
    return dataclasses.replace(found[0], catalog_version=version)
