"""The catalog directory on disk: read it into a ``Catalog``, write changes back atomically.

Layout (relative to the catalog root, by default this package's directory)::

    catalog.yaml               releases: version, status, changelog, deprecatedRuntimes
    catalog.lock.json          frozen hashes of every released version (see lock.py)
    releases/<version>/        values.yaml + <runtime>.yaml.j2, one runtime per file
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from trainyard import yaml_input
from trainyard.runtimes.model import (
    CURRENT,
    STATUSES,
    TEMPLATE_SUFFIX,
    VALUES_FILE,
    Catalog,
    CatalogError,
    Finding,
    Release,
    ReleaseSources,
    parse_version,
)

CATALOG_FILE = "catalog.yaml"
LOCK_FILE = "catalog.lock.json"
RELEASES_DIR = "releases"
CATALOG_DIR_ENV = "TRAINYARD_CATALOG_DIR"

_CATALOG_HEADER = """\
# The training-runtime catalog: every release, its status and what changed.
# Status: draft -> current -> supported -> deprecated -> retired (exactly one current).
# Edit through `trainyard catalog new|release|deprecate|retire`; sources of released
# versions are frozen by catalog.lock.json.
"""


def default_catalog_dir() -> Path:
    """The catalog root: $TRAINYARD_CATALOG_DIR, else this package's directory (the checkout, when editable)."""
    override = os.environ.get(CATALOG_DIR_ENV)
    return Path(override).resolve() if override else Path(__file__).resolve().parent


def parse_catalog(document: Any, *, file: str = CATALOG_FILE) -> tuple[Release, ...]:
    """catalog.yaml -> releases, newest first; rejects anything a reviewer could misread."""
    entries = document.get("releases") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CatalogError(Finding("must have a non-empty 'releases' list", file=file, fix="list at least one release"))
    releases, findings, seen = [], [], set()
    for index, entry in enumerate(entries):
        where = f"releases[{index}]"
        if not isinstance(entry, dict):
            findings.append(Finding(f"{where} must be a mapping", file=file, fix="write version/status/changelog keys"))
            continue
        unknown = set(entry) - {"version", "status", "changelog", "deprecatedRuntimes"}
        version = str(entry.get("version", ""))
        status = entry.get("status")
        changelog = entry.get("changelog")
        try:
            parse_version(version)
        except CatalogError as err:
            findings.append(Finding(f"{where}.version: {err.findings[0].message}", file=file, fix=err.findings[0].fix))
            continue
        if version in seen:
            findings.append(Finding(f"{where}: version {version} is listed twice", file=file, fix="remove the duplicate"))
        seen.add(version)
        if status not in STATUSES:
            findings.append(
                Finding(f"{where}.status {status!r} is not one of {', '.join(STATUSES)}", file=file, release=version, fix="use a listed status")
            )
        if not isinstance(changelog, str) or not changelog.strip():
            findings.append(Finding(f"{where}.changelog is missing", file=file, release=version, fix="say what changed in this release"))
        if unknown:
            findings.append(Finding(f"{where} has unknown keys {sorted(unknown)}", file=file, release=version, fix="remove them"))
        deprecated = entry.get("deprecatedRuntimes") or []
        if not isinstance(deprecated, list) or not all(isinstance(n, str) for n in deprecated):
            findings.append(Finding(f"{where}.deprecatedRuntimes must be a list of runtime names", file=file, release=version, fix="list names"))
            deprecated = []
        releases.append(Release(version, str(status), str(changelog or "").strip(), tuple(deprecated)))
    currents = [r.version for r in releases if r.status == CURRENT]
    if len(currents) != 1:
        findings.append(
            Finding(
                f"exactly one release must be current, found {len(currents)} ({', '.join(currents) or 'none'})",
                file=file,
                fix="mark one release current (trainyard catalog release makes the new one current)",
            )
        )
    if findings:
        raise CatalogError(*findings)
    return tuple(sorted(releases, key=lambda r: r.key, reverse=True))


def catalog_document(releases: Iterable[Release]) -> dict:
    """Releases -> the catalog.yaml mapping (inverse of parse_catalog)."""
    entries = []
    for release in sorted(releases, key=lambda r: r.key, reverse=True):
        entry: dict[str, Any] = {"version": release.version, "status": release.status, "changelog": release.changelog}
        if release.deprecated_runtimes:
            entry["deprecatedRuntimes"] = list(release.deprecated_runtimes)
        entries.append(entry)
    return {"releases": entries}


