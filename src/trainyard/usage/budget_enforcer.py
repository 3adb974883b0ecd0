"""The controller's budget loop (the I/O half of `usage.budgets`): every `period` seconds, while this replica leads,
each namespace with a budget gets this period's GPU-hours from Prometheus, its status annotation, its queue
command, and on its unfinished TrainJobs a Warning Event once per period and state (80 % spent, then exhausted).

A queue is closed and opened as `vcctl queue operate` does it: a bus.volcano.sh Command owned by the Queue, which
Volcano's queue controller carries out and deletes.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Callable

from trainyard import k8s as K
from trainyard.tenant_policy import BudgetStatus
from trainyard.capacity.loop import Loop
from trainyard.controller.runtime.apiserver import RESOURCES, ApiServer
from trainyard.controller.runtime.transport import ApiError
from trainyard.timestamps import utc_now
from trainyard.usage import prometheus as reader
from trainyard.usage.budgets import EXHAUSTED, WARNING, Budget, Decision, decide, period_bounds
from trainyard.usage.record import PodSpan

log = logging.getLogger(__name__)

REASON = "TrainJobBudget"
SPENT_MOVED = 0.01
"""The status annotation is rewritten when the state, period or action changes, or spending moved this much of the
budget (not every round: each write is a Namespace update every watcher sees)."""


def queue_command(queue: dict, action: str, message: str = "") -> dict:
    """A Command for Volcano's queue controller (`OpenQueue` / `CloseQueue`), owned by the queue (its `target`:
    the Go field TargetObject is `target` in JSON)."""
    meta = queue["metadata"]
    owner = {"apiVersion": K.VOLCANO_API_VERSION, "kind": "Queue", "name": meta["name"], "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": K.VOLCANO_BUS_API_VERSION, "kind": "Command",
            "metadata": {"generateName": f"{meta['name']}-{action.lower()}-", "namespace": "default",
                         "ownerReferences": [owner]},
            "target": owner, "action": action, "reason": "TenantBudget", **({"message": message} if message else {})}


def needs_writing(previous: BudgetStatus | None, status: BudgetStatus) -> bool:
    if previous is None or (previous.period, previous.state, previous.action, previous.runs_out is None) != (
            status.period, status.state, status.action, status.runs_out is None):
        return True
    return abs(previous.gpu_hours - status.gpu_hours) >= SPENT_MOVED * status.budget


def warning_message(status: BudgetStatus, budget: Budget, queue: str) -> str:
    spent = f"{status.gpu_hours:.1f} of {budget.gpu_hours:g} GPU-hours ({status.percent:.0f} %) this {budget.period} " \
            f"budget period ({status.period})"
    if status.state == EXHAUSTED:
        done = {"closeQueue": f"queue {queue} is closed: running TrainJobs go on, new ones wait until the next period",
                "demotePriority": f"TrainJobs created from now on run at priority class {budget.demote_to}"}[budget.action]
        return f"the tenant's GPU budget is spent: {spent}; {done}"
    later = f"; at this pace it runs out at {status.runs_out}" if status.runs_out else ""
    return f"the tenant has used {spent}{later}; at 100 % the platform will {budget.action}"


def period_gpu_hours(spans: list[PodSpan], namespace: str, start: dt.datetime, now: dt.datetime) -> float:
    return sum(span.held_within(start.timestamp(), now.timestamp()) for span in spans
               if span.namespace == namespace) / 3600.0


class BudgetEnforcer(Loop):
    def __init__(self, api: ApiServer, prometheus: reader.Prometheus, period: float = 60.0,
                 leading: Callable[[], bool] = lambda: True, clock: Callable[[], dt.datetime] = utc_now):
        super().__init__(period)
        self.api, self.prometheus, self.leading, self.clock = api, prometheus, leading, clock
        self.warned: set[str] = set()

    def step(self) -> dict[str, Decision]:
        """One round; returns each budgeted namespace's decision."""
        if not self.leading():
            return {}
        namespaces = self.api.list(RESOURCES["Namespace"]).get("items") or []
        budgets = {ns["metadata"]["name"]: (ns, budget) for ns in namespaces
                   if (budget := Budget.from_annotation(annotations_of(ns).get(K.NAMESPACE_BUDGET_ANNOTATION)))}
        if not budgets:
            return {}
        now = self.clock()
        earliest = min(period_bounds(budget.period, now)[0] for _, budget in budgets.values())
        spans = reader.read_pod_spans(self.prometheus, earliest.timestamp(), now.timestamp(), sorted(budgets))
        decisions = {}
        for name, (namespace, budget) in sorted(budgets.items()):
            try:
                decisions[name] = self.enforce(namespace, budget, spans, now)
            except ApiError as exc:  # the namespace is going away, or a queue vanished: the next round sees
                log.warning("budget of namespace %s not enforced: %s", name, exc)
        return decisions

    def enforce(self, namespace: dict, budget: Budget, spans: list[PodSpan], now: dt.datetime) -> Decision:
        name = namespace["metadata"]["name"]
        queue_name = (namespace["metadata"].get("labels") or {}).get(K.NAMESPACE_QUEUE_LABEL)
        queue = self.api.get(RESOURCES["Queue"], queue_name) if queue_name else None
        queue_state = ((queue or {}).get("status") or {}).get("state")
        previous = BudgetStatus.from_annotation(annotations_of(namespace).get(K.NAMESPACE_BUDGET_STATUS_ANNOTATION))
        start, _ = period_bounds(budget.period, now)
        decision = decide(budget, previous, period_gpu_hours(spans, name, start, now), now, queue_state)
        if queue is not None and (decision.close_queue or decision.open_queue):
            action = "CloseQueue" if decision.close_queue else "OpenQueue"
            self.api.create(queue_command(queue, action, f"namespace {name}: {decision.status.gpu_hours:g} of "
                                                         f"{budget.gpu_hours:g} GPU-hours this {budget.period} period"))
            log.info("budget of %s: %s %s (%s)", name, action, queue_name, decision.status.state)
        if needs_writing(previous, decision.status):
            self.api.merge_patch(RESOURCES["Namespace"], name, {"metadata": {"annotations": {
                K.NAMESPACE_BUDGET_STATUS_ANNOTATION: decision.status.to_annotation()}}})
        if decision.status.state in (WARNING, EXHAUSTED):
            self.warn(name, decision.status, budget, queue_name or "")
        return decision

    def warn(self, namespace: str, status: BudgetStatus, budget: Budget, queue: str) -> None:
        """A Warning on each unfinished TrainJob of the namespace, once per period and state (fixed Event names:
        after a restart the API server refuses the ones already posted)."""
        message = warning_message(status, budget, queue)
        for trainjob in self.api.list(RESOURCES["TrainJob"], namespace).get("items") or []:
            meta = trainjob["metadata"]
            if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for c in (trainjob.get("status") or {}).get("conditions") or []):
                continue
            event = f"{meta['name']}.budget-{status.period.lower()}-{status.state}.{str(meta.get('uid', ''))[:8]}"
            if event in self.warned:
                continue
            self.api.event({**trainjob, "apiVersion": K.TRAINER_API_VERSION, "kind": "TrainJob"}, REASON, message,
                           component="trainyard-budgets", name=event)
            self.warned.add(event)


def annotations_of(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("annotations") or {}
