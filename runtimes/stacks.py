"""Tenants as the Pulumi stacks declare them (``stacks/Pulumi.<env>.yaml``).

Format assumed (config key ``trainyard:tenants``)::

    config:
      trainyard:tenants:
        - name: team-a
          namespace: team-a
          catalogVersion: 1.1.0
          queue: {name: team-a, ...}
          defaultPriorityClass: training-default   # optional
          ...                                        # other keys are ignored here
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from trainyard.runtimes.model import CatalogError, Finding, Tenant

TENANTS_KEY = "trainyard:tenants"
STACK_GLOB = "Pulumi.*.yaml"


def tenants_from_stack_config(document: Any, *, file: str = "stack") -> list[Tenant]:
    """A parsed stack file -> its tenants (none when the key is absent)."""
    config = (document or {}).get("config") or {} if isinstance(document, dict) else {}
    entries = config.get(TENANTS_KEY) or []
    if not isinstance(entries, list):
        raise CatalogError(Finding(f"{TENANTS_KEY} must be a list of tenants", file=file, fix="write a YAML list"))
    tenants, findings = [], []
    for index, entry in enumerate(entries):
        where = f"{TENANTS_KEY}[{index}]"
        if not isinstance(entry, dict):
            findings.append(Finding(f"{where} must be a mapping", file=file, fix="write name/namespace/catalogVersion/queue"))
            continue
        queue = entry.get("queue")
        queue_name = queue.get("name") if isinstance(queue, dict) else None
        missing = [key for key in ("name", "namespace", "catalogVersion") if not entry.get(key)]
        if not queue_name:
            missing.append("queue.name")
        if missing:
            findings.append(
                Finding(f"{where} ({entry.get('name', '?')}) lacks {', '.join(missing)}", file=file, fix="add the missing keys")
            )
            continue
        tenants.append(
            Tenant(
                name=str(entry["name"]),
                namespace=str(entry["namespace"]),
                catalog_version=str(entry["catalogVersion"]),
                queue=str(queue_name),
                priority_class=entry.get("defaultPriorityClass") or None,
            )
        )
    if findings:
        raise CatalogError(*findings)
    return tenants


def stack_name(path: Path) -> str:
    """``Pulumi.local.yaml`` -> ``local``."""
    return path.name[len("Pulumi.") : -len(".yaml")]


def load_stack_tenants(stacks_dir: Path | str) -> dict[str, list[Tenant]]:
    """Thin loader: every stack file in a directory -> {stack name: tenants}."""
    result: dict[str, list[Tenant]] = {}
    for path in sorted(Path(stacks_dir).glob(STACK_GLOB)):
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            raise CatalogError(Finding(f"invalid YAML: {err}", file=str(path), fix="correct the YAML syntax")) from None
        result[stack_name(path)] = tenants_from_stack_config(document, file=str(path))
    return result


def pins_of(version: str, stacks: Mapping[str, list[Tenant]]) -> list[tuple[str, Tenant]]:
    """(stack, tenant) pairs whose tenant pins ``version``."""
    return [(stack, tenant) for stack, tenants in sorted(stacks.items()) for tenant in tenants if tenant.catalog_version == version]
