"""Tenant budgets (pure): periods, states, the queue command and status each round decides, the forecast, the
demotion the build reads, and what the enforcer writes."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from trainyard.tenant_policy import BudgetStatus, demotion
from trainyard.usage.budget_enforcer import needs_writing, queue_command, warning_message
from trainyard.usage.budgets import Budget, decide, period_bounds, period_label, runs_out, state_of

UTC = dt.timezone.utc


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize("period, now, start, end, label", [
    ("weekly", "2026-11-27T15:00:00", "2026-11-23T00:00:00", "2026-11-30T00:00:00", "2026-W48"),  # a Friday
    ("weekly", "2026-11-23T00:00:00", "2026-11-23T00:00:00", "2026-11-30T00:00:00", "2026-W48"),  # Monday 00:00
    ("weekly", "2026-12-31T23:59:59", "2026-12-28T00:00:00", "2027-01-04T00:00:00", "2026-W53"),
    ("monthly", "2026-11-27T15:00:00", "2026-11-01T00:00:00", "2026-12-01T00:00:00", "2026-11"),
    ("monthly", "2026-12-31T23:59:59", "2026-12-01T00:00:00", "2027-01-01T00:00:00", "2026-12"),
    ("monthly", "2027-02-10T00:00:00", "2027-02-01T00:00:00", "2027-03-01T00:00:00", "2027-02"),
])
def test_periods_start_on_monday_or_the_first_utc(period, now, start, end, label):
    assert period_bounds(period, at(now)) == (at(start), at(end))
    assert period_label(period, at(now)) == label


@pytest.mark.parametrize("spent, state", [(0, "ok"), (79.9, "ok"), (80, "warning"), (99.9, "warning"),
                                          (100, "exhausted"), (250, "exhausted")])
def test_states_at_80_and_100_percent(spent, state):
    assert state_of(spent, 100.0) == state


def test_the_forecast_follows_the_periods_pace():
    start, end = at("2026-11-01T00:00:00"), at("2026-12-01T00:00:00")
    # 10 days in, 50 of 100 spent: 10 more days at that pace
    assert runs_out(50, 100, start, end, at("2026-11-11T00:00:00")) == at("2026-11-21T00:00:00")
    assert runs_out(10, 100, start, end, at("2026-11-11T00:00:00")) is None  # lasts the month
    assert runs_out(0, 100, start, end, at("2026-11-11T00:00:00")) is None
    assert runs_out(120, 100, start, end, at("2026-11-11T00:00:00")) == at("2026-11-11T00:00:00")


CLOSE = Budget(gpu_hours=100, period="monthly", action="closeQueue")
DEMOTE = Budget(gpu_hours=100, period="weekly", action="demotePriority", demote_to="scavenger")
NOW = at("2026-11-27T12:00:00")


def status(**fields):
    base = dict(period="2026-11", gpu_hours=0.0, budget=100.0, state="ok", since="2026-11-01T00:00:00Z")
    return BudgetStatus(**{**base, **fields})


@pytest.mark.parametrize("budget, previous, spent, queue, close, open_, state, action", [
    (CLOSE, None, 10, "Open", False, False, "ok", None),
    (CLOSE, status(), 85, "Open", False, False, "warning", None),
    (CLOSE, status(state="warning"), 101, "Open", True, False, "exhausted", "closeQueue"),        # crossing: close
    (CLOSE, status(state="exhausted", action="closeQueue"), 120, "Closed", False, False, "exhausted", "closeQueue"),
    (CLOSE, status(state="exhausted", action="closeQueue"), 120, "Open", True, False, "exhausted", "closeQueue"),
    # a new period: spending starts again at 0 and the queue the controller closed is opened
    (CLOSE, status(period="2026-10", state="exhausted", action="closeQueue"), 0, "Closed", False, True, "ok", None),
    (CLOSE, status(period="2026-10", state="exhausted", action="closeQueue"), 0, "Closing", False, True, "ok", None),
    # a queue someone else closed is left alone
    (CLOSE, status(state="ok"), 5, "Closed", False, False, "ok", None),
    (DEMOTE, status(period="2026-W48", state="warning"), 100, "Open", False, False, "exhausted", "demotePriority"),
    # spending never goes down within a period: a measure that dips (a pod's span re-dated when it disappears, a
    # partial answer from Prometheus) neither reopens the queue nor ends the demotion
    (CLOSE, status(state="exhausted", action="closeQueue", gpu_hours=101), 60, "Closed", False, False, "exhausted",
     "closeQueue"),
    (CLOSE, status(state="exhausted", action="closeQueue", gpu_hours=101), 0, "Closing", False, False, "exhausted",
     "closeQueue"),
    (DEMOTE, status(period="2026-W48", state="exhausted", action="demotePriority", gpu_hours=100), 99, "Open", False,
     False, "exhausted", "demotePriority"),
    # a raised budget does reopen it
    (Budget(gpu_hours=400, period="monthly", action="closeQueue"), status(state="exhausted", action="closeQueue",
                                                                          gpu_hours=101), 101, "Closed", False, True,
     "ok", None),
])
def test_each_round_decides_the_status_and_the_queue_command(budget, previous, spent, queue, close, open_, state,
                                                            action):
    decision = decide(budget, previous, spent, NOW, queue)
    assert (decision.close_queue, decision.open_queue) == (close, open_)
    assert (decision.status.state, decision.status.action) == (state, action)


def test_since_is_kept_while_the_state_holds_and_reset_when_it_changes():
    kept = decide(CLOSE, status(state="warning", since="2026-11-20T00:00:00Z"), 90, NOW, "Open").status
    assert kept.since == "2026-11-20T00:00:00Z"
    changed = decide(CLOSE, status(state="warning", since="2026-11-20T00:00:00Z"), 100, NOW, "Open").status
    assert changed.since == "2026-11-27T12:00:00Z"


def test_a_demotion_is_read_back_from_the_status_annotation():
    exhausted = decide(DEMOTE, None, 150, NOW, "Open").status
    assert demotion(exhausted.to_annotation()) == ("scavenger", NOW)
    assert demotion(decide(DEMOTE, None, 50, NOW, "Open").status.to_annotation()) is None
    assert demotion(decide(CLOSE, None, 150, NOW, "Open").status.to_annotation()) is None
    assert demotion("{not json") is None and demotion(None) is None


@pytest.mark.parametrize("text, budget", [
    ('{"gpuHours": 500, "period": "weekly", "action": "closeQueue"}', Budget(500.0, "weekly", "closeQueue")),
    ('{"gpuHours": 5, "period": "monthly", "action": "demotePriority", "demoteTo": "low"}',
     Budget(5.0, "monthly", "demotePriority", "low")),
    ('{"gpuHours": 0, "period": "weekly", "action": "closeQueue"}', None),
    ('{"gpuHours": 5, "period": "daily", "action": "closeQueue"}', None),
    ('{"gpuHours": 5, "period": "weekly"}', None),
    ("[1, 2]", None), ("oops", None), (None, None),
])
def test_the_namespace_budget_annotation_is_read_or_ignored(text, budget):
    assert Budget.from_annotation(text) == budget


def test_the_status_is_rewritten_only_when_it_says_something_new():
    old = status(state="warning", gpu_hours=85.0)
    assert not needs_writing(old, status(state="warning", gpu_hours=85.5))
    assert needs_writing(old, status(state="warning", gpu_hours=86.0))  # moved 1 % of the budget
    assert needs_writing(old, status(state="exhausted", gpu_hours=85.5))
    assert needs_writing(old, status(period="2026-12", state="warning", gpu_hours=85.0))
    assert needs_writing(None, old)


def test_a_queue_command_is_what_vcctl_queue_operate_sends():
    queue = {"metadata": {"name": "team-a", "uid": "u-1"}}
    command = queue_command(queue, "CloseQueue")
    owner = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": "team-a", "uid": "u-1",
             "controller": True, "blockOwnerDeletion": True}
    assert command == {"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
                       "metadata": {"generateName": "team-a-closequeue-", "namespace": "default",
                                    "ownerReferences": [owner]},
                       "target": owner, "action": "CloseQueue", "reason": "TenantBudget"}


def test_the_warning_says_how_much_is_spent_and_what_happens():
    warn = decide(CLOSE, None, 85, NOW, "Open").status
    text = warning_message(warn, CLOSE, "team-a")
    assert "85.0 of 100 GPU-hours (85 %) this monthly budget period (2026-11)" in text
    assert "at 100 % the platform will closeQueue" in text
    spent = warning_message(decide(CLOSE, None, 100, NOW, "Open").status, CLOSE, "team-a")
    assert "queue team-a is closed: running TrainJobs go on" in spent
    demoted = warning_message(decide(DEMOTE, None, 100, NOW, "Open").status, DEMOTE, "q")
    assert "run at priority class scavenger" in demoted


def test_the_status_annotation_round_trips():
    found = decide(CLOSE, None, 85, at("2026-11-11T00:00:00"), "Open").status
    assert BudgetStatus.from_annotation(found.to_annotation()) == found
    assert json.loads(found.to_annotation())["runs_out"] == "2026-11-12T18:21:10Z"  # 15 more at 8.5 a day


def test_the_queue_command_has_only_fields_of_volcanos_command_crd():
    """The API server drops unknown fields of a custom resource: a misnamed field is a command that does nothing."""
    import yaml

    from trainyard.toolchain.build import ensure_built
    from trainyard.toolchain.modules import module_dir
    from trainyard.toolchain.versions import tool

    ensure_built("volcano")
    crd = yaml.safe_load((module_dir(tool("volcano"), "volcano.sh/volcano") / "config/crd/volcano/bases"
                          / "bus.volcano.sh_commands.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    command = queue_command({"metadata": {"name": "q", "uid": "u"}}, "OpenQueue", "why")
    assert set(command) <= set(schema), set(command) - set(schema)
    assert set(command["target"]) <= set(schema["target"]["properties"])


def test_usage_forecasts_the_date_the_budget_runs_out():
    from trainyard.usage.budgets import forecast

    found = forecast(CLOSE, 50.0, at("2026-11-11T00:00:00"))
    assert found == {"gpu_hours": 100, "period": "2026-11", "spent_gpu_hours": 50.0, "percent": 50.0, "state": "ok",
                     "action": "closeQueue", "runs_out": "2026-11-21T00:00:00Z"}
    assert forecast(CLOSE, 5.0, at("2026-11-11T00:00:00"))["runs_out"] is None


def test_the_budget_columns_of_usage_output():
    import csv
    import io

    from trainyard.usage.account import GroupUsage
    from trainyard.usage.budgets import forecast
    from trainyard.usage.render import render

    rows = [GroupUsage("team-a", 50.0, 10.0, None, None, 0, 0, 0, 0), GroupUsage("team-b", 1.0, 0.0, None, None,
                                                                                 0, 0, 0, 0)]
    budgets = {"team-a": forecast(CLOSE, 50.0, at("2026-11-11T00:00:00"))}
    objects = json.loads(render("json", "tenant", rows, 0.0, 1.0, budgets))
    assert objects[0]["budget"]["runs_out"] == "2026-11-21T00:00:00Z" and "budget" not in objects[1]
    table = render("table", "tenant", rows, 0.0, 1.0, budgets)
    assert "team-a: 50.00 of 100 GPU-h 2026-11 (50 %, ok); runs out 2026-11-21T00:00:00Z; at 100 %: closeQueue" in table
    sheet = list(csv.DictReader(io.StringIO(render("csv", "tenant", rows, 0.0, 1.0, budgets))))
    assert (sheet[0]["budget_state"], sheet[1]["budget_state"]) == ("ok", "")
