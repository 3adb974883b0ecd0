"""The seed-era spelling of a Volcano gang's network topology, mapped to upstream's (pure).

Seed 001's complete ClusterTrainingRuntime writes `podGroupPolicy.volcano.networkTopology` as
`topologyKey: <node label>` and `networkPolicy: Best-effort | Strict`. Upstream (Trainer v2.3, Volcano's
NetworkTopologySpec) only knows `mode: soft | hard` and `highestTierAllowed: <HyperNode tier>`. trainyard
accepts the seed spelling, warns with the upstream one, and builds the PodGroup from the mapping:

- `networkPolicy: Best-effort` is `mode: soft`, `Strict` is `mode: hard`;
- `topologyKey` is the HyperNode tier the platform builds from that node label (`TIER_OF_NODE_LABEL`:
  racks are tier 1 from `trainyard.dev/rack`, spines tier 2 from `trainyard.dev/spine`, and a zone holds
  whole spines, so `topology.kubernetes.io/zone` allows up to tier 2). Any other label matches no tier and
  is refused, naming `highestTierAllowed` and the tiers that exist.

Where both spellings are present the seed fields win (the API server defaults `mode` and
`highestTierAllowed`, so an explicit upstream value cannot be told apart from the default).
"""

from __future__ import annotations

from trainyard.k8s import RACK_LABEL, SPINE_LABEL, mapping

from .errors import ValidationError
from .schema import FieldError

NETWORK_POLICY_MODES = {"Best-effort": "soft", "Strict": "hard"}
ZONE_LABEL = "topology.kubernetes.io/zone"
TIER_OF_NODE_LABEL = {RACK_LABEL: 1, SPINE_LABEL: 2, ZONE_LABEL: 2}
TIER_NAMES = {1: "rack", 2: "spine"}
FIELD = "spec.podGroupPolicy.volcano.networkTopology"
SEED_FIELDS = ("topologyKey", "networkPolicy")


def _tiers() -> str:
    return ", ".join(f"{tier} ({TIER_NAMES[tier]}, from node label {label})" for label, tier in TIER_OF_NODE_LABEL.items()
                     if label != ZONE_LABEL)


def network_topology(topology: dict) -> dict:
    """Upstream's `{mode, highestTierAllowed}` for a (possibly seed-spelled) networkTopology; raises
    ValidationError for a topologyKey that matches no tier (admission reports it first: `topology_errors`)."""
    mode = NETWORK_POLICY_MODES.get(str(topology.get("networkPolicy")), topology.get("mode", "hard"))
    tier = topology.get("highestTierAllowed", 1)
    if "topologyKey" in topology:
        if topology["topologyKey"] not in TIER_OF_NODE_LABEL:
            raise ValidationError(str(_unknown_key(topology["topologyKey"])))
        tier = TIER_OF_NODE_LABEL[topology["topologyKey"]]
    return {"mode": mode, "highestTierAllowed": tier}


def _topology_of(runtime: dict) -> dict | None:
    spec = mapping(runtime.get("spec"))
    volcano = mapping(spec.get("podGroupPolicy")).get("volcano")
    topology = volcano.get("networkTopology") if isinstance(volcano, dict) else None
    return topology if isinstance(topology, dict) else None


def _unknown_key(key: object) -> FieldError:
    return FieldError(f"{FIELD}.topologyKey", "Unsupported value",
                      f"no HyperNode tier is built from this node label; use highestTierAllowed with one of the "
                      f"platform's tiers: {_tiers()} (or topologyKey {', '.join(TIER_OF_NODE_LABEL)})", key)


def topology_errors(runtime: dict) -> list[FieldError]:
    topology = _topology_of(runtime)
    if topology is None or "topologyKey" not in topology or topology["topologyKey"] in TIER_OF_NODE_LABEL:
        return []
    return [_unknown_key(topology["topologyKey"])]


def topology_warnings(runtime: dict) -> list[str]:
    """One warning naming the upstream spelling when the seed spelling is used (and maps)."""
    topology = _topology_of(runtime)
    if topology is None or not any(k in topology for k in SEED_FIELDS) or topology_errors(runtime):
        return []
    mapped = network_topology(topology)
    seed = ", ".join(f"{k}: {topology[k]}" for k in SEED_FIELDS if k in topology)
    return [f"{FIELD}: {seed} is the seed-era spelling; upstream Kubeflow Trainer and Volcano spell it "
            f"mode: {mapped['mode']}, highestTierAllowed: {mapped['highestTierAllowed']} (trainyard maps it; "
            f"other controllers ignore it)"]
