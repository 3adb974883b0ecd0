"""`catalog lint`'s view of a CRD ``openAPIV3Schema``: type, required, enum, bounds, unknown fields.

The checking is `trainyard.openapi.validate` (the controller's validator) in its structural mode,
with unknown fields reported because the API server would silently prune them from a structural
schema; CEL rules, patterns and list keys are left to the admission checks lint also runs. This
module only says each finding the way lint always has (``spec.x: must be an integer, got string``).
"""

from __future__ import annotations

from typing import Any, Mapping

from trainyard.openapi import validate as validate_openapi
from trainyard.problems import Problem

_KINDS: dict[str, type | tuple[type, ...]] = {"boolean": bool, "integer": int, "number": (int, float), "string": str, "array": list, "object": dict}
_UNITS = {"string": "characters", "array": "items", "object": "properties"}
_LIMITS = {"minimum": "greater than or equal to", "maximum": "less than or equal to"}
_SIZES = {"minLength": ("at least", "string"), "maxLength": ("at most", "string"), "minItems": ("at least", "array"),
          "maxItems": ("at most", "array"), "minProperties": ("at least", "object"), "maxProperties": ("at most", "object")}


def validate(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every violation of ``schema`` in ``value``, as ``<field path>: <problem>`` strings."""
    problems = validate_openapi(dict(schema), value, path, unknown_fields=True, structural_only=True)
    return [say(problem) for problem in problems]


def say(problem: Problem) -> str:
    """One schema violation in lint's words."""
    where = (problem.field or "").lstrip(".") or "<root>"
    code, expected, value = problem.code, problem.expected, problem.value
    if code == "nullable":
        return f"{where}: must not be null"
    if code == "type":
        if expected == "string or integer":
            return f"{where}: must be an integer or a string, got {_kind(value)}"
        return f"{where}: must be {'an' if expected[0] in 'aeiou' else 'a'} {expected}, got {_kind(value)}"
    if code == "enum":
        return f"{where}: Unsupported value {value!r}: supported values: {', '.join(repr(a) for a in expected)}"
    if code in _LIMITS:
        return f"{where}: must be {_LIMITS[code]} {expected}"
    if code in _SIZES:
        bound, kind = _SIZES[code]
        return f"{where}: must have {bound} {expected} {_UNITS[kind]}"
    if code == "required":
        return f"{where}: Required value"
    if code == "unknown":
        return f"{where}: unknown field (not in the CRD schema; the API server would drop it)"
    return str(problem)


def _kind(value: Any) -> str:
    for name, kind in _KINDS.items():
        if isinstance(value, kind) and (name in ("boolean", "string", "array", "object") or not isinstance(value, bool)):
            return name
    return type(value).__name__
