"""A stack as the what-if replays it: nodes in racks and spines, each tenant's caps and priority classes, and what
the model leaves out said aloud."""

import pytest
import yaml

from trainyard.paths import repo_root
from trainyard.platform.stack_source import read_stack_source
from trainyard.whatif.scenario import scenario
from trainyard.whatif.stacks import load

from stackfiles import config, edited, local_document, tenants


def test_the_local_stack_is_four_nodes_of_eight_gpus_in_two_racks_under_one_spine(tmp_path):
    found = scenario(config(local_document(), tmp_path))
    assert [(n.name, n.rack, n.spine, n.gpus) for n in found.nodes] == [
        ("gpu-node-0", "rack-0", "spine-0", 8), ("gpu-node-1", "rack-0", "spine-0", 8),
        ("gpu-node-2", "rack-1", "spine-0", 8), ("gpu-node-3", "rack-1", "spine-0", 8)]
    assert (found.capacity, found.rack_nodes(), found.spine_nodes(), found.topology) == (32, 2, 4, True)
    assert found.not_modelled == ()


def test_racks_naming_their_nodes_keep_them_and_a_stack_without_racks_is_one_rack(tmp_path):
    def named(doc):
        doc["config"]["trainyard:topology"]["racks"] = [{"name": "r1", "spine": "s1", "nodes": ["x", "y"]},
                                                        {"name": "r2", "spine": "s1"}]
    found = scenario(config(edited(local_document(), named), tmp_path))
    assert [(n.name, n.rack) for n in found.nodes] == [("x", "r1"), ("y", "r1"), ("gpu-node-0", "r2"),
                                                       ("gpu-node-1", "r2")]
    flat = scenario(config(edited(local_document(), lambda d: d["config"].pop("trainyard:topology")), tmp_path))
    assert {(n.rack, n.spine) for n in flat.nodes} == {("rack-0", "spine-0")} and not flat.topology


@pytest.mark.parametrize("capability, quota, cap", [(16, 16, 16), (8, 32, 8), (24, 24, 24)])
def test_a_tenants_gpu_cap_is_the_lower_of_queue_capability_and_quota(tmp_path, capability, quota, cap):
    """(Validation keeps a capability at or below the quota; the quota alone bounds a queue without one.)"""
    def change(doc):
        team = tenants(doc)["team-a"]
        team["queue"]["capability"]["nvidia.com/gpu"] = capability
        team["quota"]["gpu"] = quota
    terms = scenario(config(edited(local_document(), change), tmp_path)).tenants["team-a"]
    assert (terms.cap_gpus, terms.capability_gpus, terms.quota_gpus) == (cap, capability, quota)


def test_granted_priority_classes_carry_their_values(tmp_path):
    found = scenario(config(local_document(), tmp_path))
    assert found.tenants["team-a"].granted == {"team-a-default": 1000, "training-high": 10000}
    assert found.tenants["team-b"].granted == {"team-b-default": 1000}
    assert found.weights == {"team-a": 2.0, "team-b": 1.0}


def test_what_the_model_does_not_replay_is_named():
    prod = load(read_stack_source(repo_root() / "stacks" / "Pulumi.prod.yaml"))
    notes = " ".join(scenario(prod).not_modelled)
    assert "fair-share" in notes and "parent queues" in notes and "guarantee" in notes
    assert scenario(prod).policy.queue_plugin == "capacity"
    assert scenario(prod).policy.deserved["llm-pretrain"] == 224


def test_the_controllers_reclaim_is_replayed_when_the_stack_runs_it(tmp_path):
    """The prod stack (elastic `capacity` queues, its controller in the cluster) with and without reclaim."""
    prod = yaml.safe_load((repo_root() / "stacks" / "Pulumi.prod.yaml").read_text())
    without = scenario(config(prod, tmp_path)).policy
    assert without.queue_plugin == "capacity" and without.reclaim_after_s is None

    def reclaiming(doc):
        doc["config"]["trainyard:controller"]["reclaim"] = "fair-sharing"
    policy = scenario(config(edited(prod, reclaiming), tmp_path)).policy
    assert (policy.reclaim_after_s, policy.reclaim_rule, policy.reclaim_holds) == (10.0, "fair-sharing", True)
    assert policy.evict_latency_s > 0 and policy.resume_lag_s > 0
