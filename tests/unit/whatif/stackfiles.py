"""Stack files for the what-if tests: the repo's local stack, edited the way a reviewer's change would edit it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable

import yaml

from trainyard.paths import repo_root
from trainyard.platform.stack_model import StackConfig
from trainyard.platform.stack_source import read_stack_source
from trainyard.whatif.stacks import load

LOCAL = repo_root() / "stacks" / "Pulumi.local.yaml"


def local_document() -> dict:
    return yaml.safe_load(LOCAL.read_text())


def tenants(document: dict) -> dict[str, dict]:
    return {t["name"]: t for t in document["config"]["trainyard:tenants"]}


def roomy(document: dict) -> dict:
    """Both local tenants may use the whole cluster (capability and quota 32 GPUs) with equal weights: what a
    weight or quota change does then shows, not the caps the local stack sets."""
    out = copy.deepcopy(document)
    for tenant in tenants(out).values():
        tenant["queue"]["weight"] = 1
        tenant["queue"]["capability"]["nvidia.com/gpu"] = 32
        tenant["quota"]["gpu"] = 32
    return out


def edited(document: dict, change: Callable[[dict], None]) -> dict:
    out = copy.deepcopy(document)
    change(out)
    return out


def write(document: dict, path: Path) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def config(document: dict, tmp_path: Path, name: str = "Pulumi.t.yaml") -> StackConfig:
    path = write(document, tmp_path / name)
    return load(read_stack_source(path))
