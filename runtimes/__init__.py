"""The versioned catalog of training runtimes.

Platform engineers review and release runtimes as immutable, diffable catalog
releases; tenants pin a release and move when ready. Sources live in
``releases/<version>/`` (Jinja2 YAML, one runtime per file, plus ``values.yaml``),
release metadata in ``catalog.yaml`` and the frozen content hashes in
``catalog.lock.json``. Everything here is pure (plain data in, plain dicts out)
except ``store``, which reads and writes files. Tenants come in as ``CatalogTenant``
(the platform reads them from the stacks: ``trainyard.platform.catalog_tenants``).

The platform program calls ``load_catalog`` once, then
``render_cluster_runtimes`` and ``render_tenants_runtimes`` (``render_tenant_runtimes`` for one).
"""

from trainyard.runtimes.model import Catalog, CatalogError, CatalogTenant, Finding, Release
from trainyard.runtimes.publish import (
    render_cluster_runtimes,
    render_release_runtimes,
    render_tenant_runtimes,
    render_tenants_runtimes,
)
from trainyard.runtimes.store import default_catalog_dir, load_catalog

__all__ = [
    "Catalog",
    "CatalogError",
    "CatalogTenant",
    "Finding",
    "Release",
    "default_catalog_dir",
    "load_catalog",
    "render_cluster_runtimes",
    "render_release_runtimes",
    "render_tenant_runtimes",
    "render_tenants_runtimes",
]
