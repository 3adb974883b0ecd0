"""A small structural validator for CRD ``openAPIV3Schema``s: type, required, enum, bounds, unknown fields.

Enough to catch what a catalog template gets wrong before the API server does;
CEL rules are left to the admission checks. Unknown fields are errors because
the API server would silently prune them from a structural schema.
"""

from __future__ import annotations

from typing import Any, Mapping

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def validate(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Every violation of ``schema`` in ``value``, as ``<field path>: <problem>`` strings."""
    where = path or "<root>"
    if value is None:
        return [] if schema.get("nullable") else [f"{where}: must not be null"]
    if schema.get("x-kubernetes-int-or-string"):
        if not (_TYPES["integer"](value) or isinstance(value, str)):
            return [f"{where}: must be an integer or a string, got {_kind(value)}"]
        return _check_enum(value, schema, where)
    expected = schema.get("type")
    if expected and expected in _TYPES and not _TYPES[expected](value):
        return [f"{where}: must be {_article(expected)} {expected}, got {_kind(value)}"]
    problems = _check_enum(value, schema, where) + _check_bounds(value, schema, where)
    if isinstance(value, dict):
        problems += _validate_object(value, schema, path)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problems += validate(item, schema["items"], f"{path}[{index}]")
    return problems


def _validate_object(value: dict, schema: Mapping[str, Any], path: str) -> list[str]:
    problems = []
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            problems.append(f"{_join(path, name)}: Required value")
    additional = schema.get("additionalProperties")
    open_object = schema.get("x-kubernetes-preserve-unknown-fields") or (not properties and additional is None)
    for name, item in value.items():
        if name in properties:
            problems += validate(item, properties[name], _join(path, name))
        elif isinstance(additional, Mapping):
            problems += validate(item, additional, _join(path, name))
        elif not open_object and additional is not True:
            problems.append(f"{_join(path, name)}: unknown field (not in the CRD schema; the API server would drop it)")
    return problems


def _check_enum(value: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    allowed = schema.get("enum")
    if allowed is not None and value not in allowed:
        return [f"{where}: Unsupported value {value!r}: supported values: {', '.join(repr(a) for a in allowed)}"]
    return []


def _check_bounds(value: Any, schema: Mapping[str, Any], where: str) -> list[str]:
    problems = []
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: must be greater than or equal to {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: must be less than or equal to {schema['maximum']}")
    sized = {str: ("minLength", "maxLength"), list: ("minItems", "maxItems"), dict: ("minProperties", "maxProperties")}
    for kind, (low, high) in sized.items():
        if isinstance(value, kind):
            if low in schema and len(value) < schema[low]:
                problems.append(f"{where}: must have at least {schema[low]} {_unit(kind)}")
            if high in schema and len(value) > schema[high]:
                problems.append(f"{where}: must have at most {schema[high]} {_unit(kind)}")
    return problems


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _kind(value: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return name
    return type(value).__name__


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _unit(kind: type) -> str:
    return {str: "characters", list: "items", dict: "properties"}[kind]
