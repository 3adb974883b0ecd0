"""Build missing tools, one log file per tool; skip whatever is already built."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from trainyard.errors import TrainyardError
from trainyard.toolchain import modules, recipes
from trainyard.toolchain.versions import Tool, all_tools, tool as lookup_tool


class ToolBuildError(TrainyardError, RuntimeError):
    """A tool failed to build; names the tool and its log."""

    def __init__(self, tool: Tool, log: Path, detail: str):
        super().__init__(f"building {tool.name} {tool.version} failed: {detail}; see the log {log}")
        self.tool = tool
        self.log = log


@dataclass
class BuildResult:
    tool: Tool
    built: bool  # False: was already there
    seconds: float


def _load_optional_recipes() -> None:
    """Recipes that live in their own module register themselves on import."""
    from trainyard.toolchain import recipes_pulumi  # noqa: F401


def selected_tools(names: Iterable[str] = ()) -> list[Tool]:
    names = list(names)
    return [lookup_tool(n) for n in names] if names else all_tools()


@contextlib.contextmanager
def _building(tool: Tool) -> Iterator[None]:
    """One build of a tool at a time on this machine (`make up` and `make test` started together, or a test run
    beside a build): the second waits for the first, then finds the tool built. Also no binary is trusted while
    another process may still be writing it."""
    tool.log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(tool.log_file.parent / f".{tool.name}-{tool.version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_tool(tool: Tool, on_step: Callable[[str], None] = lambda _: None) -> BuildResult:
    """Build one tool unless all its binaries exist. Output of every step goes to its log."""
    with _building(tool):
        if tool.is_built():
            return BuildResult(tool, built=False, seconds=0.0)
        return _build(tool, on_step)


def _build(tool: Tool, on_step: Callable[[str], None]) -> BuildResult:
    _load_optional_recipes()
    tool.bin_dir.mkdir(parents=True, exist_ok=True)
    tool.log_file.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(tool.log_file, "w") as log:
        log.write(f"# building {tool.name} {tool.version} in {tool.wrapper_dir}\n")
        log.flush()
        try:
            steps = recipes.steps_for(tool)
        except (subprocess.CalledProcessError, OSError, KeyError) as exc:
            log.write(f"preparing the recipe failed: {exc}\n{getattr(exc, 'stderr', '') or ''}\n")
            raise ToolBuildError(tool, tool.log_file, "could not prepare the build") from exc
        for step in steps:
            on_step(step.describe())
            log.write(f"\n$ {step.describe()}\n")
            log.flush()
            if isinstance(step, recipes.GoStep):
                code = subprocess.run(
                    ["go", *step.args], cwd=step.cwd or tool.wrapper_dir, env={**modules.go_env(), **step.env},
                    stdout=log, stderr=subprocess.STDOUT,
                ).returncode
                if code != 0:
                    raise ToolBuildError(tool, tool.log_file, f"`{step.describe()[:120]}` exited {code}")
            else:
                try:
                    step.action()
                except Exception as exc:  # a copy or generate step: report, don't trace
                    log.write(f"failed: {exc!r}\n")
                    raise ToolBuildError(tool, tool.log_file, f"{step.describe()}: {exc}") from exc
        missing = tool.missing_binaries()
        if missing:
            raise ToolBuildError(tool, tool.log_file, f"finished without producing {', '.join(missing)}")
        seconds = time.monotonic() - started
        log.write(f"\n# done in {seconds:.0f}s\n")
    return BuildResult(tool, built=True, seconds=seconds)


def ensure_built(*names: str) -> None:
    """Build any of the named tools that is missing (tests call this instead of skipping)."""
    for item in selected_tools(names):
        build_tool(item)
