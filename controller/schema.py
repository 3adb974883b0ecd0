"""Builders for the controller's OpenAPI v3 schemas; validating, defaulting and pruning is `trainyard.openapi`.

The CRDs in `crds.py` and the checks in `admission.py` come from the SAME schema objects, so a rule
cannot be published in the CRD and forgotten by `trainyard validate` (or the reverse). CEL rules are
`Rule` objects carrying the CEL text for the CRD and an equivalent Python predicate for us.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from trainyard.openapi import Rule, apply_defaults, prune, to_openapi, validate
from trainyard.problems import MISSING as _MISSING
from trainyard.problems import FieldError

__all__ = ["DNS1035", "DNS1123_LABEL", "FieldError", "Rule", "apply_defaults", "array", "boolean", "free_object", "immutable",
           "int_or_string", "integer", "obj", "prune", "string", "string_map", "to_openapi", "validate", "_MISSING"]


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


def preserve_unknown() -> dict[str, Any]:
    """`x-kubernetes-preserve-unknown-fields: true`: the API server keeps fields the schema does not list."""
    return {"x-kubernetes-preserve-unknown-fields": True}


def list_type(kind: str) -> dict[str, Any]:
    """`x-kubernetes-list-type` (atomic, set) of an array."""
    return {"x-kubernetes-list-type": kind}


def list_map(*keys: str) -> dict[str, Any]:
    """An array merged by `keys` (`x-kubernetes-list-type: map`)."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def atomic_map() -> dict[str, Any]:
    """`x-kubernetes-map-type: atomic`: the object is replaced whole on apply."""
    return {"x-kubernetes-map-type": "atomic"}


# ---- helpers for writing Rule predicates ---------------------------------------------------------

def immutable(message: str = "field is immutable") -> Rule:
    return Rule("self == oldSelf", message, lambda new, old: new == old, transition=True)


DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
