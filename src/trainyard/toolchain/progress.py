"""What `trainyard tools build` says while it works (pure): each tool as it starts and ends, the time so far and
an estimate of what is left. A cold toolchain takes most of an hour; `make up` on a fresh machine must not sit
silent for it (a terminal-less log shows no spinner)."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from trainyard.toolchain.versions import Tool

DONE = re.compile(r"^# done in (\d+)s$", re.M)


def last_build_seconds(log_text: str) -> int | None:
    """How long the build a tool's log records took (None: the log records no finished build)."""
    found = DONE.findall(log_text)
    return int(found[-1]) if found else None


def expected_seconds(tool: Tool, measured: Mapping[str, int]) -> int:
    """This machine's last build of the tool when there was one, else its typical cold build."""
    return measured.get(tool.name, tool.typical_build_s)


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def starting(index: int, tools: Sequence[Tool], measured: Mapping[str, int], elapsed_s: float) -> str:
    """The line before tool `index` of the tools to build (those not built yet) starts."""
    tool, left = tools[index], sum(expected_seconds(t, measured) for t in tools[index:])
    return (f"[{index + 1}/{len(tools)}] building {tool.name} {tool.version} (about "
            f"{duration(expected_seconds(tool, measured))}); {duration(elapsed_s)} so far, about {duration(left)} left")


def finished(index: int, tools: Sequence[Tool], measured: Mapping[str, int], took_s: float, elapsed_s: float) -> str:
    tool, left = tools[index], sum(expected_seconds(t, measured) for t in tools[index + 1:])
    tail = f", about {duration(left)} left" if index + 1 < len(tools) else ""
    return (f"[{index + 1}/{len(tools)}] {tool.name} {tool.version} built in {duration(took_s)}; "
            f"{duration(elapsed_s)} so far{tail}")
