"""``catalog diff``: added, removed and changed runtimes, readable by a reviewer."""

from __future__ import annotations

from catalog_builders import TORCH_TEMPLATE, make_catalog, make_sources
from trainyard.runtimes.diff import diff_releases, format_changes
from trainyard.runtimes.model import Release
from trainyard.runtimes.publish import render_release_runtimes

OLD = {"torch-distributed": TORCH_TEMPLATE.format(name="torch-distributed"), "jax-distributed": TORCH_TEMPLATE.format(name="jax-distributed"), "gone": TORCH_TEMPLATE.format(name="gone")}
NEW = {"torch-distributed": TORCH_TEMPLATE.format(name="torch-distributed").replace("numNodes: 1", "numNodes: 2"), "jax-distributed": OLD["jax-distributed"], "fresh": TORCH_TEMPLATE.format(name="fresh")}
CATALOG = make_catalog(
    Release("1.1.0", "current", "x"),
    Release("1.0.0", "supported", "x"),
    sources={"1.0.0": make_sources("1.0.0", OLD), "1.1.0": make_sources("1.1.0", NEW)},
)


def test_diff_lists_added_removed_and_changed_but_not_version_labels():
    old, new = render_release_runtimes(CATALOG, "1.0.0"), render_release_runtimes(CATALOG, "1.1.0")
    changes = diff_releases("1.0.0", old, "1.1.0", new)
    assert [(c.name, c.kind) for c in changes] == [("fresh", "added"), ("gone", "removed"), ("torch-distributed", "changed")]
    changed = changes[-1].unified_diff
    assert "--- 1.0.0/torch-distributed\n+++ 1.1.0/torch-distributed" in changed
    assert "-    numNodes: 1\n+    numNodes: 2" in changed
    assert "catalog-version" not in changed


def test_format_changes_summarises_then_shows_diffs():
    old, new = render_release_runtimes(CATALOG, "1.0.0"), render_release_runtimes(CATALOG, "1.1.0")
    text = format_changes("1.0.0", "1.1.0", diff_releases("1.0.0", old, "1.1.0", new), ["jax-distributed"])
    assert text.splitlines()[:5] == [
        "catalog 1.0.0 -> 1.1.0 (trainyard.dev/catalog-version labels not shown)",
        "  + fresh (added)",
        "  - gone (removed)",
        "  ~ torch-distributed (changed)",
        "  = jax-distributed (unchanged)",
    ]


def test_same_release_has_no_changes():
    runtimes = render_release_runtimes(CATALOG, "1.1.0")
    assert diff_releases("1.1.0", runtimes, "1.1.0", runtimes) == []
