"""trainyard's own releases: which commit each is, and its files, to build a release's controller image beside
the checkout's (an upgrade tried on a local cluster, from the previous release to the checkout).

A release is the git tag `v<version>`. A clone that carries no tags (a mirror of one branch) still finds them:
docs/changelog.md records, under each release's heading, the line "Tag `v<version>` at commit <hash>."
"""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from trainyard.errors import TrainyardError

CHANGELOG = Path("docs/changelog.md")
_HEADING = re.compile(r"^## (\d+\.\d+\.\d+)\s*$", re.M)
_RECORD = re.compile(r"^Tag `v(\d+\.\d+\.\d+)` at commit ([0-9a-f]{7,40})\.", re.M)
PREVIOUS = "previous"
"""The revision name that means the newest release before the checkout's commit."""


class ReleaseError(TrainyardError):
    pass


@dataclass(frozen=True)
class Release:
    version: str
    commit: str  # as recorded: a tag's full hash, or the changelog's (possibly abbreviated) one

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def key(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.version.split("."))


def changelog_releases(text: str) -> list[Release]:
    """The releases the changelog records a commit for: a record counts only under its own version's heading."""
    found = []
    headings = list(_HEADING.finditer(text))
    for index, heading in enumerate(headings):
        end = headings[index + 1].start() if index + 1 < len(headings) else len(text)
        record = _RECORD.search(text, heading.end(), end)
        if record and record.group(1) == heading.group(1):
            found.append(Release(heading.group(1), record.group(2)))
    return found


def _git(repo: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=not binary, timeout=120)


def tagged_releases(repo: Path) -> list[Release]:
    listed = _git(repo, "for-each-ref", "--format=%(refname:short) %(*objectname) %(objectname)", "refs/tags/v*")
    found = []
    for line in listed.stdout.splitlines():
        name, *hashes = line.split()
        if re.fullmatch(r"v\d+\.\d+\.\d+", name):
            found.append(Release(name[1:], hashes[0]))  # an annotated tag's peeled commit comes first
    return found


def releases(repo: Path) -> list[Release]:
    """Every known release, newest first: tags, and the changelog's records for versions with no tag here."""
    tagged = {r.version: r for r in tagged_releases(repo)}
    changelog = repo / CHANGELOG
    recorded = changelog_releases(changelog.read_text(encoding="utf-8")) if changelog.is_file() else []
    merged = {**{r.version: r for r in recorded}, **tagged}
    return sorted(merged.values(), key=lambda r: r.key, reverse=True)


def commit_of(repo: Path, revision: str) -> str:
    resolved = _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    if resolved.returncode:
        raise ReleaseError(f"{revision!r} is not a commit of {repo}: name a tag (`git tag`), a release of "
                           f"{CHANGELOG}, a commit, or {PREVIOUS!r}")
    return resolved.stdout.strip()


def previous_release(repo: Path, head: str = "HEAD") -> Release:
    """The newest release whose commit is an ancestor of `head` and not `head` itself."""
    head_commit = commit_of(repo, head)
    for release in releases(repo):
        commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{release.commit}^{{commit}}").stdout.strip()
        if commit and commit != head_commit and not _git(repo, "merge-base", "--is-ancestor", commit, head_commit).returncode:
            return Release(release.version, commit)
    raise ReleaseError(f"no release before {head} in {repo}: tag one (`git tag v<version>`) or record it in {CHANGELOG}")


def resolve(repo: Path, revision: str) -> tuple[str, str]:
    """(commit, label) of a revision: `previous`, a version (`0.3.0`), a tag or any commit. The label names the
    image built from it (`v0.3.0`, or the short commit)."""
    if revision == PREVIOUS:
        release = previous_release(repo)
        return release.commit, release.tag
    known = {r.version: r for r in releases(repo)}
    version = revision[1:] if revision.startswith("v") else revision
    if version in known:
        return commit_of(repo, known[version].commit), known[version].tag
    commit = commit_of(repo, revision)
    return commit, commit[:12]


def export_tree(repo: Path, commit: str, destination: Path) -> Path:
    """The commit's files (as `git archive` gives them) under `destination`."""
    archive = _git(repo, "archive", "--format=tar", commit, binary=True)
    if archive.returncode:
        raise ReleaseError(f"git archive {commit} failed: {archive.stderr.decode(errors='replace').strip()}")
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(destination, filter="data")
    return destination
