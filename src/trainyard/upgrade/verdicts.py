"""What an upgrade of trainyard does to one TrainJob already in the cluster, and what the operator must do (pure).

The new controller builds every unfinished TrainJob again. A JobSet that runs is never updated (as upstream), so
it keeps running as the old version made it; a suspended one is re-applied when the TrainJob resumes, and JobSet's
webhook allows a suspended JobSet's pod templates to change only in a few fields (labels, annotations, node
selector, tolerations, scheduling gates). Whether the new render passes is the API server's answer to a dry-run
apply (`preflight.survey`), not a copy of JobSet's rule; this module only words the verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

FINISHED, NOT_STARTED, RUNNING, SUSPENDED = "finished", "not started", "running", "suspended"

UNCHANGED = "unchanged"
BUILT_BY_NEW = "built by the new version"
KEEPS_RUNNING = "keeps running as it is"
UPDATED_ON_RESUME = "updated when it resumes"
CANNOT_RESUME = "cannot resume after the upgrade"
CANNOT_BUILD = "the new version cannot build it"
VERDICTS = (UNCHANGED, BUILT_BY_NEW, KEEPS_RUNNING, UPDATED_ON_RESUME, CANNOT_RESUME, CANNOT_BUILD)
BLOCKING = (CANNOT_RESUME, CANNOT_BUILD)
"""Verdicts that need the operator before `trainyard platform up`."""


@dataclass(frozen=True)
class JobFinding:
    namespace: str
    name: str
    state: str
    """finished, not started (no JobSet yet), running (its JobSet is not suspended: running or queued), suspended."""
    runtime: str
    """The runtime it references: `Kind/name`."""
    verdict: str
    action: str
    """What the operator must do, empty when nothing."""
    differences: tuple[str, ...] = ()
    """Where the new version's JobSet differs from the one in the cluster (paths)."""
    refusal: str | None = None
    """The API server's words when the new JobSet would be refused (dry-run apply), or the build error."""
    snapshot: bool = False
    """Its runtime snapshot pins the runtime it is built from (taken at its first reconcile)."""
    suspended: bool = False
    """Its `spec.suspend` (a JobSet also waits suspended while its gang awaits admission)."""

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["differences"] = list(self.differences)
        return out


def job_state(finished: bool, jobset: Mapping[str, Any] | None) -> str:
    if finished:
        return FINISHED
    if jobset is None:
        return NOT_STARTED
    return SUSPENDED if (jobset.get("spec") or {}).get("suspend") else RUNNING


def judge(state: str, differences: tuple[str, ...], refusal: str | None, build_error: str | None) -> tuple[str, str]:
    """(verdict, action) for one TrainJob."""
    if state == FINISHED:
        return UNCHANGED, ""
    if build_error is not None:
        return CANNOT_BUILD, ("fix its runtime (or the TrainJob) before the upgrade, or delete it; the new controller "
                              "will mark it ResourcesCreationFailed")
    if state == NOT_STARTED:
        return BUILT_BY_NEW, ""
    if not differences:
        return UNCHANGED, ""
    if state == RUNNING:
        return KEEPS_RUNNING, ("none while it runs; if it is suspended later (reclaim, stall, budget, a user) it is "
                               "rebuilt by the new version when it resumes" + (
                                   ", which JobSet would refuse: let it finish rather than suspend it"
                                   if refusal else ""))
    if refusal is None:
        return UPDATED_ON_RESUME, ""
    return CANNOT_RESUME, ("resume it and let it finish before the upgrade, or delete it and create it again after "
                           "the upgrade (a new JobSet is built whole)")


def finding(namespace: str, name: str, state: str, runtime: str, differences: tuple[str, ...] = (),
            refusal: str | None = None, build_error: str | None = None, snapshot: bool = False,
            suspended: bool = False) -> JobFinding:
    verdict, action = judge(state, differences, refusal, build_error)
    return JobFinding(namespace, name, state, runtime, verdict, action, differences,
                      build_error if build_error is not None else refusal, snapshot, suspended)


def summary(findings: list[JobFinding]) -> dict[str, Any]:
    counts = {verdict: sum(1 for f in findings if f.verdict == verdict) for verdict in VERDICTS}
    return {"trainjobs": len(findings), "verdicts": {k: v for k, v in counts.items() if v},
            "blocking": sum(1 for f in findings if f.verdict in BLOCKING)}
