"""Run an image-build command with its output appended to the build's log, and say on the terminal which step a
build is at (an image build takes minutes; its commands' output goes to the log only)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

from trainyard.errors import TrainyardError


class ImageBuildError(TrainyardError, RuntimeError):
    """An image failed to build; names the command and the log."""


_reporters: list[Callable[[list[str]], None]] = []


def step_words(label: str, step: int, argv: list[str], elapsed_s: float, typical_s: float | None) -> str:
    """`image training: step 3, pip install (45 s so far, about 3 min left)`: the command's program and its first
    word that is not an option, so a step reads as what it does."""
    program = Path(argv[0]).name if argv else "?"
    words = [w for w in argv[1:] if not w.startswith("-") and "/" not in w][:1]
    if program.startswith("python") and "pip" in argv[1:3]:
        program, words = "pip", [w for w in argv[argv.index("pip") + 1:] if not w.startswith("-")][:1]
    left = "" if typical_s is None else f", about {_minutes(max(typical_s - elapsed_s, 0))} left"
    return f"{label}: step {step}, {' '.join([program, *words])} ({elapsed_s:.0f} s so far{left})"


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


@contextlib.contextmanager
def reporting_steps(label: str, echo: Callable[[str], None], typical_s: float | None = None) -> Iterator[None]:
    """While open, each `run_to_log` says which step of `label` starts, with the time so far and, from the last
    build of the same image, the time left."""
    started, count = time.monotonic(), [0]

    def report(argv: list[str]) -> None:
        count[0] += 1
        echo(step_words(label, count[0], argv, time.monotonic() - started, typical_s))

    _reporters.append(report)
    try:
        yield
    finally:
        _reporters.remove(report)


def run_to_log(argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    for report in _reporters:
        report(argv)
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    if code:
        raise ImageBuildError(f"`{' '.join(argv)[:160]}` exited {code}; see {log}")
