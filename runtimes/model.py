"""The catalog's data model: releases, their sources, tenants and findings (`Finding(message, file=, runtime=,
release=, fix=)` builds the shared `trainyard.problems.Problem`).

Plain frozen dataclasses so every renderer and check is a pure function of them;
``store`` is the only place that builds them from files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from trainyard.errors import ProblemsError
from trainyard.problems import Finding, Problem

DRAFT = "draft"
CURRENT = "current"
SUPPORTED = "supported"
DEPRECATED = "deprecated"
RETIRED = "retired"

STATUSES = (DRAFT, CURRENT, SUPPORTED, DEPRECATED, RETIRED)
RELEASED_STATUSES = (CURRENT, SUPPORTED, DEPRECATED, RETIRED)
"""Statuses whose sources are frozen by the lock."""
PINNABLE_STATUSES = (CURRENT, SUPPORTED, DEPRECATED)
"""Statuses a tenant may pin: released and still rendered."""

TEMPLATE_SUFFIX = ".yaml.j2"
VALUES_FILE = "values.yaml"

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


def parse_version(text: str) -> tuple[int, int, int]:
    """MAJOR.MINOR.PATCH as a sortable tuple; releases carry no pre-release part (drafts are a status)."""
    match = _SEMVER.match(str(text))
    if not match:
        raise CatalogError(
            Finding(
                f"{text!r} is not a semantic version",
                fix="use MAJOR.MINOR.PATCH, e.g. 1.2.0",
            )
        )
    return tuple(int(part) for part in match.groups())  # type: ignore[return-value]


class CatalogError(ProblemsError):
    """Bad catalog input: carries the findings so the CLI can print every one and exit non-zero."""

    def __init__(self, *findings: Problem):
        super().__init__(findings)

    @property
    def findings(self) -> tuple[Problem, ...]:
        return self.problems


@dataclass(frozen=True)
class Release:
    """One catalog.yaml entry: what a reviewer approved and what state it is in."""

    version: str
    status: str
    changelog: str
    deprecated_runtimes: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[int, int, int]:
        return parse_version(self.version)

    @property
    def released(self) -> bool:
        return self.status in RELEASED_STATUSES


@dataclass(frozen=True)
class ReleaseSources:
    """The files of ``releases/<version>/`` as text, keyed by file name."""

    directory: str
    files: Mapping[str, str]

    @property
    def templates(self) -> dict[str, str]:
        """Runtime name (file stem) -> template text, in name order."""
        return {
            name[: -len(TEMPLATE_SUFFIX)]: text
            for name, text in sorted(self.files.items())
            if name.endswith(TEMPLATE_SUFFIX)
        }

    def path_of(self, runtime: str) -> str:
        return f"{self.directory}/{runtime}{TEMPLATE_SUFFIX}"


@dataclass(frozen=True)
class Catalog:
    """Everything needed to render and check the catalog, read once from disk."""

    releases: tuple[Release, ...]
    sources: Mapping[str, ReleaseSources] = field(default_factory=dict)
    lock: Mapping[str, Any] = field(default_factory=dict)
    catalog_file: str = "catalog.yaml"
    lock_file: str = "catalog.lock.json"

    def release(self, version: str) -> Release:
        for release in self.releases:
            if release.version == version:
                return release
        known = ", ".join(r.version for r in self.releases) or "none"
        raise CatalogError(
            Finding(
                f"no release {version} in the catalog (known: {known})",
                file=self.catalog_file,
                fix="pick a listed version (trainyard catalog list) or start one with trainyard catalog new",
            )
        )

    @property
    def current(self) -> Release:
        return next(r for r in self.releases if r.status == CURRENT)

    def sources_of(self, version: str) -> ReleaseSources:
        self.release(version)
        try:
            return self.sources[version]
        except KeyError:
            raise CatalogError(
                Finding(
                    f"release {version} has no sources directory",
                    file=f"releases/{version}",
                    release=version,
                    fix="restore the directory from version control (released sources are immutable)",
                )
            ) from None


@dataclass(frozen=True)
class CatalogTenant:
    """What the runtime catalog needs of a tenant (`TenantSpec.as_catalog_tenant`): where its TrainingRuntimes
    go, which release they come from, and the queue and default priority class they are scheduled with."""

    name: str
    namespace: str
    catalog_version: str
    queue: str
    priority_class: str | None = None