def read_release_sources(root: Path, version: str) -> ReleaseSources | None:
    directory = root / RELEASES_DIR / version
    if not directory.is_dir():
        return None
    files = {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(directory.iterdir())
        if path.is_file() and (path.name.endswith(TEMPLATE_SUFFIX) or path.name == VALUES_FILE)
    }
    return ReleaseSources(directory=f"{RELEASES_DIR}/{version}", files=files)


def load_catalog(root: Path | str | None = None) -> Catalog:
    """Read catalog.yaml, the lock and every release's sources."""
    root = Path(root) if root is not None else default_catalog_dir()
    catalog_path = root / CATALOG_FILE
    if not catalog_path.is_file():
        raise CatalogError(
            Finding("not found", file=str(catalog_path), fix=f"point --catalog-dir / ${CATALOG_DIR_ENV} at the runtimes directory")
        )
    try:
        document = yaml_input.load(yaml_input.read_text(catalog_path, CATALOG_FILE), CATALOG_FILE)
    except yaml_input.YamlInputError as err:
        raise CatalogError(Finding(err.detail, file=CATALOG_FILE, fix=err.fix)) from None
    releases = parse_catalog(document)
    sources = {r.version: s for r in releases if (s := read_release_sources(root, r.version)) is not None}
    return Catalog(releases=releases, sources=sources, lock=read_lock(root))


def read_lock(root: Path) -> dict:
    path = root / LOCK_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise CatalogError(
            Finding(f"invalid JSON: {err}", file=LOCK_FILE, fix="restore catalog.lock.json from version control")
        ) from None


def _atomic_write(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False, prefix=f".{path.name}.") as tmp:
        tmp.write(text)
    os.replace(tmp.name, path)


class _CatalogDumper(yaml.SafeDumper):
    """Multi-line changelogs as `|-` blocks, so reviewers read catalog.yaml diffs as prose."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_CatalogDumper.add_representer(str, _str_representer)


def write_catalog(root: Path, releases: Iterable[Release]) -> None:
    body = yaml.dump(catalog_document(releases), Dumper=_CatalogDumper, sort_keys=False, allow_unicode=True, width=100)
    _atomic_write(root / CATALOG_FILE, _CATALOG_HEADER + body)


def write_lock(root: Path, lock: Mapping[str, Any]) -> None:
    _atomic_write(root / LOCK_FILE, json.dumps(lock, indent=2, sort_keys=False) + "\n")


_COMMENT = re.compile(r"^\s*(#|\{#).*$", re.MULTILINE)
_SEMVER_TEXT = r"\d+\.\d+\.\d+"


def retarget_release_headers(text: str, from_version: str, to_version: str) -> str:
    """Comments that say which release a file belongs to, made to say the new one.

    A release's files name their own version only in comments (``# Parameters of catalog release
    1.1.0 ...``); the version labels of the runtimes come from the catalog at render time. In comment
    lines, ``catalog release <any version>`` and ``release <from_version>`` become ``to_version``; other
    versions (upstream ones, ``v2.3.0``) are left alone.
    """
    own = re.compile(rf"\b(catalog release\s+){_SEMVER_TEXT}(?![\w.])|\b(release\s+){re.escape(from_version)}(?![\w.])")

    def comment(match: re.Match) -> str:
        return own.sub(lambda m: f"{m.group(1) or m.group(2)}{to_version}", match.group(0))

    return _COMMENT.sub(comment, text)


def copy_release_sources(root: Path, from_version: str, to_version: str) -> None:
    """Copy a release's files to a new release directory (all or nothing), its version headers retargeted."""
    source = root / RELEASES_DIR / from_version
    target = root / RELEASES_DIR / to_version
    if target.exists():
        raise CatalogError(
            Finding("already exists", file=f"{RELEASES_DIR}/{to_version}", fix="pick another version or remove the directory")
        )
    staging = Path(tempfile.mkdtemp(prefix=f".{to_version}.", dir=source.parent))
    try:
        for path in sorted(source.iterdir()):
            if path.is_file() and (path.name.endswith(TEMPLATE_SUFFIX) or path.name == VALUES_FILE):
                (staging / path.name).write_text(retarget_release_headers(path.read_text(), from_version, to_version))
                shutil.copystat(path, staging / path.name)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def remove_release_sources(root: Path, version: str) -> None:
    """Undo copy_release_sources when a later step of ``catalog new`` fails."""
    shutil.rmtree(root / RELEASES_DIR / version, ignore_errors=True)
