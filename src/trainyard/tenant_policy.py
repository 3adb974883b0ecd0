"""Tenant policy the stack sets and the controller applies: a tenant namespace's budget (annotation
`trainyard.dev/budget`, rendered from the stack), what the controller's budget loop (`trainyard.usage.budgets`) last
found of it (`trainyard.dev/budget-status`), the TrainJobs its stall loop found stalled
(`trainyard.dev/stalled-trainjobs`), all JSON, and the actions a stack may choose for budgets and stalled
TrainJobs. Ground level: the stack's validation, the controller core, the capacity report and the usage commands
all read them."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass

from trainyard.timestamps import parse_time

BUDGET_PERIODS = ("weekly", "monthly")
BUDGET_ACTIONS = ("closeQueue", "demotePriority")
STALL_ACTIONS = ("none", "suspend")
"""What the controller does to a stalled TrainJob beyond a Warning (`trainyard.usage.stalls`)."""
RECLAIM_RULES = ("deserved", "final-share", "fair-sharing")
"""The rules the controller's gang-aware reclaim may evict by (`trainyard.scheduling.reclaim`); a stack's
`controller.reclaim` names one, or `none`."""
RECLAIM_CHOICES = ("none",) + RECLAIM_RULES
# Seconds an admitted gang may hold its queue while the API server refuses its pods for a reason that may pass
# (a full quota) before the controller releases it (stack controller.gangStartTimeoutSeconds).
DEFAULT_GANG_START_TIMEOUT_SECONDS = 120
# Seconds after its grace period before an evicted TrainJob pod of a lost node is deleted for good, so JobSet can
# recreate its gang (stack controller.nodeLossReleaseAfterSeconds; -1: never).
DEFAULT_NODE_LOSS_RELEASE_AFTER_SECONDS = 60
# The longest terminationGracePeriodSeconds a tenant's TrainJob pods may ask unless its stack entry says otherwise.
DEFAULT_MAX_GRACE_SECONDS = 300
# How long reclaim waits for a checkpoint it asked a tenant's TrainJob for (`scheduling.checkpoints`).
DEFAULT_CHECKPOINT_GRACE_SECONDS = 60
DEFAULT_NODE_LOSS_TOLERATION_SECONDS = 60
"""How long a tenant's pods stay bound to a lost node before eviction (Kubernetes' own default is 300 s)."""
"""What `controller.reclaim`, `trainyard controller run --reclaim` and `cluster up --reclaim` accept."""


@dataclass(frozen=True)
class Budget:
    gpu_hours: float
    period: str
    action: str
    demote_to: str | None = None

    @classmethod
    def from_annotation(cls, text: str | None) -> "Budget | None":
        """The namespace's budget; None when absent or unreadable (the stack validates what it renders)."""
        try:
            data = json.loads(text) if text else None
            budget = cls(gpu_hours=float(data["gpuHours"]), period=str(data["period"]), action=str(data["action"]),
                         demote_to=data.get("demoteTo")) if isinstance(data, dict) else None
        except (ValueError, KeyError, TypeError):
            return None
        if budget is None or budget.period not in BUDGET_PERIODS or budget.action not in BUDGET_ACTIONS or budget.gpu_hours <= 0:
            return None
        return budget


@dataclass(frozen=True)
class BudgetStatus:
    """The annotation `trainyard.dev/budget-status`: what the controller found and did."""

    period: str
    gpu_hours: float
    budget: float
    state: str
    since: str
    """When the tenant entered `state` (RFC 3339)."""
    action: str | None = None
    """The action applied (exhausted only)."""
    demote_to: str | None = None
    runs_out: str | None = None

    def to_annotation(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}, sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str | None) -> "BudgetStatus | None":
        try:
            data = json.loads(text) if text else None
            return cls(period=str(data["period"]), gpu_hours=float(data["gpu_hours"]), budget=float(data["budget"]),
                       state=str(data["state"]), since=str(data["since"]), action=data.get("action"),
                       demote_to=data.get("demote_to"), runs_out=data.get("runs_out")) \
                if isinstance(data, dict) else None
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def percent(self) -> float:
        return 100.0 * self.gpu_hours / self.budget if self.budget else 0.0


def demotion(status_annotation: str | None) -> tuple[str, dt.datetime] | None:
    """(class, since) while a demotePriority budget is exhausted: TrainJobs created since then get the class."""
    status = BudgetStatus.from_annotation(status_annotation)
    if status is None or status.action != "demotePriority" or not status.demote_to:
        return None
    try:
        return status.demote_to, parse_time(status.since)
    except ValueError:
        return None


@dataclass(frozen=True)
class StalledTrainJob:
    """One entry of the annotation `trainyard.dev/stalled-trainjobs`: a TrainJob of the namespace the stall loop
    found holding GPUs with its progress stopped. It is the report's list (a Namespace list is served from the API
    server's cache; the loop's Events are not) and the loop's memory across a restart or a new leader."""

    trainjob: str
    uid: str
    why: str
    since: float
    """When progress stopped (epoch seconds)."""
    flagged: str
    """When the loop first found this stall (RFC 3339)."""
    percentage: int | None = None
    """The progress it stopped at, when the trainer reports one."""
    suspended: bool = False
    """Suspended while stalled (by the platform's `stalledAction: suspend`, or by hand): kept while it stays so."""


def stalled_to_annotation(entries: list[StalledTrainJob]) -> str:
    return json.dumps([{k: v for k, v in asdict(entry).items() if v is not None and v is not False}
                       for entry in sorted(entries, key=lambda e: e.trainjob)], sort_keys=True)


def stalled_from_annotation(text: str | None) -> list[StalledTrainJob]:
    """The namespace's stalled TrainJobs; [] when absent or unreadable (only the controller writes it)."""
    try:
        data = json.loads(text) if text else []
        return [StalledTrainJob(trainjob=str(item["trainjob"]), uid=str(item["uid"]), why=str(item["why"]),
                                since=float(item["since"]), flagged=str(item["flagged"]),
                                percentage=item["percentage"] if isinstance(item.get("percentage"), int) else None,
                                suspended=item.get("suspended") is True)
                for item in data] if isinstance(data, list) else []
    except (ValueError, KeyError, TypeError):
        return []
