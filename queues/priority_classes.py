"""PriorityClasses from stack config: job priority for Volcano's `priority` plugin and pod priority."""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.k8s import part_of_trainyard

PRIORITY_CLASS_API_VERSION = "scheduling.k8s.io/v1"
MAX_USER_VALUE = 1_000_000_000
"""Values above this are reserved for system-* classes by the API server."""
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


@dataclass(frozen=True)
class PriorityClassSpec:
    name: str
    """The PriorityClass name."""
    value: int
    """Its priority value (higher runs first)."""
    description: str = ""
    """Its description; unset, `trainyard priority <name>`."""
    preemption_policy: str = "PreemptLowerPriority"
    """`PreemptLowerPriority` or `Never`."""
    global_default: bool = False
    """The class of pods that name none, cluster-wide."""


def render_priority_class(spec: PriorityClassSpec) -> dict:
    return {
        "apiVersion": PRIORITY_CLASS_API_VERSION,
        "kind": "PriorityClass",
        "metadata": {"name": spec.name, "labels": part_of_trainyard()},
        "value": spec.value,
        "globalDefault": spec.global_default,
        "preemptionPolicy": spec.preemption_policy,
        "description": spec.description or f"trainyard priority {spec.name}",
    }
