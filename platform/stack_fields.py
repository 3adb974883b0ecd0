"""The stack model's dataclass fields are the stack's keys: each key's name, type and default live on one field.

A field is read from the camelCase of its name (`gpus_per_node` -> `gpusPerNode`); metadata `stack_key("queues")`
(`trainyard.field_markers`) renames it and `DERIVED` marks a value the program fills in itself (ports, the file name) that no stack sets.
The parser (`Section`), the unknown-key checks and the Pulumi.yaml test all read the fields, so adding a key to
the model is the whole change.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from trainyard.field_markers import STACK_KEY
from trainyard.platform.stack_reader import Reader

SCALAR_TYPES = (str, int, float, bool)
_UNSET = object()


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@functools.cache
def stack_fields(cls: type) -> dict[str, dataclasses.Field]:
    """{stack key: field} of a model class, in declaration order (derived fields left out)."""
    out = {}
    for f in dataclasses.fields(cls):
        key = f.metadata.get(STACK_KEY, camel_case(f.name))
        if key:
            out[key] = f
    return out


def stack_keys(cls: type) -> tuple[str, ...]:
    return tuple(stack_fields(cls))


def has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def default_of(cls: type, key: str) -> Any:
    """The model's default for a key (None when the key has none: it is required)."""
    f = stack_fields(cls)[key]
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


@functools.cache
def value_types(cls: type, key: str) -> tuple[type, ...]:
    """The types a key's annotation allows, None left out (`str | None` -> (str,))."""
    hint = typing.get_type_hints(cls)[stack_fields(cls)[key].name]
    union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    return tuple(t for t in (typing.get_args(hint) if union else (hint,)) if t is not type(None))


def is_scalar(cls: type, key: str) -> bool:
    kinds = value_types(cls, key)
    return bool(kinds) and all(kind in SCALAR_TYPES for kind in kinds)


class Section:
    """One mapping of the stack read as one model class; unknown keys, types and defaults come from its fields.

    A key without a default is required. With `empty_ok` an empty mapping stands for "not given": its
    absence is reported once by whoever requires the mapping, not once per missing key.
    """

    def __init__(self, r: Reader, cls: type, value: Any, path: str, *, required: bool = False, empty_ok: bool = False):
        self.r, self.cls, self.path = r, cls, path
        self.data = r.mapping(value, path, stack_keys(cls), required=required)
        self.requires_keys = bool(self.data) or not empty_ok

    def _rules(self, key: str, required: bool | None, default: Any) -> tuple[bool, Any]:
        f = stack_fields(self.cls)[key]
        required = self.requires_keys and not has_default(f) if required is None else required
        if default is _UNSET:
            default = default_of(self.cls, key) if has_default(f) else _zero(value_types(self.cls, key))
        return required, default

    def scalar(self, key: str, *, kinds: tuple[type, ...] | None = None, required: bool | None = None,
               minimum: int | None = None, default: Any = _UNSET) -> Any:
        required, default = self._rules(key, required, default)
        allowed = kinds or value_types(self.cls, key)
        if allowed == (float,):
            allowed = (int, float)  # YAML writes 1.0 as 1 too
        value = self.r.scalar(self.data, key, self.path, allowed, default=default, required=required, minimum=minimum)
        return float(value) if value_types(self.cls, key) == (float,) and value is not None else value

    def amount(self, key: str, *, positive: bool, default: Any = _UNSET) -> Any:
        required, default = self._rules(key, None, default)
        return self.r.amount(self.data, key, self.path, positive=positive, required=required, default=default)

    def scalars(self, *keys: str) -> dict[str, Any]:
        """Field name -> value for `keys` (every scalar key when none are named), with the model's rules."""
        chosen = keys or [key for key in stack_fields(self.cls) if is_scalar(self.cls, key)]
        return {stack_fields(self.cls)[key].name: self.scalar(key) for key in chosen}

    def names(self, key: str) -> tuple[str, ...]:
        return self.r.names(self.data, key, self.path)

    def resources(self, key: str) -> dict[str, object]:
        return self.r.resources(self.data, key, self.path)

    def child(self, key: str, cls: type, *, required: bool = False, empty_ok: bool = False) -> "Section":
        return Section(self.r, cls, self.data.get(key), f"{self.path}.{key}", required=required, empty_ok=empty_ok)


def _zero(kinds: tuple[type, ...]) -> Any:
    """What a missing required value reads as, so the model can still be built while the problem is reported."""
    return {str: "", int: 0, float: 0.0, bool: False}.get(kinds[0] if kinds else str, None)
