"""Resource lists (cpu, memory, nvidia.com/gpu) compared exactly, for quota and capacity checks."""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from trainyard.controller.errors import ControllerError
from trainyard.controller.quantity import parse_quantity

GPU = "nvidia.com/gpu"


def quantity(value: object) -> Fraction | None:
    """An exact amount, or None when the text is not a Kubernetes quantity."""
    if isinstance(value, Fraction):
        return value
    try:
        return parse_quantity(value)
    except ControllerError:
        return None


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
