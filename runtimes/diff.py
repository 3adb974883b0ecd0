"""``catalog diff``: what a reviewer needs to approve a release, runtime by runtime.

The catalog-version label differs on every runtime by construction, so it is
left out of the comparison; everything else shows as a unified diff of YAML.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass

import yaml

from trainyard.runtimes import labels

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


@dataclass(frozen=True)
class RuntimeChange:
    name: str
    kind: str
    """added, removed or changed"""
    unified_diff: str = ""


def without_catalog_version(runtime: dict) -> dict:
    """The runtime minus the labels that only say which release rendered it."""
    stripped = copy.deepcopy(runtime)
    stripped.get("metadata", {}).get("labels", {}).pop(labels.CATALOG_VERSION, None)
    template_labels = stripped.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {})
    template_labels.pop(labels.CATALOG_VERSION, None)
    if not template_labels:
        stripped.get("spec", {}).get("template", {}).get("metadata", {}).pop("labels", None)
    return stripped


def to_yaml(runtime: dict) -> str:
    return yaml.safe_dump(runtime, sort_keys=False, default_flow_style=False, width=120)


def diff_releases(old_version: str, old: dict[str, dict], new_version: str, new: dict[str, dict]) -> list[RuntimeChange]:
    """Per runtime name: added, removed, or changed with a unified diff; unchanged runtimes are omitted."""
    changes = []
    for name in sorted(set(old) | set(new)):
        if name not in old:
            changes.append(RuntimeChange(name, ADDED, _unified(name, None, old_version, new[name], new_version)))
        elif name not in new:
            changes.append(RuntimeChange(name, REMOVED))
        else:
            text = _unified(name, old[name], old_version, new[name], new_version)
            if text:
                changes.append(RuntimeChange(name, CHANGED, text))
    return changes


def _unified(name: str, old: dict | None, old_version: str, new: dict, new_version: str) -> str:
    before = to_yaml(without_catalog_version(old)).splitlines(keepends=True) if old is not None else []
    after = to_yaml(without_catalog_version(new)).splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, f"{old_version}/{name}", f"{new_version}/{name}"))


def format_changes(old_version: str, new_version: str, changes: list[RuntimeChange], unchanged: list[str]) -> str:
    """A summary line per runtime, then each diff."""
    lines = [f"catalog {old_version} -> {new_version} ({labels.CATALOG_VERSION} labels not shown)"]
    marks = {ADDED: "+", REMOVED: "-", CHANGED: "~"}
    lines += [f"  {marks[c.kind]} {c.name} ({c.kind})" for c in changes]
    lines += [f"  = {name} (unchanged)" for name in unchanged]
    if not changes:
        lines.append("no runtime changed")
    for change in changes:
        if change.unified_diff:
            lines += ["", change.unified_diff.rstrip("\n")]
    return "\n".join(lines) + "\n"
