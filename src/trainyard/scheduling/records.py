"""What a replay records of one pod (pure): the simulator writes these, and so does the watch of a real replay,
so one set of metrics (`schedtrace.metrics`) measures both."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PodRecord:
    job: str
    gpus: int
    node: str | None = None
    bound: float | None = None
    ended: float | None = None
    succeeded: bool = False
    kept_s: float = 0.0
    """For a pod that ended without succeeding (evicted): seconds of its run its job's last checkpoint kept."""
