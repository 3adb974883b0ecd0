"""Release lifecycle transitions and the retirement guard (pure functions)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from catalog_builders import make_catalog, make_sources, make_tenant
from trainyard.runtimes.lifecycle import deprecate, freeze_release, retire, retirement_blockers, start_release
from trainyard.runtimes.model import CatalogError, Release

CATALOG = make_catalog(Release("1.1.0", "current", "x"), Release("1.0.0", "deprecated", "x"), Release("0.9.0", "supported", "x"))


def _statuses(releases) -> dict[str, str]:
    return {r.version: r.status for r in releases}


def test_start_release_adds_a_draft():
    releases = start_release(CATALOG, "1.2.0", "1.1.0")
    assert _statuses(releases)["1.2.0"] == "draft"


@pytest.mark.parametrize(
    "version, from_version, want",
    [("1.1.0", "1.1.0", "already exists"), ("1.0.5", "1.1.0", "not newer than 1.1.0"), ("1.2", "1.1.0", "not a semantic version"), ("1.2.0", "3.0.0", "no release 3.0.0")],
    ids=["existing", "older", "not semver", "unknown source"],
)
def test_start_release_rejects(version, from_version, want):
    with pytest.raises(CatalogError, match=want):
        start_release(CATALOG, version, from_version)


def _with_draft(changelog="Bump images"):
    sources = {**CATALOG.sources, "1.2.0": make_sources("1.2.0")}
    return replace(CATALOG, releases=(Release("1.2.0", "draft", changelog), *CATALOG.releases), sources=sources)


def test_freeze_makes_draft_current_and_previous_current_supported():
    releases, lock = freeze_release(_with_draft(), "1.2.0")
    assert _statuses(releases) == {"1.2.0": "current", "1.1.0": "supported", "1.0.0": "deprecated", "0.9.0": "supported"}
    assert set(lock["releases"]["1.2.0"]["runtimes"]) == {"torch-distributed"}
    assert lock["releases"]["1.1.0"] == CATALOG.lock["releases"]["1.1.0"]


@pytest.mark.parametrize(
    "catalog, version, want",
    [
        (CATALOG, "1.1.0", "released versions are immutable"),
        (_with_draft("TODO: say what changed and why"), "1.2.0", "has no changelog"),
        (replace(_with_draft(), sources={**CATALOG.sources, "1.2.0": make_sources("1.2.0", values="images: {}\n")}), "1.2.0", "unknown placeholder"),
        (
            replace(_with_draft(), sources={**_with_draft().sources, "1.0.0": make_sources("1.0.0", values="images:\n  torch: x:9\n")}),
            "1.2.0",
            "file of a released version was edited",
        ),
    ],
    ids=["already released", "no changelog", "template error", "older release drifted"],
)
def test_freeze_rejects(catalog, version, want):
    with pytest.raises(CatalogError, match=want):
        freeze_release(catalog, version)


@pytest.mark.parametrize(
    "version, runtime, want_status, want_deprecated",
    [("0.9.0", None, "deprecated", ()), ("1.1.0", "torch-distributed", "current", ("torch-distributed",))],
    ids=["supported release", "runtime of current release"],
)
def test_deprecate(version, runtime, want_status, want_deprecated):
    (release,) = [r for r in deprecate(CATALOG, version, runtime) if r.version == version]
    assert (release.status, release.deprecated_runtimes) == (want_status, want_deprecated)


@pytest.mark.parametrize(
    "version, runtime, want",
    [("1.1.0", None, "is current"), ("1.0.0", None, "only a supported release"), ("1.1.0", "nope", "has no runtime")],
    ids=["current", "already deprecated", "unknown runtime"],
)
def test_deprecate_rejects(version, runtime, want):
    with pytest.raises(CatalogError, match=want):
        deprecate(CATALOG, version, runtime)


STACKS = {
    "local": [make_tenant(name="team-a", catalog_version="1.1.0"), make_tenant(name="team-b", namespace="team-b", catalog_version="1.0.0")],
    "prod": [make_tenant(name="team-c", namespace="team-c", catalog_version="1.0.0")],
}


@pytest.mark.parametrize(
    "version, stacks, want_blockers",
    [
        ("1.0.0", STACKS, ["team-b:local", "team-c:prod"]),
        ("1.0.0", {"local": STACKS["local"][:1]}, []),
        ("0.9.0", STACKS, []),
        ("1.0.0", {}, []),
    ],
    ids=["pinned in two stacks", "no longer pinned", "other version", "no stacks"],
)
def test_retirement_guard(version, stacks, want_blockers):
    blockers = retirement_blockers(version, stacks, current="1.1.0")
    assert [f"{f.message.split()[1]}:{f.file.split('.')[1]}" for f in blockers] == want_blockers
    assert all("catalogVersion: 1.1.0" in f.fix for f in blockers)


def test_retire_refuses_while_pinned_and_needs_deprecation_first():
    with pytest.raises(CatalogError, match="team-b .* still pins 1.0.0"):
        retire(CATALOG, "1.0.0", STACKS)
    with pytest.raises(CatalogError, match="deprecate it first"):
        retire(CATALOG, "0.9.0", {})
    assert _statuses(retire(CATALOG, "1.0.0", {"local": STACKS["local"][:1]}))["1.0.0"] == "retired"
