"""Freezing releases: content hashes in ``catalog.lock.json`` and the check that nothing released moved.

Two hashes per release, for two reasons:

* ``runtimes``: sha256 of each base runtime as rendered (canonical JSON, before
  status labels). This is the contract: what tenants run never changes.
* ``sources``: sha256 of every file in ``releases/<version>/``, so an edit is
  reported against the exact file even when it renders the same (e.g. a comment).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from trainyard.k8s import LABEL_SUPPORT
from trainyard.problems import Problem
from trainyard.runtimes.model import Catalog, CatalogError, Finding, ReleaseSources
from trainyard.runtimes.render import render_release_sources

LOCK_FORMAT = 1
HASH_DEFINITION = (
    "sha256 of the canonical JSON (sorted keys, no spaces, UTF-8) of each runtime as rendered from "
    f"releases/<version>/ with catalog labels and before status labels ({LABEL_SUPPORT})"
)


def content_hash(obj: Any) -> str:
    """Canonical JSON digest: key order and YAML formatting do not matter, content does."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def text_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def lock_entry(sources: ReleaseSources, rendered: Mapping[str, dict]) -> dict:
    """What the lock records for one release."""
    return {
        "runtimes": {name: content_hash(obj) for name, obj in sorted(rendered.items())},
        "sources": {name: text_hash(text) for name, text in sorted(sources.files.items())},
    }


def empty_lock() -> dict:
    return {"format": LOCK_FORMAT, "hash": HASH_DEFINITION, "releases": {}}


def with_release(lock: Mapping[str, Any], version: str, entry: dict) -> dict:
    """A new lock with one more frozen release; a frozen release is never replaced."""
    releases = dict(lock.get("releases") or {})
    if version in releases:
        raise CatalogError(
            Finding(f"release {version} is already frozen in the lock", release=version, fix="start a new release")
        )
    releases[version] = entry
    return {**empty_lock(), **lock, "releases": dict(sorted(releases.items(), key=lambda kv: _sort_key(kv[0])))}


def _sort_key(version: str) -> tuple:
    try:
        return tuple(int(p) for p in version.split("."))
    except ValueError:
        return (version,)


def release_drift(catalog: Catalog, version: str) -> list[Problem]:
    """Differences between a released version's sources/rendering and its lock entry."""
    release = catalog.release(version)
    fix = (
        f"revert the change (e.g. git checkout -- runtimes/releases/{version}) and make it in a new release: "
        f"trainyard catalog new <next> --from {catalog.current.version}"
    )
    entry = (catalog.lock.get("releases") or {}).get(version)
    if entry is None:
        return [
            Finding(
                f"release {version} is {release.status} but has no entry in the lock",
                file=catalog.lock_file,
                release=version,
                fix="restore catalog.lock.json from version control; releases are frozen only by trainyard catalog release",
            )
        ]
    sources = catalog.sources.get(version)
    if sources is None:
        return []  # a retired release may have had its sources removed; nothing left to drift
    findings: list[Problem] = []
    locked_sources = entry.get("sources") or {}
    actual_sources = {name: text_hash(text) for name, text in sources.files.items()}
    for name in sorted(set(locked_sources) | set(actual_sources)):
        path = f"{sources.directory}/{name}"
        if name not in actual_sources:
            findings.append(Finding("file of a released version was removed", file=path, release=version, fix=fix))
        elif name not in locked_sources:
            findings.append(Finding("file added to a released version", file=path, release=version, fix=fix))
        elif locked_sources[name] != actual_sources[name]:
            findings.append(Finding("file of a released version was edited", file=path, release=version, fix=fix))
    try:
        rendered = render_release_sources(sources, version)
    except CatalogError as err:
        return findings + list(err.findings)
    locked_runtimes = entry.get("runtimes") or {}
    for name in sorted(set(locked_runtimes) | set(rendered)):
        if name not in rendered:
            message = "runtime of a released version disappeared"
        elif name not in locked_runtimes:
            message = "runtime added to a released version"
        elif locked_runtimes[name] != content_hash(rendered[name]):
            message = "rendered runtime differs from the locked hash (released output changed)"
        else:
            continue
        findings.append(Finding(message, file=sources.path_of(name), runtime=name, release=version, fix=fix))
    return findings


def catalog_drift(catalog: Catalog) -> list[Problem]:
    """Drift of every released version, plus lock entries for versions that are not released."""
    findings: list[Problem] = []
    for release in catalog.releases:
        if release.released:
            findings.extend(release_drift(catalog, release.version))
        elif release.version in (catalog.lock.get("releases") or {}):
            findings.append(
                Finding(
                    f"release {release.version} is {release.status} but frozen in the lock",
                    file=catalog.catalog_file,
                    release=release.version,
                    fix="restore catalog.yaml from version control (a frozen release cannot go back to draft)",
                )
            )
    return findings
