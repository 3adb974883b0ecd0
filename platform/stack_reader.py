"""Strict, typed access to nested stack config that records problems instead of raising.

Strict like `kubectl --validate=strict`: a key the program does not read is an error with a
"did you mean", because a silently ignored key (`tenant:` for `tenants:`) can make `pulumi up`
delete what the operator meant to keep.
"""

from __future__ import annotations

import difflib
from fractions import Fraction
from typing import Any, Iterable, Mapping, Sequence

from trainyard.platform.problems import ConfigProblem
from trainyard.queues.resources import GPU, quantity

KNOWN_RESOURCES = ("cpu", "memory", GPU, "ephemeral-storage")
WHOLE_RESOURCES = (GPU,)
"""Extended resources are counted in whole units (the API server refuses 0.5 GPUs)."""


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """A fix text pointing at the closest known key, else listing them all."""
    known = list(known)
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    if not close:  # case slips and partial names: `gpuproduct`, `deny` for `defaultDeny`
        low = str(key).lower()
        close = [k for k in known if low and (k.lower() == low or low in k.lower() or k.lower() in low)]
    listing = ", ".join(known)
    return f"did you mean {close[0]!r}? (known: {listing})" if close else f"remove it; known keys: {listing}"


def entry_labels(entries: Sequence[Any]) -> list[str]:
    """How list entries are named in field paths: by `name` when it is a unique plain string, else by index."""
    names = [e.get("name") if isinstance(e, dict) else None for e in entries]
    usable = [n if isinstance(n, str) and n and not any(c in n for c in "[]") and names.count(n) == 1 else None
              for n in names]
    return [name if name else str(index) for index, name in enumerate(usable)]


class Reader:
    """Typed access to nested config; every problem names file, path and fix."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[ConfigProblem] = []

    def problem(self, path: str, message: str, fix: str) -> None:
        self.problems.append(ConfigProblem(self.file, path, message, fix))

    def unknown_keys(self, data: Mapping[str, Any], path: str, known: Sequence[str], sep: str = ".") -> None:
        for key in data:
            if key not in known:
                self.problem(f"{path}{sep}{key}", "unknown key (it would be ignored)", did_you_mean(key, known))

    def mapping(self, value: Any, path: str, known: Sequence[str] | None = None, required: bool = False) -> dict:
        if value is None:
            if required:
                self.problem(path, "is missing", f"add {path.rsplit('.', 1)[-1]}: {{...}}")
            return {}
        if not isinstance(value, dict):
            self.problem(path, f"must be a mapping, got {type(value).__name__}", "write key: value pairs")
            return {}
        if known is not None:
            self.unknown_keys(value, path, known)
        return value

    def listing(self, value: Any, path: str) -> list:
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(path, f"must be a list, got {type(value).__name__}", "write a YAML list")
            return []
        return value

    def scalar(self, data: dict, key: str, path: str, kind: type | tuple, default: Any = None,
               required: bool = False, minimum: int | None = None) -> Any:
        """A typed value; `minimum` bounds integers (counts, weights)."""
        value = data.get(key)
        if value is None:
            if required:
                self.problem(f"{path}.{key}", "is missing", f"set {key}")
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            wanted = "number" if float in kinds else _kind_name(kinds[0])
            self.problem(f"{path}.{key}", f"must be {wanted}, got {value!r}", f"write a {wanted}")
            return default
        if minimum is not None and isinstance(value, int) and not isinstance(value, bool) and value < minimum:
            self.problem(f"{path}.{key}", f"{value} is below {minimum}", f"use {minimum} or more")
            return default
        return value

    def amount(self, data: dict, key: str, path: str, *, positive: bool, whole: bool = False,
               required: bool = False, default: Any = None) -> Any:
        """A Kubernetes quantity: valid, not negative, and above zero when `positive` (zero where it makes sense)."""
        value = data.get(key)
        if value is None:
            if required:
                self.problem(f"{path}.{key}", "is missing", f"set {key}")
            return default
        return value if self.check_amount(value, f"{path}.{key}", positive=positive, whole=whole) else default

    def check_amount(self, value: Any, path: str, *, positive: bool, whole: bool = False) -> bool:
        amount = None if isinstance(value, bool) or not isinstance(value, (int, float, str)) else quantity(value)
        if amount is None:
            self.problem(path, f"{value!r} is not a Kubernetes quantity", "write e.g. 16, '500m' or '512Gi'")
            return False
        if amount < 0 or (positive and amount == 0):
            self.problem(path, f"{value!r} must be {'above' if positive else 'at least'} zero",
                         "write the real amount, e.g. 16, '500m' or '512Gi'")
            return False
        if whole and amount.denominator != 1:
            self.problem(path, f"{value!r} is not a whole number", "extended resources such as GPUs come in whole units")
            return False
        return True

    def resources(self, data: dict, key: str, path: str) -> dict[str, object]:
        """A resource list (cpu, memory, nvidia.com/gpu, ...): known names, valid non-negative quantities."""
        raw = self.mapping(data.get(key), f"{path}.{key}")
        good = {}
        for name, value in raw.items():
            where = f"{path}.{key}[{name}]"
            if name not in KNOWN_RESOURCES:
                self.problem(where, f"unknown resource name {name!r}", did_you_mean(name, KNOWN_RESOURCES))
            elif self.check_amount(value, where, positive=False, whole=name in WHOLE_RESOURCES):
                good[str(name)] = value
        return good

    def names(self, data: dict, key: str, path: str) -> tuple[str, ...]:
        items = self.listing(data.get(key), f"{path}.{key}")
        if not all(isinstance(item, str) for item in items):
            self.problem(f"{path}.{key}", "must be a list of names", "write names as strings")
            return ()
        for index, item in enumerate(items):
            if not item.strip() or item != item.strip():
                self.problem(f"{path}.{key}[{index}]", f"{item!r} is not a usable name (empty or padded with spaces)",
                             "write the name without surrounding spaces, or remove the entry")
            elif items.index(item) != index:
                self.problem(f"{path}.{key}[{index}]", f"{item!r} is listed twice", "remove the duplicate")
        return tuple(items)


def _kind_name(kind: type) -> str:
    return {int: "int", str: "str", bool: "bool", float: "number"}.get(kind, kind.__name__)


def total(values: Iterable[object]) -> Fraction:
    """Sum of quantities that parse (bad ones are reported where they are read)."""
    return sum((q for q in (quantity(v) for v in values) if q is not None), Fraction(0))
