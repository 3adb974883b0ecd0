"""Tenants as the Pulumi stacks declare them (``stacks/Pulumi.<env>.yaml``), as the runtime catalog sees them.

The catalog needs only where each tenant's runtimes go (``CatalogTenant``: name, namespace, pinned
release, queue, default priority class), so it fails only on problems in those keys and the shape of
``trainyard:tenants``; everything else is ``trainyard platform validate``'s to report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from trainyard.platform.stack_config import NAMESPACE, parse_stack_config, stack_values
from trainyard.platform.stack_source import read_stack_source
from trainyard.runtimes.model import CatalogError, CatalogTenant, Finding

TENANTS_KEY = f"{NAMESPACE}:tenants"
STACK_GLOB = "Pulumi.*.yaml"
_LIST_OR_ENTRY = re.compile(rf"{re.escape(TENANTS_KEY)}(\[[^\]]*\])?")
"""Problems of the list itself or of a whole entry (not a list, an entry not a mapping): no tenant to read."""


def _catalog_tenants(values: Mapping[str, Any], file: str) -> list[CatalogTenant]:
    config, problems = parse_stack_config(values, file=file)
    findings = [Finding(f"{p.field} {p.message}", file=file, fix=p.fix) for p in problems
                if _LIST_OR_ENTRY.fullmatch(p.field)]
    tenants = []
    for tenant in config.tenants:
        missing = [key for key, value in (("name", tenant.name), ("namespace", tenant.namespace),
                                          ("catalogVersion", tenant.catalog_version), ("queue.name", tenant.queue.name))
                   if not value]
        if missing:
            findings.append(Finding(f"{TENANTS_KEY}[{tenant.name or '?'}] lacks {', '.join(missing)}", file=file,
                                    fix="add the missing keys"))
        else:
            tenants.append(tenant.as_catalog_tenant())
    if findings:
        raise CatalogError(*findings)
    return tenants


def tenants_from_stack_config(document: Any, *, file: str = "stack") -> list[CatalogTenant]:
    """A parsed stack file -> its tenants (none when the key is absent)."""
    return _catalog_tenants(stack_values(document), file)


def stack_name(path: Path) -> str:
    """``Pulumi.local.yaml`` -> ``local``."""
    return path.name[len("Pulumi.") : -len(".yaml")]


def load_stack_tenants(stacks_dir: Path | str) -> dict[str, list[CatalogTenant]]:
    """Thin loader: every stack file in a directory -> {stack name: tenants}."""
    result: dict[str, list[CatalogTenant]] = {}
    for path in sorted(Path(stacks_dir).glob(STACK_GLOB)):
        source = read_stack_source(path)
        if source.problem:
            raise CatalogError(Finding(source.problem.message, file=str(path), fix=source.problem.fix))
        result[stack_name(path)] = _catalog_tenants(source.values, str(path))
    return result
