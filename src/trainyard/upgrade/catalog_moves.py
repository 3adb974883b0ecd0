"""What moving a tenant to another catalog release does to its TrainingRuntimes and its TrainJobs in flight (pure).

A TrainJob is built from the runtime snapshot taken at its first reconcile, so a move changes nothing for a TrainJob
that has one, whatever its state: a running one keeps running, a suspended or queued one resumes on the runtime it
was built from (the old release's), never on the new one; to take the new runtime, delete it and create it again.
Only a TrainJob not yet reconciled (no snapshot) is built from what the namespace holds when it is: the new
release's runtime, or nothing when the new release has no runtime of that name.

A release without one of the old runtimes is harder on its TrainJobs: the TrainJob webhook (as upstream's) refuses
every change of a TrainJob whose runtime does not exist, so a suspended one cannot be resumed (resuming is a change
of `spec.suspend`), and a running one can no longer be suspended (by a user, or by reclaim, stall or budget).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from trainyard.runtimes.diff import ADDED, CHANGED, REMOVED, without_catalog_version
from trainyard.upgrade.verdicts import FINISHED, RUNNING

KEEPS_SNAPSHOT = "keeps the runtime it was built from"
BUILT_FROM_NEW = "built from the new release's runtime"
RUNTIME_GONE = "cannot start: its runtime is removed"
RESUME_REFUSED = ("cannot resume: the TrainJob webhook refuses every change of a TrainJob whose runtime does not "
                  "exist, resuming included")
FROZEN = "keeps running on the runtime it was built from"
FROZEN_WHY = ", but accepts no change while its runtime does not exist (not even a suspension by reclaim, stall or budget)"
BLOCKING_OUTCOMES = (RUNTIME_GONE, RESUME_REFUSED)


@dataclass(frozen=True)
class CatalogMove:
    tenant: str
    namespace: str
    from_version: str
    to_version: str
    runtimes: Mapping[str, str] = field(default_factory=dict)
    """Runtime name -> added, removed or changed (unchanged ones left out)."""


@dataclass(frozen=True)
class JobInFlight:
    name: str
    state: str
    runtime: str
    """The name of the TrainingRuntime it references (namespaced runtimes only: a move changes no other)."""
    has_snapshot: bool
    suspended: bool = False
    """Its `spec.suspend`: resuming it is a change of the TrainJob (a queued gang resumes without one)."""


@dataclass(frozen=True)
class JobMove:
    namespace: str
    name: str
    state: str
    runtime: str
    runtime_change: str
    outcome: str
    action: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def runtime_changes(old: Mapping[str, dict], new: Mapping[str, dict]) -> dict[str, str]:
    """Name -> added, removed or changed between two releases' runtimes for one tenant (the catalog-version labels,
    which differ by construction, are not a change)."""
    out = {}
    for name in sorted(set(old) | set(new)):
        if name not in old:
            out[name] = ADDED
        elif name not in new:
            out[name] = REMOVED
        elif without_catalog_version(old[name]) != without_catalog_version(new[name]):
            out[name] = CHANGED
    return out


def job_moves(move: CatalogMove, jobs: Sequence[JobInFlight]) -> list[JobMove]:
    """The TrainJobs the move concerns (their runtime changes or goes) and what happens to each."""
    out = []
    for job in jobs:
        change = move.runtimes.get(job.runtime)
        if job.state == FINISHED or change not in (CHANGED, REMOVED):
            continue
        if job.has_snapshot and change == REMOVED and job.suspended:
            outcome = RESUME_REFUSED
            action = (f"resume it and let it finish before the move, keep {move.tenant} on {move.from_version}, "
                      "or delete it")
        elif job.has_snapshot and change == REMOVED:
            outcome = FROZEN + f" (release {move.from_version})" + FROZEN_WHY
            action = f"none; under {move.to_version} it cannot be created again (no runtime {job.runtime})"
        elif job.has_snapshot:
            outcome = KEEPS_SNAPSHOT + f" (release {move.from_version})" + (
                "; it keeps running" if job.state == RUNNING else "; it resumes on it, not on the new one")
            action = ""
        elif change == CHANGED:
            outcome, action = BUILT_FROM_NEW + f" (release {move.to_version})", ""
        else:
            outcome = RUNTIME_GONE
            action = f"keep {move.tenant} on {move.from_version} until it has started, or delete it"
        out.append(JobMove(move.namespace, job.name, job.state, job.runtime, change, outcome, action))
    return out


def blocking(moves: Sequence[JobMove]) -> int:
    return sum(1 for m in moves if m.outcome in BLOCKING_OUTCOMES)


def render(moves: Sequence[CatalogMove], jobs: Sequence[JobMove]) -> str:
    """The catalog section of the preflight's text."""
    lines = []
    for move in moves:
        lines.append(f"catalog: {move.tenant} ({move.namespace}) {move.from_version} -> {move.to_version}")
        for kind in (CHANGED, ADDED, REMOVED):
            names = [name for name, change in move.runtimes.items() if change == kind]
            if names:
                lines.append(f"  {kind}: {', '.join(names)}")
        if not move.runtimes:
            lines.append("  no runtime changes")
    for job in jobs:
        lines.append(f"  {job.namespace}/{job.name} ({job.state}, {job.runtime} {job.runtime_change}): {job.outcome}")
        if job.action:
            lines.append(f"    do: {job.action}")
    return "\n".join(lines) + ("\n" if lines else "")
