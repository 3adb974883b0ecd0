"""Debian pieces the image build needs: a root filesystem from debootstrap (host packages: `toolchain.host_packages`).

The suite and mirror are the machine's own apt configuration (bookworm, deb.debian.org); debootstrap checks
every package against the suite's signed Release file with the archive keyring.
"""

from __future__ import annotations

from pathlib import Path

from trainyard.images.logrun import run_to_log

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
IMAGE_BUILD_PACKAGES = ("debootstrap",)


def debootstrap(rootfs: Path, packages: tuple[str, ...], log: Path) -> None:
    run_to_log(["debootstrap", "--variant=minbase", f"--include={','.join(packages)}", DEBIAN_SUITE, str(rootfs),
          DEBIAN_MIRROR], log)
