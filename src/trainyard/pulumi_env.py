"""Run the pinned Pulumi CLI fully offline: local file backend, no plugin downloads, no update checks.

The CLI and its Python language host come from the toolchain cache and are put first on PATH (Pulumi
finds its language host next to itself); the Kubernetes provider built from Go modules is installed
into the plugin cache under PULUMI_HOME by `install_plugins`, so nothing is ever downloaded.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from trainyard.paths import cache_dir, repo_root
from trainyard.toolchain.versions import tool


def state_dir() -> Path:
    return cache_dir() / "pulumi" / "state"


def pulumi_binary() -> Path:
    return tool("pulumi").path("pulumi")


def offline_env(base: dict[str, str] | None = None, backend_dir: Path | None = None) -> dict[str, str]:
    """Environment for the pinned CLI; `backend_dir` holds the state (default: the shared offline backend)."""
    env = dict(base if base is not None else os.environ)
    home = cache_dir() / "pulumi" / "home"
    home.mkdir(parents=True, exist_ok=True)
    backend = backend_dir or state_dir()
    backend.mkdir(parents=True, exist_ok=True)
    venv_bin = repo_root() / ".venv" / "bin"
    env.update({
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": f"file://{backend}",
        "PULUMI_CONFIG_PASSPHRASE": env.get("PULUMI_CONFIG_PASSPHRASE", ""),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        "PULUMI_SKIP_CONFIRMATIONS": "true",
        "PULUMI_PYTHON_CMD": str(venv_bin / "python"),
        "PATH": os.pathsep.join([str(tool("pulumi").bin_dir), str(tool("pulumi-policy-analyzer").bin_dir),
                                 str(venv_bin), env.get("PATH", "")]),
    })
    return env


def run_pulumi(*args: str, cwd: Path | None = None, check: bool = True, capture: bool = False,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(pulumi_binary()), *args], cwd=cwd or repo_root(), env=env or offline_env(),
                          check=check, capture_output=capture, text=True)


def install_plugins() -> None:
    """Register the built provider in Pulumi's plugin cache (idempotent), so `pulumi plugin ls` shows it.

    Pulumi would also find it on PATH; the cache entry is what other tools (policy packs, `plugin ls`) see.
    """
    provider = tool("pulumi-kubernetes")
    version = provider.version.lstrip("v")
    marker = cache_dir() / "pulumi" / "home" / "plugins" / f"resource-kubernetes-v{version}"
    if marker.exists():
        return
    run_pulumi("plugin", "install", "resource", "kubernetes", version, "--file",
               str(provider.path("pulumi-resource-kubernetes")), capture=True)
