"""The one OpenAPI v3 (structural schema) validator: validate, default and prune like the API server.

Used by the controller (CRD schemas in `controller/api*.py`, admission, `trainyard validate`) and by
`catalog lint` (`runtimes/schema.py`, against the published CRDs). CEL rules are `Rule` objects that
carry the CEL text for the CRD and an equivalent Python predicate; once published (`to_openapi`) they
are plain dicts and no longer checked here.

Every violation is a `FieldError` (a `trainyard.problems.Problem`) rendered like the API server's field
errors; `code` names the schema keyword that failed and `expected` what it asked for, so another
front end (catalog lint) can say the same finding in its own words.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Any, Callable

from trainyard.k8s import json_copy
from trainyard.problems import MISSING, FieldError, render_value


@dataclass(frozen=True)
class Rule:
    """One `x-kubernetes-validations` entry. `check(self)` or, for transition rules, `check(self, old)`."""

    rule: str
    message: str
    check: Callable[..., bool]
    transition: bool = False

    def to_openapi(self) -> dict:
        return {"rule": self.rule, "message": self.message}


def to_openapi(schema: Any) -> Any:
    """Turn a schema built with `Rule`s into plain JSON-able OpenAPI (Rule objects become rule/message dicts)."""
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
    value = json_copy(value)
    _default(schema, value)
    return value


def _default(schema: dict, value: Any) -> None:
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name not in value and "default" in sub:
                value[name] = json_copy(sub["default"])
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
    return _prune(schema, json_copy(value), "", unknown), unknown


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


@dataclass(frozen=True)
class _Mode:
    unknown_fields: bool
    """Report fields the schema does not know (instead of leaving them to `prune`)."""
    structural_only: bool
    """Types, required, enums, bounds and sizes only: no patterns, formats, list keys or CEL rules."""


def validate(schema: dict, value: Any, path: str, old: Any = MISSING, *, unknown_fields: bool = False,
             structural_only: bool = False) -> list[FieldError]:
    """Validate like the API server: types, enums, bounds, lengths, required, list-map keys, CEL rules."""
    errors: list[FieldError] = []
    _validate(schema, value, path, old, errors, _Mode(unknown_fields, structural_only))
    return errors


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_ok(schema: dict, value: Any) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        return None if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else "string or integer"
    kind = schema.get("type")
    if kind == "integer":
        return None if isinstance(value, int) and not isinstance(value, bool) else "integer"
    if kind == "number":
        return None if _is_number(value) else "number"
    if kind in _TYPES:
        return None if isinstance(value, _TYPES[kind]) else kind
    return None


def _error(path: str, kind: str, message: str, value: Any = MISSING, code: str | None = None,
           expected: Any = None) -> FieldError:
    return FieldError(path, kind, message, value, code=code, expected=expected)


def _validate(schema: dict, value: Any, path: str, old: Any, errors: list[FieldError], mode: _Mode) -> None:
    if value is None:
        if not schema.get("nullable"):
            errors.append(_error(path, "Invalid", f"{path} in body must be of type {schema.get('type', 'object')}: \"null\"",
                                 value, "nullable"))
        return
    expected = _type_ok(schema, value)
    if expected:
        errors.append(_error(path, "Invalid", f"{path} in body must be of type {expected}: \"{type(value).__name__}\"",
                             value, "type", expected))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' for v in schema["enum"])
        errors.append(_error(path, "Unsupported value", f"supported values: {allowed}", value, "enum", schema["enum"]))
    if isinstance(value, str):
        _validate_string(schema, value, path, errors, mode)
    if _is_number(value):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(_error(path, "Invalid", f"{path} in body should be greater than or equal to {schema['minimum']}",
                                 value, "minimum", schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(_error(path, "Invalid", f"{path} in body should be less than or equal to {schema['maximum']}",
                                 value, "maximum", schema["maximum"]))
    if isinstance(value, dict):
        _validate_object(schema, value, path, old, errors, mode)
    if isinstance(value, list):
        _validate_array(schema, value, path, old, errors, mode)
    if not mode.structural_only:
        _validate_rules(schema, value, path, old, errors)


def _validate_string(schema: dict, value: str, path: str, errors: list[FieldError], mode: _Mode) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(_error(path, "Too long", f"may not be more than {schema['maxLength']} bytes", code="maxLength",
                             expected=schema["maxLength"]))
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(_error(path, "Invalid", f"{path} in body should be at least {schema['minLength']} chars long",
                             value, "minLength", schema["minLength"]))
    if mode.structural_only:
        return
    if "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(_error(path, "Invalid", f"{path} in body should match '{schema['pattern']}'", value, "pattern"))
    if schema.get("format") == "date-time" and not _is_datetime(value):
        errors.append(_error(path, "Invalid", f"{path} in body must be of type date-time", value, "format"))


def _validate_rules(schema: dict, value: Any, path: str, old: Any, errors: list[FieldError]) -> None:
    for rule in schema.get("x-kubernetes-validations", []):
        if not isinstance(rule, Rule):
            continue
        if rule.transition and old is MISSING:
            continue
        try:
            ok = rule.check(value, old) if rule.transition else rule.check(value)
        except Exception:  # a CEL evaluation error is a failed rule, never a crash
            ok = False
        if not ok:
            errors.append(_error(path, "Invalid", rule.message, value, "x-kubernetes-validations"))


def _validate_object(schema: dict, value: dict, path: str, old: Any, errors: list[FieldError], mode: _Mode) -> None:
    old_map = old if isinstance(old, dict) else {}
    for name in schema.get("required", []):
        if name not in value:
            errors.append(_error(f"{path}.{name}", "Required", "", code="required"))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errors.append(_error(path, "Invalid", f"{path} in body should have at least {schema['minProperties']} properties",
                             value, "minProperties", schema["minProperties"]))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(_error(path, "Too many", f"{len(value)}: must have at most {schema['maxProperties']} items",
                             code="maxProperties", expected=schema["maxProperties"]))
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    closed = not schema.get("x-kubernetes-preserve-unknown-fields") and (props or extra is not None) and extra is not True
    for name, v in value.items():
        sub = props[name] if name in props else (extra if isinstance(extra, dict) else None)
        if sub is not None:
            _validate(sub, v, f"{path}.{name}", old_map.get(name, MISSING), errors, mode)
        elif mode.unknown_fields and closed:
            field = f"{path}.{name}"
            errors.append(_error(field, "Invalid", f'unknown field "{field.lstrip(".")}"', code="unknown"))


def _validate_array(schema: dict, value: list, path: str, old: Any, errors: list[FieldError], mode: _Mode) -> None:
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(_error(path, "Too many", f"{len(value)}: must have at most {schema['maxItems']} items",
                             code="maxItems", expected=schema["maxItems"]))
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(_error(path, "Invalid", f"{path} in body should have at least {schema['minItems']} items",
                             value, "minItems", schema["minItems"]))
    items = schema.get("items")
    list_type = None if mode.structural_only else schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") if list_type == "map" else None
    seen: set = set()
    for i, item in enumerate(value):
        old_item: Any = MISSING
        if keys and isinstance(item, dict):
            key = tuple(_hashable(item.get(k)) for k in keys)
            if key in seen:
                errors.append(_error(f"{path}[{i}]", "Duplicate value", str(dict(zip(keys, key))), code="x-kubernetes-list-type"))
            seen.add(key)
            if isinstance(old, list):
                old_item = next((o for o in old if isinstance(o, dict) and tuple(_hashable(o.get(k)) for k in keys) == key), MISSING)
        elif list_type == "set":
            if _hashable(item) in seen:
                errors.append(_error(f"{path}[{i}]", "Duplicate value", render_value(item), code="x-kubernetes-list-type"))
            seen.add(_hashable(item))
        if isinstance(items, dict):
            _validate(items, item, f"{path}[{i}]", old_item, errors, mode)


def _hashable(value: Any) -> Any:
    return repr(value) if isinstance(value, (dict, list)) else value


def _is_datetime(text: str) -> bool:
    try:
        _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False
