"""Immutability: released output is frozen by catalog.lock.json; deprecation does not move it."""

from __future__ import annotations

from dataclasses import replace
import pytest

from catalog_builders import SHIPPED, TORCH_TEMPLATE, make_catalog, make_sources
from trainyard.runtimes.lock import catalog_drift, content_hash, release_drift
from trainyard.runtimes.model import Release, ReleaseSources
from trainyard.runtimes.publish import cluster_runtimes_of, render_release_runtimes
from trainyard.runtimes.store import load_catalog


def test_shipped_released_versions_match_the_lock():
    """Fails when anything a released version renders (or any file it is made of) changes."""
    catalog = load_catalog(SHIPPED)
    assert [str(f) for f in catalog_drift(catalog)] == []
    released = [r.version for r in catalog.releases if r.released]
    assert set(released) == set(catalog.lock["releases"]) and len(released) >= 2


def test_shipped_catalog_has_one_current_and_an_older_deprecated_release():
    statuses = {r.version: r.status for r in load_catalog(SHIPPED).releases}
    assert list(statuses.values()).count("current") == 1
    assert "deprecated" in statuses.values()


def test_content_hash_ignores_key_order_but_not_content():
    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": [1, 2], "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})


def _edit(sources: ReleaseSources, name: str, text: str | None) -> ReleaseSources:
    files = dict(sources.files)
    if text is None:
        files.pop(name)
    else:
        files[name] = text
    return replace(sources, files=files)


TWO_RUNTIMES = {name: TORCH_TEMPLATE.format(name=name) for name in ("torch-distributed", "torch-distributed-gpu")}
BASE = make_catalog(
    Release("1.1.0", "current", "x"),
    Release("1.0.0", "deprecated", "x"),
    sources={"1.1.0": make_sources("1.1.0"), "1.0.0": make_sources("1.0.0", TWO_RUNTIMES)},
)
TEMPLATE = BASE.sources["1.0.0"].files["torch-distributed.yaml.j2"]


@pytest.mark.parametrize(
    "file, new_text, want",
    [
        ("torch-distributed.yaml.j2", TEMPLATE.replace("numNodes: 1", "numNodes: 2"), ["file of a released version was edited", "rendered runtime differs"]),
        ("torch-distributed.yaml.j2", TEMPLATE + "# just a comment\n", ["file of a released version was edited"]),
        ("values.yaml", "images:\n  torch: pytorch/pytorch:9.9.9\n", ["file of a released version was edited", "rendered runtime differs", "rendered runtime differs"]),
        ("extra.yaml.j2", TEMPLATE.replace("name: torch-distributed", "name: extra"), ["file added to a released version", "runtime added to a released version"]),
        ("torch-distributed.yaml.j2", None, ["file of a released version was removed", "runtime of a released version disappeared"]),
    ],
    ids=["runtime edited", "comment added", "values edited", "runtime added", "runtime removed"],
)
def test_editing_a_released_version_is_detected_and_named(file, new_text, want):
    catalog = replace(BASE, sources={**BASE.sources, "1.0.0": _edit(BASE.sources["1.0.0"], file, new_text)})
    findings = release_drift(catalog, "1.0.0")
    assert [f.message[: len(w)] for f, w in zip(findings, want)] == want and len(findings) == len(want)
    assert all(f.file.startswith("releases/1.0.0/") and "catalog new" in f.fix for f in findings)
    assert release_drift(catalog, "1.1.0") == []


def test_drafts_may_change_freely_and_released_without_lock_entry_is_an_error():
    catalog = make_catalog(Release("1.1.0", "current", "x"), Release("1.2.0", "draft", "x"))
    assert catalog_drift(catalog) == []
    unlocked = replace(catalog, lock={"releases": {}})
    assert [f.message for f in catalog_drift(unlocked)] == ["release 1.1.0 is current but has no entry in the lock"]


@pytest.mark.parametrize(
    "status, deprecated_runtimes, want_labelled",
    [
        ("supported", (), set()),
        ("deprecated", (), {"torch-distributed", "torch-distributed-gpu"}),
        ("supported", ("torch-distributed-gpu",), {"torch-distributed-gpu"}),
    ],
    ids=["supported release", "deprecated release", "one deprecated runtime"],
)
def test_deprecation_adds_support_labels_without_touching_the_lock(status, deprecated_runtimes, want_labelled):
    catalog = replace(BASE, releases=(Release("1.1.0", "current", "x"), Release("1.0.0", status, "x", deprecated_runtimes)))
    assert catalog_drift(catalog) == []
    labelled = {
        r["metadata"]["name"]
        for r in cluster_runtimes_of(catalog, "1.0.0")
        if r["metadata"]["labels"].get("trainer.kubeflow.org/support") == "deprecated"
    }
    assert labelled == want_labelled
    hashes = {name: content_hash(obj) for name, obj in render_release_runtimes(catalog, "1.0.0").items()}
    assert hashes == catalog.lock["releases"]["1.0.0"]["runtimes"]


def test_retired_release_without_sources_is_not_drift():
    catalog = make_catalog(Release("1.1.0", "current", "x"), Release("1.0.0", "retired", "x"))
    catalog = replace(catalog, sources={"1.1.0": catalog.sources["1.1.0"]})
    assert catalog_drift(catalog) == []
