"""trainyard's own releases, found by tag or by the changelog's record (a clone of one branch carries no tags),
and a release's controller image built and cached apart from the checkout's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trainyard.images import build as B
from trainyard.images import releases as R
from trainyard.paths import repo_root

CHANGELOG = """# Changelog

## 0.3.0

Tag `v0.3.0` at commit {c3}.

- checkpoints

## 0.2.0

Tag `v0.2.0` at commit {c2}.

## 0.1.0

The first release (no record line).
"""


@pytest.mark.parametrize("text, expected", [
    (CHANGELOG.format(c3="abc1234", c2="def5678"), [R.Release("0.3.0", "abc1234"), R.Release("0.2.0", "def5678")]),
    ("## 0.3.0\n\nnothing\n\n## 0.2.0\n\nTag `v0.3.0` at commit abc1234.\n", []),  # a record under another heading
    ("## 0.3.0\nTag `v0.3.0` at commit XYZ.\n", []),  # not a hash
    ("", []),
])
def test_the_changelog_records_a_commit_under_each_releases_own_heading(text, expected):
    assert R.changelog_releases(text) == expected


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def commit(repo: Path, content: str) -> str:
    (repo / "code.py").write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", content)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    """Commits c1 -> c2 -> c3 -> c4 (HEAD); releases 0.1.0 = c1 (tag), 0.2.0 = c2 (changelog only), 0.3.0 = c4."""
    git(tmp_path, "init", "-q")
    c1 = commit(tmp_path, "one")
    c2 = commit(tmp_path, "two")
    c3 = commit(tmp_path, "three")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "changelog.md").write_text(CHANGELOG.format(c3="0" * 7, c2=c2[:7]))
    c4 = commit(tmp_path, "four")
    git(tmp_path, "tag", "v0.1.0", c1)
    git(tmp_path, "tag", "-a", "-m", "annotated", "v0.3.0", c4)
    return tmp_path, {"c1": c1, "c2": c2, "c3": c3, "c4": c4}


def test_the_previous_release_is_the_newest_one_before_head_tagged_or_recorded(repo):
    path, c = repo
    assert R.previous_release(path) == R.Release("0.2.0", c["c2"]), "HEAD's own tag (0.3.0) is not before it"
    assert R.previous_release(path, c["c3"]) == R.Release("0.2.0", c["c2"])
    assert R.previous_release(path, c["c2"]) == R.Release("0.1.0", c["c1"])
    with pytest.raises(R.ReleaseError, match="no release before"):
        R.previous_release(path, c["c1"])


def test_a_tag_wins_over_the_changelogs_record(repo):
    path, c = repo
    assert [(r.version, r.commit) for r in R.releases(path)] == [
        ("0.3.0", c["c4"]), ("0.2.0", c["c2"][:7]), ("0.1.0", c["c1"])], "the annotated tag peeled to its commit"


@pytest.mark.parametrize("revision, expected", [
    ("previous", ("c2", "v0.2.0")), ("0.2.0", ("c2", "v0.2.0")), ("v0.1.0", ("c1", "v0.1.0")),
    ("HEAD~1", ("c3", None)),
])
def test_a_revision_resolves_to_a_commit_and_the_label_its_image_carries(repo, revision, expected):
    path, c = repo
    resolved = R.resolve(path, revision)
    assert resolved == (c[expected[0]], expected[1] or c[expected[0]][:12])


def test_an_unknown_revision_is_refused_naming_what_to_give(repo):
    with pytest.raises(R.ReleaseError, match="name a tag .*'previous'"):
        R.resolve(repo[0], "v9.9.9")


def test_a_releases_files_are_its_commits(repo, tmp_path):
    path, c = repo
    tree = R.export_tree(path, c["c2"], tmp_path / "out")
    assert (tree / "code.py").read_text() == "two" and not (tree / "docs").exists()


def test_a_releases_controller_image_is_cached_and_named_apart_from_the_checkouts(tmp_path):
    """Building one must not delete the other (each replaces only earlier builds of its own lineage), and only the
    checkout's build takes the `:local` name that examples use."""
    checkout = B.controller_recipe()
    release = B.controller_recipe(repo_root(), release="v0.3.0")
    assert release.alias == "trainyard.local/controller:v0.3.0" and checkout.alias == "trainyard.local/controller:local"
    assert release.tag == checkout.tag, "the same files give the same image"
    assert release.directory != checkout.directory
    assert release.directory.name.startswith("controller@v0.3.0-") and checkout.directory.name.startswith("controller-")


def test_the_repositorys_changelog_records_every_release_before_the_newest():
    """The newest entry's commit can only be recorded by a later commit; every older one has its record."""
    text = (repo_root() / R.CHANGELOG).read_text()
    headings = R._HEADING.findall(text)
    recorded = [r.version for r in R.changelog_releases(text)]
    assert len(headings) >= 2 and recorded in (headings, headings[1:])
