"""Kubernetes resource quantities as exact fractions (for PodGroup minResources and CPU counts)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from .errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_PATTERN = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")


def parse_quantity(value: object, field: str = "quantity") -> Fraction:
    """Parse '500m', '16Gi', 2, '1e3' into an exact number; raise InputError naming `field` otherwise."""
    if isinstance(value, bool):
        raise InputError(f"invalid quantity {value!r}; use a number or a string such as '4', '500m', '16Gi'", field)
    if isinstance(value, (int, float)):
        return Fraction(str(value))
    match = _PATTERN.match(str(value).strip()) if isinstance(value, str) else None
    if not match:
        raise InputError(f"invalid quantity {value!r}; use a number or a string such as '4', '500m', '16Gi'", field)
    number, exponent, suffix = match.groups()
    amount = Fraction(number)
    if exponent:
        amount *= Fraction(10) ** int(exponent[1:])
    elif suffix:
        amount *= _BINARY.get(suffix) or _DECIMAL[suffix]
    return amount


def is_binary(value: object) -> bool:
    return isinstance(value, str) and value.strip()[-2:] in _BINARY


def format_quantity(amount: Fraction, binary: bool = False) -> str:
    """Canonical text: the largest suffix that keeps an integer mantissa (as apimachinery prints)."""
    if binary and amount.denominator == 1 and amount >= 1024:
        for suffix, factor in reversed(_BINARY.items()):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
        return str(amount.numerator)
    if amount == 0:
        return "0"
    # Kubernetes rounds sub-nano precision up.
    amount = Fraction(math.ceil(amount * 10**9), 10**9)
    for suffix in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
        scaled = amount / _DECIMAL[suffix]
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(amount / _DECIMAL['n'])}n"


def ceil_value(value: object, field: str = "quantity") -> int:
    """apimachinery `Quantity.Value()`: the quantity rounded up to an integer."""
    return math.ceil(parse_quantity(value, field))
