"""Debian packages the host needs to build tools, images and real nodes, installed with apt when missing."""

from __future__ import annotations

import os
import subprocess
from typing import Callable

from trainyard.errors import TrainyardError

RUNC_BUILD_PACKAGES = ("libseccomp-dev", "pkg-config")  # runc links libseccomp statically, like its releases


class HostSetupError(TrainyardError, RuntimeError):
    """A host package could not be installed."""


def missing_host_packages(packages: tuple[str, ...]) -> list[str]:
    status = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *packages],
                            capture_output=True, text=True).stdout
    installed = {line.split()[0] for line in status.splitlines() if line.endswith(" installed")}
    return sorted(set(packages) - installed)


def ensure_host_packages(packages: tuple[str, ...],
                         echo: Callable[[str], None] = lambda _: None) -> None:
    """apt-get install what is missing (as root; real nodes need root anyway)."""
    missing = missing_host_packages(packages)
    if not missing:
        return
    if os.geteuid() != 0:
        raise HostSetupError(f"missing Debian packages {', '.join(missing)}: run as root, or "
                             f"`sudo apt-get install -y {' '.join(missing)}`")
    echo(f"installing Debian packages: {', '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        if done.returncode:
            raise HostSetupError(f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()[-400:]}")
