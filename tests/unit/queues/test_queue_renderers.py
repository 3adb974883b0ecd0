"""Volcano queue, HyperNode, PriorityClass and scheduler ConfigMap renderers."""

import pytest
import yaml

from trainyard.queues.hypernodes import RackSpec, TopologySpec, racks_from_node_labels, render_hypernodes
from trainyard.queues.priority_classes import PriorityClassSpec, render_priority_class
from trainyard.queues.scheduler_config import SchedulerSettings, scheduler_config, scheduler_configmap
from trainyard.queues.volcano_queues import QueueSpec, ordering_problems, render_queue


def test_queue_renders_capability_as_strings_and_leaves_out_empty_lists():
    queue = render_queue(QueueSpec(name="team-a", weight=3, capability={"nvidia.com/gpu": 16}, reclaimable=False))
    assert queue["apiVersion"] == "scheduling.volcano.sh/v1beta1" and queue["kind"] == "Queue"
    assert queue["spec"] == {"weight": 3, "reclaimable": False, "capability": {"nvidia.com/gpu": "16"}}


def test_queue_hierarchy_and_guarantee():
    spec = render_queue(QueueSpec(name="a", parent="org", deserved={"nvidia.com/gpu": 8},
                                  guarantee={"nvidia.com/gpu": 4}, priority=5))["spec"]
    assert spec["parent"] == "org" and spec["priority"] == 5
    assert spec["guarantee"] == {"resource": {"nvidia.com/gpu": "4"}}


@pytest.mark.parametrize("spec,field", [
    (QueueSpec("q", capability={"nvidia.com/gpu": 8}, deserved={"nvidia.com/gpu": 16}), "deserved.nvidia.com/gpu"),
    (QueueSpec("q", deserved={"cpu": 4}, guarantee={"cpu": 8}), "guarantee.cpu"),
    (QueueSpec("q", deserved={"cpu": 4}, guarantee={"memory": "1Gi"}), "guarantee.memory"),
])
def test_queue_ordering_rules_mirror_volcano_webhook(spec, field):
    assert field in [f for f, _, _ in ordering_problems(spec)]


def test_ordering_accepts_guarantee_below_deserved_below_capability():
    assert ordering_problems(QueueSpec("q", capability={"cpu": "16"}, deserved={"cpu": "8"}, guarantee={"cpu": "4"})) == []


def test_hypernodes_racks_by_label_then_spine_by_exact_name():
    nodes = render_hypernodes(TopologySpec(racks=(RackSpec("rack-0", "spine-0"), RackSpec("rack-1", "spine-0"))))
    assert [(n["metadata"]["name"], n["spec"]["tier"]) for n in nodes] == [("rack-0", 1), ("rack-1", 1), ("spine-0", 2)]
    assert nodes[0]["spec"]["members"] == [
        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"trainyard.dev/rack": "rack-0"}}}}]
    assert nodes[2]["spec"]["members"] == [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-0"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-1"}}}]


def test_hypernode_rack_with_exact_node_names():
    rack = render_hypernodes(TopologySpec(racks=(RackSpec("r", "s", nodes=("n1", "n2")),)))[0]
    assert [m["selector"] for m in rack["spec"]["members"]] == [{"exactMatch": {"name": "n1"}}, {"exactMatch": {"name": "n2"}}]


def test_racks_derived_from_node_labels():
    nodes = [{"metadata": {"labels": {"trainyard.dev/rack": f"rack-{i // 2}", "trainyard.dev/spine": "spine-0"}}}
             for i in range(4)] + [{"metadata": {"labels": {}}}]
    assert racks_from_node_labels(nodes, "trainyard.dev/rack", "trainyard.dev/spine") == (
        RackSpec("rack-0", "spine-0"), RackSpec("rack-1", "spine-0"))


def test_priority_class():
    obj = render_priority_class(PriorityClassSpec("training-high", 10000, preemption_policy="Never"))
    assert (obj["apiVersion"], obj["value"], obj["preemptionPolicy"], obj["globalDefault"]) == (
        "scheduling.k8s.io/v1", 10000, "Never", False)


def test_scheduler_configmap_carries_the_rendered_conf():
    cm = scheduler_configmap(SchedulerSettings(profile="fair-share"))
    assert (cm["metadata"]["namespace"], cm["metadata"]["name"]) == ("volcano-system", "volcano-scheduler-configmap")
    conf = yaml.safe_load(cm["data"]["volcano-scheduler.conf"])
    assert conf == scheduler_config(SchedulerSettings(profile="fair-share"))
    assert conf["actions"] == "enqueue, allocate, backfill, preempt, reclaim"


def test_capacity_hierarchy_enables_hierarchy_only_for_capacity():
    def plugin(settings):
        return next(p for t in scheduler_config(settings)["tiers"] for p in t["plugins"] if p["name"] == settings.queue_plugin)
    assert plugin(SchedulerSettings(queue_plugin="capacity", hierarchical_queues=True))["enableHierarchy"] is True
    assert "enableHierarchy" not in plugin(SchedulerSettings(queue_plugin="proportion", hierarchical_queues=True))
