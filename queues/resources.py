"""Resource lists (cpu, memory, nvidia.com/gpu) compared exactly, for quota and capacity checks."""

from __future__ import annotations

from typing import Mapping

from trainyard.k8s import GPU_RESOURCE as GPU  # noqa: F401 (resources.GPU)
from trainyard.k8s import quantity_or_none as quantity


def over(requested: Mapping[str, object], limit: Mapping[str, object]) -> list[str]:
    """Resources of `requested` that exceed `limit` (resources absent from `limit` are not limited)."""
    names = []
    for name, value in requested.items():
        if name not in limit:
            continue
        amount, bound = quantity(value), quantity(limit[name])
        if amount is not None and bound is not None and amount > bound:
            names.append(name)
    return names


def as_strings(resources: Mapping[str, object]) -> dict[str, str]:
    """Kubernetes wants quantities as strings; YAML gives ints for `16`."""
    return {name: str(value) for name, value in resources.items()}
