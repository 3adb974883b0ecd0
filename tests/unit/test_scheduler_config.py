"""The Volcano scheduler configuration renderer."""

import pytest
import yaml

from trainyard.platform.problems import ConfigProblem
from trainyard.queues.scheduler_config import SchedulerSettings, render, scheduler_config


def _plugins(cfg):
    return [p["name"] for tier in cfg["tiers"] for p in tier["plugins"]]


@pytest.mark.parametrize("profile,actions", [
    ("gang", "enqueue, allocate, backfill"),
    ("fair-share", "enqueue, allocate, backfill, preempt, reclaim"),
])
def test_actions_per_profile(profile, actions):
    assert scheduler_config(SchedulerSettings(profile=profile))["actions"] == actions


def test_gang_profile_tiers():
    cfg = scheduler_config()
    assert [p["name"] for p in cfg["tiers"][0]["plugins"]] == ["priority", "gang", "conformance"]
    assert _plugins(cfg)[3:] == ["predicates", "proportion", "nodeorder", "binpack", "network-topology-aware"]


@pytest.mark.parametrize("settings, overcommit", [
    (SchedulerSettings(), None),  # admitted gangs beyond a queue's weighted share would hold idle GPUs
    (SchedulerSettings(overcommit_factor=1.0), {"overcommit-factor": 1.0}),
    (SchedulerSettings(overcommit_factor=1.5), {"overcommit-factor": 1.5}),
    (SchedulerSettings(profile="fair-share", overcommit_factor=1.0), None),  # reclaim needs Inqueue gangs
])
def test_overcommit_only_when_asked_and_never_with_reclaim(settings, overcommit):
    plugins = {p["name"]: p for tier in scheduler_config(settings)["tiers"] for p in tier["plugins"]}
    assert (plugins["overcommit"]["arguments"] if "overcommit" in plugins else None) == overcommit
    if overcommit:
        assert _plugins(scheduler_config(settings))[3] == "overcommit"


def test_binpack_weighs_gpus_and_nodeorder_does_not_spread():
    cfg = scheduler_config()
    plugins = {p["name"]: p for tier in cfg["tiers"] for p in tier["plugins"]}
    assert plugins["binpack"]["arguments"]["binpack.resources"] == "nvidia.com/gpu"
    assert plugins["binpack"]["arguments"]["binpack.resources.nvidia.com/gpu"] > 0
    assert plugins["nodeorder"]["arguments"]["leastrequested.weight"] == 0


def test_capacity_plugin_replaces_proportion():
    names = _plugins(scheduler_config(SchedulerSettings(queue_plugin="capacity")))
    assert "capacity" in names and "proportion" not in names


@pytest.mark.parametrize("settings,field", [
    (SchedulerSettings(profile="fast"), "scheduler.profile"),
    (SchedulerSettings(queue_plugin="drf"), "scheduler.queuePlugin"),
    (SchedulerSettings(overcommit_factor=0.5), "scheduler.overcommitFactor"),
    (SchedulerSettings(binpack_weight=-1), "scheduler.binpackWeight"),
])
def test_bad_settings_name_the_field(settings, field):
    with pytest.raises(ValueError, match=field):
        scheduler_config(settings)


def test_render_is_deterministic_yaml():
    assert render() == render()
    assert yaml.safe_load(render()) == scheduler_config()


def test_problems_are_structured_records_with_field_message_and_fix():
    (problem,) = SchedulerSettings(queue_plugin="drf").problems("stacks/Pulumi.x.yaml", "trainyard:scheduler")
    assert isinstance(problem, ConfigProblem)
    assert (problem.file, problem.field, problem.severity) == ("stacks/Pulumi.x.yaml", "trainyard:scheduler.queuePlugin",
                                                               "error")
    assert "'drf'" in problem.message and "proportion, capacity" in problem.fix
    assert SchedulerSettings().problems() == []
