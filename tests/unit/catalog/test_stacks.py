"""Tenants from Pulumi stack files (``config: {trainyard:tenants: [...]}``)."""

from __future__ import annotations

import pytest

from catalog_builders import SHIPPED
from trainyard.runtimes.model import CatalogTenant as Tenant
from trainyard.runtimes.model import CatalogError
from trainyard.platform.catalog_tenants import load_stack_tenants, tenants_from_stack_config


@pytest.mark.parametrize(
    "document, want",
    [
        (
            {"config": {"trainyard:tenants": [{"name": "a", "namespace": "ns-a", "catalogVersion": "1.1.0", "queue": {"name": "q", "weight": 2}, "defaultPriorityClass": "p", "quota": {}}]}},
            [Tenant("a", "ns-a", "1.1.0", "q", "p")],
        ),
        ({"config": {"trainyard:tenants": [{"name": "a", "namespace": "ns-a", "catalogVersion": "1.1.0", "queue": {"name": "q"}}]}}, [Tenant("a", "ns-a", "1.1.0", "q", None)]),
        ({"config": {"kubernetes:context": "kind"}}, []),
        (None, []),
    ],
    ids=["full tenant", "no priority class", "no tenants key", "empty file"],
)
def test_tenants_from_stack_config(document, want):
    assert tenants_from_stack_config(document) == want


@pytest.mark.parametrize(
    "tenants, want",
    [
        ([{"name": "a", "namespace": "n", "queue": {"name": "q"}}], "lacks catalogVersion"),
        ([{"name": "a", "namespace": "n", "catalogVersion": "1.1.0", "queue": "q"}], "lacks queue.name"),
        ({"a": 1}, "must be a list"),
    ],
    ids=["no version", "queue not a mapping", "not a list"],
)
def test_bad_tenants_are_reported_with_the_file(tenants, want):
    with pytest.raises(CatalogError, match=want) as caught:
        tenants_from_stack_config({"config": {"trainyard:tenants": tenants}}, file="stacks/Pulumi.x.yaml")
    assert "stacks/Pulumi.x.yaml" in str(caught.value)


def test_shipped_local_stack_pins_current_and_deprecated_releases():
    stacks = load_stack_tenants(SHIPPED.parent / "stacks")
    versions = {t.name: t.catalog_version for t in stacks["local"]}
    assert versions["team-a"] == "1.2.0" and versions["team-b"] == "1.0.0"


def test_catalog_reads_the_shipped_stacks_as_the_platform_program_does():
    """One parser: the catalog's tenants are the platform model's tenants, seen through `as_catalog_tenant`."""
    from trainyard.platform.stack_config import parse_stack_config
    from trainyard.platform.stack_source import read_stack_source

    for stack, tenants in load_stack_tenants(SHIPPED.parent / "stacks").items():
        path = SHIPPED.parent / "stacks" / f"Pulumi.{stack}.yaml"
        config, _ = parse_stack_config(read_stack_source(path).values, file=str(path))
        assert tenants == [t.as_catalog_tenant() for t in config.tenants], stack


def test_namespace_defaults_to_the_tenant_name_as_on_the_platform():
    document = {"config": {"trainyard:tenants": [{"name": "a", "catalogVersion": "1.1.0", "queue": {"name": "q"}}]}}
    assert tenants_from_stack_config(document) == [Tenant("a", "a", "1.1.0", "q", None)]
