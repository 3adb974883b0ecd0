"""A small OpenAPI v3 (structural schema) toolkit: build schemas, validate, default and prune like the API server.

The CRDs in `crds.py` and the checks in `admission.py` come from the SAME schema objects, so a rule
cannot be published in the CRD and forgotten by `trainyard validate` (or the reverse). CEL rules are
`Rule` objects carrying the CEL text for the CRD and an equivalent Python predicate for us.
"""

from __future__ import annotations

import copy
import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from trainyard.problems import MISSING as _MISSING
from trainyard.problems import FieldError, render_value as _render


@dataclass(frozen=True)
class Rule:
    """One `x-kubernetes-validations` entry. `check(self)` or, for transition rules, `check(self, old)`."""

    rule: str
    message: str
    check: Callable[..., bool]
    transition: bool = False

    def to_openapi(self) -> dict:
        return {"rule": self.rule, "message": self.message}


# ---- builders -----------------------------------------------------------------------------------

def _with(schema: dict, description: str | None, rules: Iterable[Rule] | None, extra: dict) -> dict:
    if description:
        schema["description"] = description
    if rules:
        schema["x-kubernetes-validations"] = list(rules)
    schema.update({k: v for k, v in extra.items() if v is not None})
    return schema


def obj(properties: dict | None = None, required: Iterable[str] = (), description: str | None = None,
        rules: Iterable[Rule] | None = None, **extra: Any) -> dict:
    schema: dict = {"type": "object"}
    if properties:  # the API server drops an empty map, which would show as a perpetual diff
        schema["properties"] = properties
    if required:
        schema["required"] = list(required)
    return _with(schema, description, rules, extra)


def string(description: str | None = None, rules: Iterable[Rule] | None = None, **extra: Any) -> dict:
    return _with({"type": "string"}, description, rules, extra)


def integer(fmt: str = "int32", description: str | None = None, rules: Iterable[Rule] | None = None, **extra: Any) -> dict:
    return _with({"type": "integer", "format": fmt}, description, rules, extra)


def boolean(description: str | None = None, rules: Iterable[Rule] | None = None, **extra: Any) -> dict:
    return _with({"type": "boolean"}, description, rules, extra)


def array(items: dict, description: str | None = None, rules: Iterable[Rule] | None = None, **extra: Any) -> dict:
    return _with({"type": "array", "items": items}, description, rules, extra)


def string_map(description: str | None = None, **extra: Any) -> dict:
    return _with({"type": "object", "additionalProperties": {"type": "string"}}, description, None, extra)


