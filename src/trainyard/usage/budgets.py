"""Tenant budgets (pure): periods, the state a tenant's spending puts it in, what the controller does about it, and
the date the budget runs out at the period's pace so far.

A budget is the namespace annotation `trainyard.dev/budget` the platform renders from the stack; what the
controller last found is `trainyard.dev/budget-status` on the same namespace (JSON), which `report` reads and the
build of new TrainJobs reads for a demotion. States: `ok` below 80 %, `warning` from 80 %, `exhausted` from 100 %.
Exhausted, the action applies until the period ends: `closeQueue` closes the tenant's Volcano queue (Volcano admits
no new gang into a queue that is not Open; running gangs go on) and reopens it when a new period begins, only if the
controller closed it; `demotePriority` gives TrainJobs created from then on the class `demoteTo`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from trainyard.tenant_policy import BUDGET_PERIODS, Budget, BudgetStatus
from trainyard.timestamps import format_time

WARN_FRACTION = 0.8
OK, WARNING, EXHAUSTED = "ok", "warning", "exhausted"
OPEN, CLOSED, CLOSING = "Open", "Closed", "Closing"


def period_bounds(period: str, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of the period holding `now`, UTC: weeks from Monday 00:00, months from the 1st."""
    day = dt.datetime(now.year, now.month, now.day, tzinfo=dt.timezone.utc)
    if period == "weekly":
        start = day - dt.timedelta(days=day.weekday())
        return start, start + dt.timedelta(days=7)
    if period == "monthly":
        start = day.replace(day=1)
        return start, (start + dt.timedelta(days=32)).replace(day=1)
    raise ValueError(f"unknown budget period {period!r}: use one of {', '.join(BUDGET_PERIODS)}")


def period_label(period: str, now: dt.datetime) -> str:
    start, _ = period_bounds(period, now)
    if period == "weekly":
        year, week, _ = start.isocalendar()
        return f"{year}-W{week:02d}"
    return start.strftime("%Y-%m")


def state_of(spent: float, budget: float) -> str:
    return EXHAUSTED if spent >= budget else WARNING if spent >= WARN_FRACTION * budget else OK


def runs_out(spent: float, budget: float, start: dt.datetime, end: dt.datetime, now: dt.datetime) -> dt.datetime | None:
    """When the budget runs out at the period's average pace so far; `now` once spent; None when it lasts the
    period (or nothing was spent yet)."""
    if spent >= budget:
        return now
    elapsed = (now - start).total_seconds()
    if spent <= 0 or elapsed <= 0:
        return None
    moment = now + dt.timedelta(seconds=(budget - spent) * elapsed / spent)
    return moment if moment < end else None


@dataclass(frozen=True)
class Decision:
    status: BudgetStatus
    close_queue: bool = False
    open_queue: bool = False


def decide(budget: Budget, previous: BudgetStatus | None, spent: float, now: dt.datetime,
           queue_state: str | None) -> Decision:
    """The status to record and the queue command to send, from this period's GPU-hours so far."""
    start, end = period_bounds(budget.period, now)
    label = period_label(budget.period, now)
    if previous is not None and previous.period == label:
        # GPU-hours spent never go down within a period; a lower measure (a pod's span re-dated once it is gone, an
        # answer missing series) would reopen a closed queue for a round or two
        spent = max(spent, previous.gpu_hours)
    state = state_of(spent, budget.gpu_hours)
    held = previous is not None and (previous.period, previous.state) == (label, state)
    since = previous.since if previous is not None and held else format_time(now)
    exhausted = state == EXHAUSTED
    action = budget.action if exhausted else None
    moment = runs_out(spent, budget.gpu_hours, start, end, now)
    status = BudgetStatus(period=label, gpu_hours=round(spent, 4), budget=budget.gpu_hours, state=state, since=since,
                          action=action, demote_to=budget.demote_to if action == "demotePriority" else None,
                          runs_out=None if moment is None else format_time(moment))
    we_closed = previous is not None and previous.action == "closeQueue"
    closed = queue_state in (CLOSED, CLOSING)
    return Decision(status=status,
                    close_queue=action == "closeQueue" and queue_state in (OPEN, "", None),  # "": Volcano's Open
                    open_queue=not exhausted and we_closed and closed)



def forecast(budget: Budget, spent: float, now: dt.datetime) -> dict:
    """A tenant's budget this period as `trainyard usage` prints it: spent, state and the date it runs out."""
    start, end = period_bounds(budget.period, now)
    moment = runs_out(spent, budget.gpu_hours, start, end, now)
    return {"gpu_hours": budget.gpu_hours, "period": period_label(budget.period, now),
            "spent_gpu_hours": round(spent, 4), "percent": round(100 * spent / budget.gpu_hours, 1),
            "state": state_of(spent, budget.gpu_hours), "action": budget.action,
            "runs_out": None if moment is None else format_time(moment)}
