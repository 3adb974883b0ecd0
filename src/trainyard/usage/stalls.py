"""Stalled TrainJobs (pure): a TrainJob that holds GPUs while its progress has stopped.

Progress is what the trainer reports with the TrainJobStatus feature (upstream's `status.trainerStatus`:
`progressPercentage` and `lastUpdatedTime`): stalled when no report came for `after_s`, or the percentage has not
moved for `after_s` (a trainer that reports but makes no progress). Without trainerStatus, the last log line of
the TrainJob's first pod stands in for a report (`after_log_s`, when configured). A TrainJob that holds no GPU (not
started, suspended, finished) is never stalled, and its memory is dropped.

What the loop finds is kept on each namespace (`trainyard.dev/stalled-trainjobs`, `tenant_policy.StalledTrainJob`):
rewritten only when a stall starts, ends or moves (`stalled_now`, `changed_namespaces`), read back as the loop's
memory when it starts or takes the lead (`remembered`), and listed by `report`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from trainyard.tenant_policy import StalledTrainJob
from trainyard.timestamps import duration_words, parse_time

REASON = "TrainJobStalled"


@dataclass(frozen=True)
class Seen:
    """What the watcher remembers of one TrainJob: its last progress and since when it has been that."""

    percentage: int | None
    since_s: float


@dataclass(frozen=True)
class Stall:
    since_s: float
    """When progress stopped (epoch seconds): the last report, the last change of percentage or the last log line."""
    why: str


def trainer_progress(trainjob: dict) -> tuple[int | None, float | None]:
    """(progressPercentage, lastUpdatedTime as epoch seconds) of `status.trainerStatus`; (None, None) without."""
    status = ((trainjob.get("status") or {}).get("trainerStatus")) or {}
    updated = status.get("lastUpdatedTime")
    try:
        updated_s = parse_time(updated).timestamp() if updated else None
    except ValueError:
        updated_s = None
    percentage = status.get("progressPercentage")
    return (percentage if isinstance(percentage, int) else None), updated_s


def _at(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc).strftime("%H:%M:%S UTC")


def can_be_stalled(trainjob: dict, after_s: float, after_log_s: float = 0.0) -> bool:
    """Whether `judge` can ever find the TrainJob stalled, whatever it holds: by a dated trainerStatus report when
    those are judged (`after_s`), else by its log when logs are read (`after_log_s`). The watcher reads pods and
    logs only for these."""
    if trainer_progress(trainjob)[1] is None:
        return after_log_s > 0
    return after_s > 0


def judge(trainjob: dict, holds_gpus: bool, previous: Seen | None, now_s: float, after_s: float,
          last_log_s: float | None = None, after_log_s: float = 0.0) -> tuple[Seen | None, Stall | None]:
    """(what to remember, the stall if the TrainJob is stalled now)."""
    if not holds_gpus:
        return None, None
    percentage, updated_s = trainer_progress(trainjob)
    if updated_s is not None and updated_s > now_s:  # dated in the future: fresh when first seen, then ageing
        updated_s = previous.since_s if previous is not None else now_s
    if updated_s is None:
        if after_log_s > 0 and last_log_s is not None and now_s - last_log_s >= after_log_s:
            return None, Stall(last_log_s, f"holds GPUs and wrote no log line for {duration_words(now_s - last_log_s)} "
                                           f"(last at {_at(last_log_s)}); it reports no trainerStatus")
        return None, None
    if after_s <= 0:  # trainerStatus is not judged
        return None, None
    if previous is not None and previous.percentage == percentage:
        since_s = previous.since_s
    else:
        since_s = updated_s if previous is None else now_s  # first sight: the last report is all that is known
    seen = Seen(percentage, since_s)
    if now_s - updated_s >= after_s:
        return seen, Stall(updated_s, f"holds GPUs and its trainer has reported no progress for "
                                      f"{duration_words(now_s - updated_s)} (trainerStatus.lastUpdatedTime {_at(updated_s)})")
    if percentage is not None and now_s - since_s >= after_s:
        return seen, Stall(since_s, f"holds GPUs and its progress has stayed at {percentage} % for "
                                    f"{duration_words(now_s - since_s)} (since {_at(since_s)})")
    return seen, None


def remembered(recorded: dict[str, list[StalledTrainJob]]) -> dict[str, Seen]:
    """The memory a loop starts from (by TrainJob uid): each recorded stall's percentage and since when. Without it a
    restarted loop would first see a stuck percentage as new and wait `after_s` again before flagging it."""
    return {entry.uid: Seen(entry.percentage, entry.since) for entries in recorded.values() for entry in entries}


def stalled_now(found: list[tuple[str, StalledTrainJob]],
                recorded: dict[str, list[StalledTrainJob]]) -> dict[str, list[StalledTrainJob]]:
    """Each namespace's entries after this round, from the (namespace, entry) pairs found stalled or kept suspended
    (each `flagged` now); a stall already recorded keeps when it was first flagged."""
    before = {(ns, entry.uid): entry for ns, entries in recorded.items() for entry in entries}
    out: dict[str, list[StalledTrainJob]] = {}
    for namespace, entry in found:
        previous = before.get((namespace, entry.uid))
        if previous is not None and previous.since == entry.since:
            entry = replace(entry, flagged=previous.flagged)
        out.setdefault(namespace, []).append(entry)
    return out


def changed_namespaces(recorded: dict[str, list[StalledTrainJob]],
                       now: dict[str, list[StalledTrainJob]]) -> dict[str, list[StalledTrainJob]]:
    """The namespaces whose record must be rewritten ([]: removed): a stall started, ended, moved or was
    suspended. The words alone ("for 32 min") changing do not count: one write per change, not per round."""
    def key(entries: list[StalledTrainJob]) -> set:
        return {(e.uid, e.since, e.percentage, e.suspended) for e in entries}
    return {ns: now.get(ns, []) for ns in set(recorded) | set(now)
            if key(recorded.get(ns, [])) != key(now.get(ns, []))}


def last_log_time(log_tail: str) -> float | None:
    """The timestamp of the last line of a pod log read with `timestamps=true` (RFC 3339 with nanoseconds)."""
    lines = [line for line in log_tail.splitlines() if line.strip()]
    if not lines:
        return None
    stamp = lines[-1].split(" ", 1)[0]
    head, _, fraction = stamp.rstrip("Z").partition(".")
    try:
        return parse_time(f"{head}Z").timestamp() + (float(f"0.{fraction}") if fraction.isdigit() else 0.0)
    except ValueError:
        return None