def int_or_string(description: str | None = None, rules: Iterable[Rule] | None = None, **extra: Any) -> dict:
    return _with({"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                 description, rules, extra)


def free_object(description: str | None = None, rules: Iterable[Rule] | None = None, **extra: Any) -> dict:
    """An object whose inner fields are not validated (kept as given)."""
    return _with({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, description, rules, extra)


def to_openapi(schema: Any) -> Any:
    """Turn a schema built here into plain JSON-able OpenAPI (Rule objects become rule/message dicts)."""
    if isinstance(schema, Rule):
        return schema.to_openapi()
    if isinstance(schema, dict):
        return {k: to_openapi(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [to_openapi(v) for v in schema]
    return schema


# ---- defaulting and pruning (what the API server does before admission) ----------------------------

def apply_defaults(schema: dict, value: Any) -> Any:
    """Return a copy of `value` with schema defaults filled in where a parent object exists."""
    value = copy.deepcopy(value)
    _default(schema, value)
    return value


def _default(schema: dict, value: Any) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                _default(sub, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for v in value.values():
                _default(extra, v)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)


def prune(schema: dict, value: Any) -> tuple[Any, list[str]]:
    """Drop fields the schema does not know (API server pruning); return the value and their paths."""
    unknown: list[str] = []
    return _prune(schema, copy.deepcopy(value), "", unknown), unknown


def _prune(schema: dict, value: Any, path: str, unknown: list[str]) -> Any:
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        if props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            for name in [k for k in value if k not in props]:
                unknown.append(f"{path}.{name}" if path else name)
                del value[name]
        for name, v in list(value.items()):
            sub = (props or {}).get(name) or (schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None)
            if sub:
                value[name] = _prune(sub, v, f"{path}.{name}" if path else name, unknown)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(schema["items"], v, f"{path}[{i}]", unknown) for i, v in enumerate(value)]
    return value


# ---- validation ---------------------------------------------------------------------------------

_TYPES = {"string": (str,), "boolean": (bool,), "object": (dict,), "array": (list,)}


def validate(schema: dict, value: Any, path: str, old: Any = _MISSING) -> list[FieldError]:
    """Validate like the API server: types, enums, bounds, lengths, required, list-map keys, CEL rules."""
    errors: list[FieldError] = []
    _validate(schema, value, path, old, errors)
    return errors


def _type_ok(schema: dict, value: Any) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        return None if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else "string or integer"
    kind = schema.get("type")
    if kind == "integer":
        return None if isinstance(value, int) and not isinstance(value, bool) else "integer"
    if kind == "number":
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else "number"
    if kind in _TYPES:
        return None if isinstance(value, _TYPES[kind]) else kind
    return None


def _validate(schema: dict, value: Any, path: str, old: Any, errors: list[FieldError]) -> None:
    if value is None:
        if not schema.get("nullable"):
            errors.append(FieldError(path, "Invalid", f"{path} in body must be of type {schema.get('type', 'object')}: \"null\"", value))
        return
    expected = _type_ok(schema, value)
    if expected:
        errors.append(FieldError(path, "Invalid", f"{path} in body must be of type {expected}: \"{type(value).__name__}\"", value))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' for v in schema["enum"])
        errors.append(FieldError(path, "Unsupported value", f"supported values: {allowed}", value))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(FieldError(path, "Too long", f"may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(FieldError(path, "Invalid", f"{path} in body should be at least {schema['minLength']} chars long", value))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(FieldError(path, "Invalid", f"{path} in body should match '{schema['pattern']}'", value))
        if schema.get("format") == "date-time" and not _is_datetime(value):
            errors.append(FieldError(path, "Invalid", f"{path} in body must be of type date-time", value))
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(FieldError(path, "Invalid", f"{path} in body should be greater than or equal to {schema['minimum']}", value))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(FieldError(path, "Invalid", f"{path} in body should be less than or equal to {schema['maximum']}", value))
    if isinstance(value, dict):
        _validate_object(schema, value, path, old, errors)
    if isinstance(value, list):
        _validate_array(schema, value, path, old, errors)
    for rule in schema.get("x-kubernetes-validations", []):
        if not isinstance(rule, Rule):
            continue
        if rule.transition and old is _MISSING:
            continue
        try:
            ok = rule.check(value, old) if rule.transition else rule.check(value)
        except Exception:  # a CEL evaluation error is a failed rule, never a crash
            ok = False
        if not ok:
            errors.append(FieldError(path, "Invalid", rule.message, value))


def _validate_object(schema: dict, value: dict, path: str, old: Any, errors: list[FieldError]) -> None:
    old_map = old if isinstance(old, dict) else {}
    for name in schema.get("required", []):
        if name not in value:
            errors.append(FieldError(f"{path}.{name}", "Required", ""))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errors.append(FieldError(path, "Invalid", f"{path} in body should have at least {schema['minProperties']} properties", value))
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for name, v in value.items():
        sub = props.get(name) or (extra if isinstance(extra, dict) else None)
        if sub is not None:
            _validate(sub, v, f"{path}.{name}", old_map.get(name, _MISSING), errors)


def _validate_array(schema: dict, value: list, path: str, old: Any, errors: list[FieldError]) -> None:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(FieldError(path, "Too many", f"{len(value)}: must have at most {schema['maxItems']} items"))
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(FieldError(path, "Invalid", f"{path} in body should have at least {schema['minItems']} items", value))
    items = schema.get("items")
    keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
    seen: set = set()
    for i, item in enumerate(value):
        old_item: Any = _MISSING
        if keys and isinstance(item, dict):
            key = tuple(_hashable(item.get(k)) for k in keys)
            if key in seen:
                errors.append(FieldError(f"{path}[{i}]", "Duplicate value", str(dict(zip(keys, key)))))
            seen.add(key)
            if isinstance(old, list):
                old_item = next((o for o in old if isinstance(o, dict) and tuple(_hashable(o.get(k)) for k in keys) == key), _MISSING)
        elif schema.get("x-kubernetes-list-type") == "set":
            if _hashable(item) in seen:
                errors.append(FieldError(f"{path}[{i}]", "Duplicate value", _render(item)))
            seen.add(_hashable(item))
        if isinstance(items, dict):
            _validate(items, item, f"{path}[{i}]", old_item, errors)


def _hashable(value: Any) -> Any:
    return repr(value) if isinstance(value, (dict, list)) else value


def _is_datetime(text: str) -> bool:
    try:
        _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


# ---- helpers for writing Rule predicates ---------------------------------------------------------

def immutable(message: str = "field is immutable") -> Rule:
    return Rule("self == oldSelf", message, lambda new, old: new == old, transition=True)


DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
