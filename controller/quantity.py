"""Kubernetes resource quantities as exact fractions (for PodGroup minResources and CPU counts)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from kubernetes.utils import parse_quantity as k8s_parse_quantity

from .errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
                    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
"""The CRD's (and apimachinery's) quantity grammar: what the API server accepts, nothing more."""
_GRAMMAR = re.compile(QUANTITY_PATTERN)
MAX_EXPONENT = 36
"""Beyond any real resource; bounds the exact arithmetic ('1e999999999' would take forever)."""
_HINT = "use a number or a string such as '4', '500m', '16Gi' (binary) or '16G' (decimal)"


def parse_quantity(value: object, field: str = "quantity") -> Fraction:
    """Parse '500m', '16Gi', 2, '1e3' into an exact number as the API server does; raise InputError naming
    `field` otherwise. The arithmetic is the `kubernetes` client's parser; the grammar check in front of
    it refuses what that parser is lenient about ('1K', '1_000', 'NaN', ' 2 ')."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"invalid quantity {value!r}; {_HINT}", field)
    text = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    if not _GRAMMAR.match(text):
        raise InputError(f"invalid quantity {value!r}: not in the Kubernetes quantity grammar (the API server "
                         f"refuses it); {_HINT}", field)
    try:
        amount = k8s_parse_quantity(text)
    except (ValueError, ArithmeticError):
        amount = None
    if amount is None or not amount.is_finite() or abs(amount.adjusted()) > MAX_EXPONENT:
        raise InputError(f"invalid quantity {value!r}: out of range (at most 10^{MAX_EXPONENT}); {_HINT}", field)
    return Fraction(amount)


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
