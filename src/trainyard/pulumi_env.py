"""Run the pinned Pulumi CLI: no plugin downloads, no update checks; the local stack fully offline.

Only the local stack gets the offline file backend (state on this machine); shared environments keep
the user's backend and secrets provider, so their state never lives on one laptop by accident.

The CLI and its Python language host come from the toolchain cache and are put first on PATH (Pulumi
finds its language host next to itself); the Kubernetes provider built from Go modules is installed
into the plugin cache under PULUMI_HOME by `install_plugins`, so nothing is ever downloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from trainyard.paths import cache_dir, repo_root
from trainyard.toolchain.versions import tool


def state_dir() -> Path:
    return cache_dir() / "pulumi" / "state"


def pulumi_binary() -> Path:
    return tool("pulumi").path("pulumi")


def toolchain_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The pinned CLI, language host, analyzer and provider first on PATH; no downloads, no update checks."""
    env = dict(base if base is not None else os.environ)
    venv_bin = repo_root() / ".venv" / "bin"
    env.update({
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
        "PULUMI_SKIP_CONFIRMATIONS": "true",
        "PULUMI_PYTHON_CMD": str(venv_bin / "python"),
        "PATH": os.pathsep.join([str(tool("pulumi").bin_dir), str(tool("pulumi-policy-analyzer").bin_dir),
                                 str(tool("pulumi-kubernetes").bin_dir), str(venv_bin), env.get("PATH", "")]),
    })
    return env


def offline_env(base: dict[str, str] | None = None, backend_dir: Path | None = None) -> dict[str, str]:
    """For the local stack (and tests): a file backend under the trainyard cache (or `backend_dir`), an empty
    passphrase unless the caller set one, and trainyard's own PULUMI_HOME holding the built provider.

    The file backend rewrites the whole state after every step, and the upstream CRDs make it 13 MB of
    indented JSON: that was 65 s of a 76 s local `pulumi up`. The local stack saves it once per update
    instead (PULUMI_SKIP_CHECKPOINTS; set it to false to keep per-step checkpoints). A crashed local up loses
    that update's record only: after `pulumi cancel`, the next up adopts the objects it finds, since creates
    are server-side apply (tests/platform: test_crashed_up_converges_when_run_again). Shared stacks keep the
    default."""
    env = toolchain_env(base)
    home = cache_dir() / "pulumi" / "home"
    home.mkdir(parents=True, exist_ok=True)
    backend = backend_dir or state_dir()
    backend.mkdir(parents=True, exist_ok=True)
    env.update({
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": f"file://{backend}",
        "PULUMI_CONFIG_PASSPHRASE": env.get("PULUMI_CONFIG_PASSPHRASE", ""),
        "PULUMI_SKIP_CHECKPOINTS": env.get("PULUMI_SKIP_CHECKPOINTS", "true"),
    })
    return env


def shared_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """For shared environments (dev, prod): the user's own backend, login and secrets provider, untouched;
    only the pinned tools are put on PATH (Pulumi uses the provider found there)."""
    return toolchain_env(base)


def user_backend(env: dict[str, str], home: Path | None = None) -> str | None:
    """The backend the user's Pulumi would use: PULUMI_BACKEND_URL, else `pulumi login`'s current one."""
    if env.get("PULUMI_BACKEND_URL"):
        return env["PULUMI_BACKEND_URL"]
    credentials = (home or Path(env.get("PULUMI_HOME") or Path.home() / ".pulumi")) / "credentials.json"
    try:
        return json.loads(credentials.read_text()).get("current") or None
    except (OSError, ValueError):
        return None


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
