"""The seed-era networkTopology spelling (topologyKey, networkPolicy) mapped to Volcano's (mode, highestTierAllowed)."""

import pytest

from trainyard.controller.admission import validate_runtime
from trainyard.controller.build import build_objects
from trainyard.controller.errors import ValidationError
from trainyard.controller.seed_topology import network_topology, topology_errors, topology_warnings

from ctl_builders import by_kind, fixed_key, job, runtime, trainjob


@pytest.mark.parametrize("topology,expected", [
    ({}, {"mode": "hard", "highestTierAllowed": 1}),
    ({"mode": "soft", "highestTierAllowed": 2}, {"mode": "soft", "highestTierAllowed": 2}),
    ({"networkPolicy": "Best-effort"}, {"mode": "soft", "highestTierAllowed": 1}),
    ({"networkPolicy": "Strict"}, {"mode": "hard", "highestTierAllowed": 1}),
    ({"topologyKey": "trainyard.dev/rack"}, {"mode": "hard", "highestTierAllowed": 1}),
    ({"topologyKey": "trainyard.dev/spine", "networkPolicy": "Best-effort"}, {"mode": "soft", "highestTierAllowed": 2}),
    ({"topologyKey": "topology.kubernetes.io/zone", "networkPolicy": "Strict"}, {"mode": "hard", "highestTierAllowed": 2}),
    # the API server's defaults beside the seed fields: the seed fields win
    ({"mode": "hard", "highestTierAllowed": 1, "topologyKey": "topology.kubernetes.io/zone", "networkPolicy": "Best-effort"},
     {"mode": "soft", "highestTierAllowed": 2}),
])
def test_network_topology_mapping(topology, expected):
    assert network_topology(topology) == expected


def seeded(topology):
    return runtime(jobs=[job("node", "trainer")], ml={"torch": {}}, pod_group={"volcano": {"networkTopology": topology}})


def test_a_label_no_tier_is_built_from_is_refused_everywhere_naming_the_replacement():
    rt = seeded({"topologyKey": "example.com/row", "networkPolicy": "Strict"})
    (error,) = topology_errors(rt)
    assert error.field == "spec.podGroupPolicy.volcano.networkTopology.topologyKey"
    assert "use highestTierAllowed with one of the platform's tiers: 1 (rack, from node label trainyard.dev/rack), " \
           "2 (spine, from node label trainyard.dev/spine)" in str(error)
    assert [e.field for e in validate_runtime(rt).errors] == [error.field]
    assert topology_warnings(rt) == []
    with pytest.raises(ValidationError, match="no HyperNode tier is built from this node label"):
        build_objects(trainjob(trainer={"numNodes": 1}), rt, key_generator=fixed_key)


def test_upstream_spelling_gets_no_warning_and_builds_as_before():
    rt = seeded({"mode": "soft", "highestTierAllowed": 2})
    assert topology_warnings(rt) == [] and topology_errors(rt) == []
    (pg,) = by_kind(build_objects(trainjob(trainer={"numNodes": 1}), rt, key_generator=fixed_key), "PodGroup")
    assert pg["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}
