"""The two stacks a what-if compares, read and validated like `trainyard platform validate` reads one (I/O).

Without a proposed file, the stack in effect is the last committed `stacks/Pulumi.<env>.yaml` (`git show
HEAD:...`) and the proposal is the working copy: what a reviewer of the change would compare.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, is_dataclass
from pathlib import Path
from typing import Any, cast

from trainyard.platform.stack_fields import stack_fields
from trainyard.platform.stack_model import StackConfig, TenantSpec
from trainyard.platform.stack_source import StackSource, parse_stack_source, read_stack_source
from trainyard.platform.stack_validation import load_stack
from trainyard.platform.problems import ConfigProblem, StackConfigError


@dataclass(frozen=True)
class StackPair:
    current: StackConfig
    proposed: StackConfig
    current_label: str
    proposed_label: str


def committed_source(path: Path, root: Path) -> StackSource:
    """The stack file as the last commit has it (a problem if git has none)."""
    label = f"HEAD:{_label(path, root)}"
    shown = subprocess.run(["git", "-C", str(root), "show", label], capture_output=True, text=True)
    if shown.returncode != 0:
        return StackSource(label, {}, {}, ConfigProblem(
            label, "file", f"git has no committed version ({shown.stderr.strip().splitlines()[-1:] or ['no output']})"[:300],
            "commit the stack first, or compare files with --proposed FILE"))
    return parse_stack_source(shown.stdout, label)


def load(source: StackSource) -> StackConfig:
    """A validated StackConfig, or the StackConfigError `platform validate` would print."""
    if source.problem:
        raise StackConfigError([source.problem])
    from trainyard.runtimes.store import load_catalog

    return load_stack(source.values, file=source.file, catalog=load_catalog(), lines=source.lines)


def stack_pair(path: Path, root: Path, proposed: Path | None = None) -> StackPair:
    """(in effect, proposed): the working copy against a proposed file, or the last commit against the working copy."""
    if proposed is not None:
        return StackPair(load(read_stack_source(path, _label(path, root))),
                         load(read_stack_source(proposed, str(proposed))), _label(path, root), str(proposed))
    return StackPair(load(committed_source(path, root)), load(read_stack_source(path, _label(path, root))),
                     f"HEAD:{_label(path, root)}", f"{_label(path, root)} (working copy)")


def _label(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


SCHEDULING_KEYS = ("cluster", "topology", "scheduler", "priorityClasses", "queues")
TENANT_KEYS = ("queue", "quota", "defaultPriorityClass", "priorityClasses")
"""The stack keys whose values the what-if replays (a stack's and a tenant's)."""


def scheduling_changes(current: StackConfig, proposed: StackConfig) -> list[str]:
    """The settings a what-if replays that differ (`tenants[team-a].queue.weight: 2 -> 4`), in stack order."""
    changes: list[str] = []
    top = stack_fields(StackConfig)
    for key in SCHEDULING_KEYS:
        name = top[key].name
        _diff(key, getattr(current, name), getattr(proposed, name), changes)
    before = {t.name: t for t in current.tenants}
    after = {t.name: t for t in proposed.tenants}
    for name in sorted(set(before) | set(after)):
        if name not in after:
            changes.append(f"tenants[{name}]: removed")
        elif name not in before:
            changes.append(f"tenants[{name}]: added")
        else:
            per_tenant = stack_fields(TenantSpec)
            for key in TENANT_KEYS:
                field_name = per_tenant[key].name
                _diff(f"tenants[{name}].{key}", getattr(before[name], field_name), getattr(after[name], field_name),
                      changes)
    return changes


def _diff(path: str, a: Any, b: Any, out: list[str]) -> None:
    if a == b:
        return
    if is_dataclass(a) and is_dataclass(b) and type(a) is type(b) and not isinstance(a, type):
        for key, f in stack_fields(cast(type, type(a))).items():
            _diff(f"{path}.{key}", getattr(a, f.name), getattr(b, f.name), out)
    elif isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            _diff(f"{path}.{key}", a.get(key), b.get(key), out)
    else:
        out.append(f"{path}: {_show(a)} -> {_show(b)}")


def _show(value: Any) -> str:
    if isinstance(value, tuple) and value and is_dataclass(value[0]):
        return "[" + ", ".join(getattr(v, "name", str(v)) for v in value) + "]"
    return "(none)" if value in (None, (), {}) else str(value)
