"""Debian pieces the image build needs: host packages from apt, and a root filesystem from debootstrap.

The suite and mirror are the machine's own apt configuration (bookworm, deb.debian.org); debootstrap checks
every package against the suite's signed Release file with the archive keyring.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable

from trainyard.errors import TrainyardError
from trainyard.images.logrun import run_to_log

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
IMAGE_BUILD_PACKAGES = ("debootstrap",)
RUNC_BUILD_PACKAGES = ("libseccomp-dev", "pkg-config")  # runc links libseccomp statically, like its releases


class HostSetupError(TrainyardError, RuntimeError):
    """A host package could not be installed."""


def missing_host_packages(packages: tuple[str, ...]) -> list[str]:
    status = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *packages],
                            capture_output=True, text=True).stdout
    installed = {line.split()[0] for line in status.splitlines() if line.endswith(" installed")}
    return sorted(set(packages) - installed)


def ensure_host_packages(packages: tuple[str, ...] = IMAGE_BUILD_PACKAGES,
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


def debootstrap(rootfs: Path, packages: tuple[str, ...], log: Path) -> None:
    run_to_log(["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", DEBIAN_SUITE, str(rootfs),
          DEBIAN_MIRROR], log)
