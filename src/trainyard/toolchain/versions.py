"""Read tools/versions.toml, the one file that pins every upstream version."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from trainyard.paths import cache_dir, repo_root


@dataclass(frozen=True)
class Tool:
    """One pinned upstream component and where its binaries live once built."""

    name: str
    version: str
    module: str
    binaries: tuple[str, ...]
    group: str = "core"
    """`core`: what `make up` needs; `real-nodes`: only clusters with real kubelets (`--real-nodes N`)."""
    typical_build_s: int = 300
    """About how long a cold build takes on 2 cores (what `tools build` estimates from until this machine has built
    it once)."""

    @property
    def wrapper_dir(self) -> Path:
        """The Go wrapper module (go.mod + go.sum) that pins this tool's dependencies."""
        return repo_root() / "tools" / self.module

    @property
    def install_dir(self) -> Path:
        return cache_dir() / "tools" / f"{self.name}-{self.version}"

    @property
    def bin_dir(self) -> Path:
        return self.install_dir / "bin"

    @property
    def log_file(self) -> Path:
        return cache_dir() / "logs" / f"{self.name}-{self.version}.log"

    def path(self, binary: str) -> Path:
        if binary not in self.binaries:
            raise KeyError(f"{self.name} has no binary {binary!r} (it has {', '.join(self.binaries)})")
        return self.bin_dir / binary

    def missing_binaries(self) -> list[str]:
        return [b for b in self.binaries if not (self.bin_dir / b).is_file()]

    def is_built(self) -> bool:
        return not self.missing_binaries()


@lru_cache(maxsize=1)
def _pins() -> dict:
    with open(repo_root() / "tools" / "versions.toml", "rb") as handle:
        return tomllib.load(handle)


def all_tools() -> list[Tool]:
    return [
        Tool(name=name, version=spec["version"], module=spec["module"], binaries=tuple(spec["binaries"]),
             group=spec.get("group", "core"), typical_build_s=int(spec.get("typical_build_s", 300)))
        for name, spec in _pins()["tools"].items()
    ]


TOOL_GROUPS = ("core", "real-nodes")


def tools_in_group(group: str) -> list[Tool]:
    if group not in TOOL_GROUPS:
        raise KeyError(f"unknown tool group {group!r}; groups: {', '.join(TOOL_GROUPS)}")
    return [t for t in all_tools() if t.group == group]


def tool(name: str) -> Tool:
    for candidate in all_tools():
        if candidate.name == name:
            return candidate
    known = ", ".join(t.name for t in all_tools())
    raise KeyError(f"unknown tool {name!r}; known tools: {known}")


def binary(name: str) -> Path:
    """Path of a built binary by its file name, e.g. binary('kube-apiserver')."""
    for candidate in all_tools():
        if name in candidate.binaries:
            return candidate.path(name)
    raise KeyError(f"no pinned tool provides a binary named {name!r}")


def python_pins() -> dict[str, str]:
    """PyPI packages that must match built binaries (pulumi, pulumi-kubernetes)."""
    return dict(_pins()["python"])


def sdk_pins() -> dict[str, str]:
    """The Kubeflow Python SDK release the platform is tested against."""
    return dict(_pins()["sdk"])
