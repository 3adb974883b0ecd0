"""The versioned catalog of training runtimes.

Platform engineers review and release runtimes as immutable, diffable catalog
releases; tenants pin a release and move when ready. Sources live in
``releases/<version>/`` (Jinja2 YAML, one runtime per file, plus ``values.yaml``),
release metadata in ``catalog.yaml`` and the frozen content hashes in
``catalog.lock.json``. Everything here is pure (plain data in, plain dicts out)
except ``store`` and ``stacks.load_stack_tenants``, which read and write files.

The platform program calls ``load_catalog`` once, then
``render_cluster_runtimes`` and ``render_tenant_runtimes``.
"""

from trainyard.runtimes.model import Catalog, CatalogError, Finding, Release
from trainyard.runtimes.publish import (
    render_cluster_runtimes,
    render_release_runtimes,
    render_tenant_runtimes,
)
from trainyard.runtimes.stacks import load_stack_tenants, tenants_from_stack_config
from trainyard.runtimes.store import default_catalog_dir, load_catalog

__all__ = [
    "Catalog",
    "CatalogError",
    "Finding",
    "Release",
    "default_catalog_dir",
    "load_catalog",
    "load_stack_tenants",
    "render_cluster_runtimes",
    "render_release_runtimes",
    "render_tenant_runtimes",
    "tenants_from_stack_config",
]
