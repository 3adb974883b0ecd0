"""What the platform program applies: cluster runtimes of the current release, tenant runtimes of a pinned one.

Names never change across releases (a TrainJob's ``runtimeRef`` keeps working
when a tenant moves); the release shows in the ``trainyard.dev/catalog-version``
label instead. Status labels are added here, after hashing, so deprecation
never touches the lock.
"""

from __future__ import annotations

import copy

from trainyard.runtimes.model import CatalogTenant
from trainyard.runtimes import labels
from trainyard.runtimes.model import DEPRECATED, PINNABLE_STATUSES, RETIRED, Catalog, CatalogError, Finding, Release
from trainyard.runtimes.lock import release_drift
from trainyard.runtimes.render import render_release_sources

TENANT_KIND = "TrainingRuntime"


def render_release_runtimes(catalog: Catalog, version: str) -> dict[str, dict]:
    """Base runtime objects of one release by stable name (the content the lock hashes)."""
    catalog.release(version)
    return render_release_sources(catalog.sources_of(version), version)


def is_deprecated(release: Release, runtime: str) -> bool:
    """A runtime is deprecated when its release is, or when the release lists it individually."""
    return release.status in (DEPRECATED, RETIRED) or runtime in release.deprecated_runtimes


def with_support_label(runtime: dict, deprecated: bool) -> dict:
    """Add upstream's ``trainer.kubeflow.org/support: deprecated`` so users get its deprecation warning."""
    shaped = copy.deepcopy(runtime)
    if deprecated:
        shaped["metadata"]["labels"] = {**shaped["metadata"].get("labels", {}), labels.SUPPORT: labels.SUPPORT_DEPRECATED}
    return shaped


def as_tenant_runtime(runtime: dict, tenant: CatalogTenant) -> dict:
    """A namespaced TrainingRuntime scheduled by Volcano in the tenant's queue and priority class.

    The queue only takes effect through the Volcano PodGroup the controller
    builds, so a runtime without a pod-group policy gets ``podGroupPolicy.volcano``;
    an existing Volcano policy (e.g. network topology) is kept.

    A launcher that waits for its workers to be Ready (``dependsOn`` status Ready, the MPI runtimes) starts with
    them instead: the gang's minMember counts the launcher (as upstream's), but JobSet creates it only once the
    workers run, and Volcano runs no worker before the whole gang exists, so the job would wait forever (found on
    real nodes). mpirun retries its SSH connections (``connectionAttempts``) while the workers' sshd comes up.
    """
    shaped = copy.deepcopy(runtime)
    metadata = shaped["metadata"]
    name = metadata["name"]
    shaped["kind"] = TENANT_KIND
    shaped["metadata"] = {"name": name, "namespace": tenant.namespace, **{k: v for k, v in metadata.items() if k not in ("name", "namespace")}}
    spec = shaped["spec"]
    policy = spec.get("podGroupPolicy") or {}
    if "coscheduling" in policy:
        raise CatalogError(
            Finding(
                "uses coscheduling, which cannot honour a tenant's Volcano queue",
                runtime=name,
                fix="use podGroupPolicy.volcano in the template",
            )
        )
    policy = {**policy, "volcano": policy.get("volcano") or {}}
    shaped["spec"] = spec = {
        **{k: v for k, v in spec.items() if k in ("mlPolicy",)},
        "podGroupPolicy": policy,
        **{k: v for k, v in spec.items() if k not in ("mlPolicy", "podGroupPolicy")},
    }
    template_metadata = spec["template"].setdefault("metadata", {})
    template_metadata["annotations"] = {**(template_metadata.get("annotations") or {}), labels.VOLCANO_QUEUE: tenant.queue}
    for job in spec["template"].get("spec", {}).get("replicatedJobs", []):
        waits = [d for d in job.get("dependsOn") or [] if d.get("status") != "Ready"]
        if waits:
            job["dependsOn"] = waits
        else:
            job.pop("dependsOn", None)
        pod_spec = job["template"]["spec"]["template"].setdefault("spec", {})
        pod_spec["schedulerName"] = labels.VOLCANO_SCHEDULER
        if tenant.priority_class:
            pod_spec["priorityClassName"] = tenant.priority_class
    return shaped


def cluster_runtimes_of(catalog: Catalog, version: str, only: str | None = None) -> list[dict]:
    """One release as ClusterTrainingRuntimes with status labels (any status; used by ``show``)."""
    release = catalog.release(version)
    base = _select(render_release_runtimes(catalog, version), only, version)
    return [with_support_label(obj, is_deprecated(release, name)) for name, obj in base.items()]


def tenant_runtimes_of(catalog: Catalog, version: str, tenant: CatalogTenant, only: str | None = None) -> list[dict]:
    """One release as a tenant's TrainingRuntimes with status labels (any status; used by ``show``)."""
    return [as_tenant_runtime(obj, tenant) for obj in cluster_runtimes_of(catalog, version, only)]


def verified_release(catalog: Catalog, version: str) -> None:
    """Refuse to deploy a released version whose sources or output no longer match the lock."""
    drift = release_drift(catalog, version)
    if drift:
        raise CatalogError(*drift)


def render_cluster_runtimes(catalog: Catalog) -> list[dict]:
    """ClusterTrainingRuntimes for the cluster: the current release, under stable names."""
    verified_release(catalog, catalog.current.version)
    return cluster_runtimes_of(catalog, catalog.current.version)


def render_tenant_runtimes(catalog: Catalog, tenant: CatalogTenant) -> list[dict]:
    """TrainingRuntimes for one tenant namespace, from the release the tenant pins."""
    return render_tenants_runtimes(catalog, [tenant])[tenant.name]


def render_tenants_runtimes(catalog: Catalog, tenants: list[CatalogTenant]) -> dict[str, list[dict]]:
    """Every tenant's TrainingRuntimes by tenant name. Each pinned release is checked against the lock and rendered
    once, however many tenants pin it: at 100 tenants, rendering per tenant was a fifth of a preview's program time
    (bench/scale.py)."""
    released: dict[str, list[dict]] = {}
    runtimes: dict[str, list[dict]] = {}
    for tenant in tenants:
        if tenant.catalog_version not in released:
            released[tenant.catalog_version] = _pinnable_release_runtimes(catalog, tenant)
        runtimes[tenant.name] = [as_tenant_runtime(obj, tenant) for obj in released[tenant.catalog_version]]
    return runtimes


def _pinnable_release_runtimes(catalog: Catalog, tenant: CatalogTenant) -> list[dict]:
    """The release `tenant` pins, as ClusterTrainingRuntimes with status labels; refused unless it is pinnable and
    matches the lock."""
    release = catalog.release(tenant.catalog_version)
    if release.status not in PINNABLE_STATUSES:
        raise CatalogError(
            Finding(
                f"tenant {tenant.name} pins release {release.version}, which is {release.status}",
                release=release.version,
                fix=f"set the tenant's catalogVersion to a released version, e.g. {catalog.current.version}",
            )
        )
    verified_release(catalog, release.version)
    return cluster_runtimes_of(catalog, release.version)


def _select(runtimes: dict[str, dict], only: str | None, version: str) -> dict[str, dict]:
    if only is None:
        return runtimes
    if only not in runtimes:
        raise CatalogError(
            Finding(
                f"release {version} has no runtime {only!r} (has: {', '.join(runtimes)})",
                release=version,
                fix="pick one of the listed runtimes",
            )
        )
    return {only: runtimes[only]}
