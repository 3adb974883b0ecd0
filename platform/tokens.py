"""Pulumi type tokens of trainyard's component resources (`trainyard:<module>:<Kind>`)."""

from __future__ import annotations

import re

PACKAGE = "trainyard"
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def type_token(module: str, kind: str) -> str:
    """E.g. type_token("platform", "Tenant") -> "trainyard:platform:Tenant"."""
    if not _KIND.match(kind):
        raise ValueError(f"component kind {kind!r} must be UpperCamelCase")
    return f"{PACKAGE}:{module}:{kind}"
