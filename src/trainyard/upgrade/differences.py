"""Where a newly rendered object differs from the one in the cluster (pure).

The render states only the fields the controller owns; the object in the cluster also carries what the API server
and webhooks defaulted. So a mapping is compared on the render's keys only, while a list of named items (containers,
env, volumes, replicated jobs) is compared both ways: an item the render drops is one server-side apply would
remove. Paths name list items by their `name`: `spec.replicatedJobs[launcher]...env[PRTE_MCA_...]`.
"""

from __future__ import annotations

from typing import Any

LIMIT = 20
"""Paths listed at most per object (the rest are counted)."""


def _named(items: list[Any]) -> dict[str, Any] | None:
    if items and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return {i["name"]: i for i in items}
    return None


def _walk(rendered: Any, existing: Any, path: str, out: list[str]) -> None:
    if isinstance(rendered, dict) and isinstance(existing, dict):
        for key, value in rendered.items():
            if key not in existing:
                out.append(f"{path}.{key} added")
            else:
                _walk(value, existing[key], f"{path}.{key}", out)
        return
    if isinstance(rendered, list) and isinstance(existing, list):
        new, old = _named(rendered), _named(existing)
        if new is not None and old is not None:
            for name, item in new.items():
                if name not in old:
                    out.append(f"{path}[{name}] added")
                else:
                    _walk(item, old[name], f"{path}[{name}]", out)
            out.extend(f"{path}[{name}] removed" for name in old if name not in new)
            return
        if len(rendered) != len(existing):
            out.append(f"{path} changed")
            return
        for index, (item, was) in enumerate(zip(rendered, existing)):
            _walk(item, was, f"{path}[{index}]", out)
        return
    if rendered != existing and not _same_quantity(rendered, existing):
        out.append(f"{path} changed")


def _same_quantity(a: Any, b: Any) -> bool:
    """`1` and `"1"` (a quantity or an int-or-string as rendered and as the API server returns it)."""
    return isinstance(a, (int, str)) and isinstance(b, (int, str)) and str(a) == str(b)


def differences(rendered: dict[str, Any], existing: dict[str, Any]) -> tuple[str, ...]:
    """The render's `spec` against the cluster object's (metadata and status are not the workload)."""
    out: list[str] = []
    _walk(rendered.get("spec") or {}, existing.get("spec") or {}, "spec", out)
    if len(out) > LIMIT:
        out = out[:LIMIT] + [f"... and {len(out) - LIMIT} more"]
    return tuple(out)
