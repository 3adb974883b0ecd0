"""The checkpoint protocol between reclaim and a training process (pure).

A training process that saves checkpoints reports each one in its TrainJob's `status.trainerStatus` (through the
status server, metrics `trainyard.dev/checkpoint-step` and `-time`). Reclaim then counts only the work since that
checkpoint as lost, and before suspending such a TrainJob it asks first: annotation
`trainyard.dev/checkpoint-requested: "<ns>/<gang> <epoch s>"`, which the process reads from the status server
(`GET .../checkpoint-request`). The TrainJob is suspended once it reports a checkpoint newer than the ask, or when
the tenant's grace period (`trainyard.dev/checkpoint-grace-seconds`) ends, whichever comes first. A TrainJob that
reports no checkpoint is not asked: waiting for it would keep the gang waiting for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainyard import k8s as K
from trainyard.tenant_policy import DEFAULT_CHECKPOINT_GRACE_SECONDS
from trainyard.timestamps import parse_time

DEFAULT_GRACE_SECONDS = DEFAULT_CHECKPOINT_GRACE_SECONDS
"""How long reclaim waits for a checkpoint it asked for, unless the tenant's stack entry says otherwise."""
WAIT, SAVED, GRACE_ENDED = "wait", "saved", "grace-ended"


@dataclass(frozen=True)
class Checkpoint:
    at: float
    """When it was saved (epoch seconds, as reported; never after the second of the report's lastUpdatedTime)."""
    step: int | None = None


def _metric(status: dict, name: str) -> str | None:
    for metric in status.get("metrics") or []:
        if isinstance(metric, dict) and metric.get("name") == name:
            return str(metric.get("value") or "")
    return None


def last_checkpoint(trainjob: dict) -> Checkpoint | None:
    """The last checkpoint the TrainJob's process reported, or None (none reported, or unreadable). A time later
    than the report itself is taken as the report's time (a process cannot have saved in the future)."""
    status = (trainjob.get("status") or {}).get("trainerStatus") or {}
    text = _metric(status, K.CHECKPOINT_TIME_METRIC)
    if not text:
        return None
    try:
        at = parse_time(text).timestamp()
        reported = status.get("lastUpdatedTime")
        if reported:  # a whole second (metav1.Time) beside the checkpoint's own, finer time
            at = min(at, parse_time(reported).timestamp() + 1.0)
    except (ValueError, TypeError):
        return None
    step_text = _metric(status, K.CHECKPOINT_STEP_METRIC) or ""
    return Checkpoint(at, int(step_text) if step_text.lstrip("-").isdigit() else None)


def saved_seconds(checkpoint: Checkpoint | None, started_at: float | None, now: float) -> float:
    """Of a run that started at `started_at`, the seconds its last checkpoint kept: 0 without one, or when the
    checkpoint predates the run (what it kept was kept by an earlier run)."""
    if checkpoint is None or started_at is None or checkpoint.at <= started_at:
        return 0.0
    return min(checkpoint.at, now) - started_at


def ask_outcome(asked_at: float, checkpoint: Checkpoint | None, now: float, grace_s: float) -> str:
    """What an ask noted at `asked_at` comes to now: `saved` (a checkpoint newer than the ask was reported),
    `grace-ended`, or `wait`. The note keeps the ask's second, floored: the ask was made up to a second later, so
    the grace period runs from the end of that second and the process always gets all of it."""
    if checkpoint is not None and checkpoint.at >= asked_at:
        return SAVED
    return GRACE_ENDED if now - asked_at >= grace_s + 1.0 else WAIT


def grace_seconds(namespace: dict | None) -> float:
    """A tenant namespace's checkpoint grace period (its annotation, else the default)."""
    text = str((((namespace or {}).get("metadata") or {}).get("annotations") or {})
               .get(K.NAMESPACE_CHECKPOINT_GRACE_ANNOTATION) or "")
    return float(text) if text.isdigit() else float(DEFAULT_GRACE_SECONDS)


def reclaimed_message(gang: tuple[str, str], checkpoint: Checkpoint | None, lost_gpu_s: float,
                      outcome: str | None) -> str:
    """The Event a reclaimed TrainJob gets: the gang it made room for, the checkpoint it kept, the work it lost."""
    why = {SAVED: "after it saved the checkpoint it was asked for",
           GRACE_ENDED: "its grace period ended before it saved the checkpoint it was asked for"}.get(outcome or "",
                                                                                                     "at once")
    kept = ("its start" if checkpoint is None else
            f"the checkpoint of step {checkpoint.step}" if checkpoint.step is not None else "its last checkpoint")
    return (f"Suspended {why} to make room for gang {gang[0]}/{gang[1]}: resumes from {kept}; "
            f"{lost_gpu_s / 3600:.3f} GPU-hours of work lost ({lost_gpu_s:.0f} GPU-seconds).")
