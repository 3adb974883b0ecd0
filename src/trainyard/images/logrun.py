"""Run an image-build command with its output appended to the build's log."""

from __future__ import annotations

import subprocess
from pathlib import Path

from trainyard.errors import TrainyardError


class ImageBuildError(TrainyardError, RuntimeError):
    """An image failed to build; names the command and the log."""


def run_to_log(argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    if code:
        raise ImageBuildError(f"`{' '.join(argv)[:160]}` exited {code}; see {log}")
