"""A local cluster's directory, its recorded state and the pinned kubectl against it.

Below `local` (up/down/status) and `trainer_controllers` (the TrainJob controller processes), which both use it.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from trainyard.cluster.processes import port_in_use
from trainyard.errors import TrainyardError
from trainyard.paths import cache_dir
from trainyard.toolchain.versions import tool

REQUIRED_TOOLS = ("kubernetes", "etcd", "kwok", "jobset", "volcano", "prometheus", "kube-state-metrics")


class ClusterError(TrainyardError, RuntimeError):
    """A problem the user can fix; the message says how."""


@dataclass(frozen=True)
class ClusterPaths:
    root: Path

    @classmethod
    def for_name(cls, name: str) -> "ClusterPaths":
        return cls(cache_dir() / "clusters" / name)

    @property
    def kwok_workdir(self) -> Path:
        return self.root / "kwok"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig.yaml"

    @property
    def state(self) -> Path:
        return self.root / "cluster.json"

    @property
    def certs(self) -> Path:
        return self.root / "certs"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def scheduler_conf(self) -> Path:
        return self.root / "volcano" / "volcano-scheduler.conf"


def tool_binaries() -> dict[str, Path]:
    missing = [name for name in REQUIRED_TOOLS if not tool(name).is_built()]
    if missing:
        raise ClusterError(
            f"missing tools: {', '.join(missing)}; build them with `trainyard tools build {' '.join(missing)}` "
            "(or `make tools`)"
        )
    out: dict[str, Path] = {}
    for name in REQUIRED_TOOLS:
        item = tool(name)
        for binary in item.binaries:
            out[binary] = item.path(binary)
    return out


def kwok_env(paths: ClusterPaths, binaries: dict[str, Path]) -> dict[str, str]:
    """kwokctl looks kubectl up on PATH first: put the pinned one in front."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(binaries["kubectl"].parent), str(binaries["kwokctl"].parent), env.get("PATH", "")])
    env["KWOK_WORKDIR"] = str(paths.kwok_workdir)
    env["KWOK_RUNTIME"] = "binary"
    return env


def run_logged(argv: list[str], env: dict[str, str], what: str, log: Path, input_text: str | None = None) -> str:
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, input=input_text)
    with open(log, "a") as handle:
        handle.write(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise ClusterError(f"{what} failed (exit {proc.returncode}): {' | '.join(tail)}; full output in {log}")
    return proc.stdout


def read_state(name: str) -> dict | None:
    paths = ClusterPaths.for_name(name)
    if not paths.state.exists():
        return None
    return json.loads(paths.state.read_text())


def is_running(name: str) -> bool:
    state = read_state(name)
    if not state:
        return False
    return port_in_use(state["ports"]["apiserver"])


def kubectl(name: str, *args: str, input_text: str | None = None) -> str:
    """Run the pinned kubectl against a local cluster."""
    paths = ClusterPaths.for_name(name)
    binaries = tool_binaries()
    return run_logged([str(binaries["kubectl"]), "--kubeconfig", str(paths.kubeconfig), *args], kwok_env(paths, binaries),
                f"kubectl {' '.join(args[:2])}", paths.logs / "kubectl.log", input_text)
