"""The real-node test cluster: its name and ports, the console script, and kubectl against it (as a user)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from trainyard.cluster import local
from trainyard.paths import repo_root
from trainyard.toolchain.versions import binary

NAME = os.environ.get("TRAINYARD_REAL_CLUSTER", "trainyard-real")
PORT_BASE = int(os.environ.get("TRAINYARD_REAL_PORT_BASE", "26800"))
REAL_NODES = 2
TRAINYARD = Path(sys.executable).parent / "trainyard"


def trainyard(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.run([str(TRAINYARD), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=repo_root())


@dataclass
class RealCluster:
    name: str
    up: subprocess.CompletedProcess
    seconds: float
    ip_forward_before: str
    """The host's net.ipv4.ip_forward before `up` (real nodes turn it on; `down` restores it)."""

    @property
    def kubeconfig(self) -> Path:
        return local.ClusterPaths.for_name(self.name).kubeconfig

    def kubectl(self, *args: str, user: tuple[str, str] | None = None, input_text: str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
        identity = [f"--as={user[0]}", f"--as-group={user[1]}"] if user else []
        return subprocess.run([str(binary("kubectl")), "--kubeconfig", str(self.kubeconfig), *identity, *args],
                              capture_output=True, text=True, input=input_text, timeout=timeout)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        out = self.kubectl("get", kind, name, *(["-n", namespace] if namespace else []), "-o", "json")
        return json.loads(out.stdout) if out.returncode == 0 else None

    def items(self, kind: str, *selector: str) -> list[dict]:
        out = self.kubectl("get", kind, *selector, "-o", "json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["items"]


