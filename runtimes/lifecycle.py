"""Release lifecycle as pure transitions: draft -> current -> supported -> deprecated -> retired.

Each function takes the catalog (and what it must check against) and returns
the new release list (and lock); the CLI writes them only if nothing raised.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from trainyard.runtimes.lock import catalog_drift, lock_entry, with_release
from trainyard.problems import Problem
from trainyard.runtimes.model import (
    CURRENT,
    DEPRECATED,
    DRAFT,
    PINNABLE_STATUSES,
    RETIRED,
    SUPPORTED,
    Catalog,
    CatalogError,
    CatalogTenant,
    Finding,
    Release,
    parse_version,
)
from trainyard.runtimes.render import render_release_sources

TODO_CHANGELOG = "TODO: say what changed and why"


def _replace_release(catalog: Catalog, updated: Release) -> tuple[Release, ...]:
    return tuple(updated if r.version == updated.version else r for r in catalog.releases)


def start_release(catalog: Catalog, version: str, from_version: str, changelog: str | None = None) -> tuple[Release, ...]:
    """A new draft after every existing release, to be filled with a copy of ``from_version``'s sources."""
    key = parse_version(version)
    if any(r.version == version for r in catalog.releases):
        raise CatalogError(
            Finding(f"release {version} already exists", file=catalog.catalog_file, fix="pick the next unused version")
        )
    newest = max(catalog.releases, key=lambda r: r.key)
    if key <= newest.key:
        raise CatalogError(
            Finding(
                f"{version} is not newer than {newest.version}",
                file=catalog.catalog_file,
                fix=f"pick a version above {newest.version} (releases only move forward)",
            )
        )
    catalog.sources_of(from_version)
    draft = Release(version, DRAFT, (changelog or TODO_CHANGELOG).strip())
    return (draft, *catalog.releases)


def freeze_release(catalog: Catalog, version: str) -> tuple[tuple[Release, ...], dict]:
    """Freeze a draft into the lock and make it current; the previous current becomes supported."""
    release = catalog.release(version)
    if release.status != DRAFT:
        raise CatalogError(
            Finding(
                f"release {version} is {release.status}, not a draft; released versions are immutable",
                file=f"releases/{version}",
                release=version,
                fix=f"start a new release: trainyard catalog new <next> --from {version}",
            )
        )
    if not release.changelog or release.changelog.startswith("TODO"):
        raise CatalogError(
            Finding(
                f"release {version} has no changelog",
                file=catalog.catalog_file,
                release=version,
                fix="write its changelog entry in catalog.yaml (or pass --changelog)",
            )
        )
    released = [r for r in catalog.releases if r.released]
    if released and release.key <= max(r.key for r in released):
        raise CatalogError(
            Finding(
                f"{version} is not newer than every released version",
                file=catalog.catalog_file,
                release=version,
                fix="renumber the draft above the newest release",
            )
        )
    drift = catalog_drift(catalog)
    if drift:
        raise CatalogError(*drift)
    sources = catalog.sources_of(version)
    entry = lock_entry(sources, render_release_sources(sources, version))
    lock = with_release(catalog.lock, version, entry)
    releases = tuple(
        replace(r, status=SUPPORTED) if r.status == CURRENT else replace(r, status=CURRENT) if r.version == version else r
        for r in catalog.releases
    )
    return releases, lock


def deprecate(catalog: Catalog, version: str, runtime: str | None = None) -> tuple[Release, ...]:
    """Deprecate a whole supported release, or one runtime of any live release (no re-hash: labels only)."""
    release = catalog.release(version)
    if runtime is not None:
        if release.status not in PINNABLE_STATUSES:
            raise CatalogError(
                Finding(f"release {version} is {release.status}", release=version, fix="deprecate runtimes of released, non-retired versions")
            )
        names = catalog.sources_of(version).templates
        if runtime not in names:
            raise CatalogError(
                Finding(f"release {version} has no runtime {runtime!r}", release=version, fix=f"pick one of: {', '.join(names)}")
            )
        if runtime in release.deprecated_runtimes:
            return catalog.releases
        return _replace_release(catalog, replace(release, deprecated_runtimes=(*release.deprecated_runtimes, runtime)))
    if release.status == CURRENT:
        raise CatalogError(
            Finding(
                f"release {version} is current",
                release=version,
                fix="release its successor first (trainyard catalog new/release), then deprecate this one",
            )
        )
    if release.status != SUPPORTED:
        raise CatalogError(
            Finding(f"release {version} is {release.status}; only a supported release can be deprecated", release=version, fix="check trainyard catalog list")
        )
    return _replace_release(catalog, replace(release, status=DEPRECATED))


def retirement_blockers(version: str, stacks: Mapping[str, list[CatalogTenant]], current: str) -> list[Problem]:
    """The retirement guard: one finding per tenant, in any stack, that still pins ``version``."""
    return [
        Finding(
            f"tenant {tenant.name} (namespace {tenant.namespace}) in stack {stack} still pins {version}",
            file=f"stacks/Pulumi.{stack}.yaml",
            release=version,
            fix=f"move the tenant to a supported release (catalogVersion: {current}) and deploy before retiring",
        )
        for stack, tenant in pins_of(version, stacks)
    ]


def retire(catalog: Catalog, version: str, stacks: Mapping[str, list[CatalogTenant]]) -> tuple[Release, ...]:
    """Retire a deprecated release nobody pins; its runtimes stop being rendered and linted."""
    release = catalog.release(version)
    if release.status != DEPRECATED:
        raise CatalogError(
            Finding(
                f"release {version} is {release.status}; only a deprecated release can be retired",
                release=version,
                fix=f"deprecate it first (trainyard catalog deprecate {version}) so users get a warning",
            )
        )
    blockers = retirement_blockers(version, stacks, catalog.current.version)
    if blockers:
        raise CatalogError(*blockers)
    return _replace_release(catalog, replace(release, status=RETIRED))


__all__ = [
    "TODO_CHANGELOG",
    "deprecate",
    "freeze_release",
    "retire",
    "retirement_blockers",
    "start_release",
]


def pins_of(version: str, stacks: Mapping[str, list[CatalogTenant]]) -> list[tuple[str, CatalogTenant]]:
    """(stack, tenant) pairs whose tenant pins ``version``."""
    return [(stack, tenant) for stack, tenants in sorted(stacks.items()) for tenant in tenants if tenant.catalog_version == version]
