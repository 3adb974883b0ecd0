"""Resource arithmetic: GPU/CPU per node, pod requests for PodGroups, extended-resource limits."""

from __future__ import annotations

from fractions import Fraction

from trainyard.k8s import ceil_value, format_quantity, is_binary, parse_quantity

from . import k8s


def is_extended(resource: str) -> bool:
    """Extended resources carry a domain prefix (nvidia.com/gpu); native ones (cpu, memory) do not."""
    return "/" in resource


def gpu_count(resources: dict | None) -> int:
    """First resource whose name contains 'gpu' in requests, else in limits (names sorted: deterministic)."""
    resources = resources or {}
    for key in ("requests", "limits"):
        for name, value in sorted((resources.get(key) or {}).items()):
            if "gpu" in name.lower():
                count = ceil_value(value, f"resources.{key}.{name}")
                if count > 0:
                    return count
                break
    return 0


def cpu_count(resources: dict | None) -> int:
    """requests.cpu rounded up, or limits.cpu when the request is absent or zero."""
    resources = resources or {}
    request = (resources.get("requests") or {}).get("cpu")
    if request is not None and parse_quantity(request, "resources.requests.cpu") != 0:
        return ceil_value(request, "resources.requests.cpu")
    limit = (resources.get("limits") or {}).get("cpu")
    return ceil_value(limit, "resources.limits.cpu") if limit is not None else 0


def _container_requests(container: dict) -> dict[str, Fraction]:
    """Container requests; an extended resource given only as a limit counts as its request (k8s defaults
    requests from limits, so the scheduler will need it - upstream forgets it, trainyard counts it)."""
    res = container.get("resources") or {}
    out: dict[str, Fraction] = {}
    for name, value in (res.get("requests") or {}).items():
        out[name] = parse_quantity(value, f"resources.requests.{name}")
    for name, value in (res.get("limits") or {}).items():
        if is_extended(name) and name not in out:
            out[name] = parse_quantity(value, f"resources.limits.{name}")
    return out


def pod_requests(pod_spec: dict) -> dict[str, Fraction]:
    """Sum of app containers' requests, raised to any single init container's request."""
    total: dict[str, Fraction] = {}
    for c in pod_spec.get("containers") or []:
        for name, q in _container_requests(c).items():
            total[name] = total.get(name, Fraction(0)) + q
    for c in pod_spec.get("initContainers") or []:
        for name, q in _container_requests(c).items():
            total[name] = max(total.get(name, Fraction(0)), q)
    return total


def binary_resources(pod_spec: dict) -> set[str]:
    """Resource names first written with a binary suffix (Gi, Mi): the sum is printed the same way."""
    names: set[str] = set()
    for c in (pod_spec.get("containers") or []) + (pod_spec.get("initContainers") or []):
        for key in ("requests", "limits"):
            for name, value in ((c.get("resources") or {}).get(key) or {}).items():
                if is_binary(value):
                    names.add(name)
    return names


def format_resource_list(totals: dict[str, Fraction], binary: set[str]) -> dict[str, str]:
    return {name: format_quantity(totals[name], name in binary) for name in sorted(totals)}


def mirror_extended_limits(spec: dict) -> None:
    """An extended resource requested without a limit gets limit = request (Kubernetes requires a
    limit for extended resources and rejects the pod otherwise). Beyond upstream."""
    for container in k8s.all_containers(spec):
        res = container.get("resources")
        if not isinstance(res, dict):
            continue
        for name, value in (res.get("requests") or {}).items():
            if is_extended(name) and name not in (res.get("limits") or {}):
                res.setdefault("limits", {})[name] = value
