"""The platform program: read and validate stack config, then register the components in order.

Order: CRDs -> JobSet / Volcano / scheduling / controller -> catalog -> tenants.
"""

from __future__ import annotations

from typing import Any

import pulumi

from trainyard.platform.components import kube
from trainyard.platform.components.provider import kubernetes_provider
from trainyard.platform.components.system import Crds, JobSet, Scheduling, TrainyardController, Volcano, upstream_inputs
from trainyard.platform.components.tenancy import Guardrails, RuntimeCatalog, Tenant
from trainyard.platform.stack_config import NAMESPACE, StackConfig
from trainyard.platform.stack_validation import load_stack
from trainyard.runtimes import Catalog, load_catalog, render_cluster_runtimes, render_tenant_runtimes

CONFIG_KEYS = ("kubeconfig", "kubeContext", "controllersRunLocally", "adoptExistingObjects", "cluster", "topology",
               "scheduler", "priorityClasses", "queues", "controller", "upstream", "policies", "tenants")


def read_stack_values() -> dict[str, Any]:
    """The `trainyard:` keys Pulumi resolved (stack file over project defaults), JSON-decoded."""
    cfg = pulumi.Config(NAMESPACE)
    values = {}
    for key in CONFIG_KEYS:
        try:
            value = cfg.get_object(key)
        except Exception:  # plain strings that are not JSON (paths, contexts)
            value = cfg.get(key)
        if value is not None:
            values[key] = value
    return values


def build(config: StackConfig, catalog: Catalog, inputs: dict, provider: pulumi.ProviderResource | None = None) -> dict:
    """Register everything under the stack's explicit provider; returns the components (tests inspect them)."""
    providers = [provider] if provider else None
    kube.adopt_existing_objects(config.adopt_existing_objects)

    def after(*deps: pulumi.Resource) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(providers=providers, depends_on=list(deps))

    crds = Crds("crds", config, inputs["crds"], opts=after())
    jobset = JobSet("jobset", config, inputs["jobset_chart"], opts=after(crds))
    volcano = Volcano("volcano", config, inputs["volcano_policies"], inputs["volcano_chart"], opts=after(crds))
    scheduling = Scheduling("scheduling", config, opts=after(crds, volcano))
    controller = TrainyardController("controller", config, opts=after(crds))
    guardrails = Guardrails("guardrails", opts=after(crds))
    ready = [crds, jobset, volcano, scheduling, controller]
    catalog_component = RuntimeCatalog("catalog", render_cluster_runtimes(catalog), catalog.current.version,
                                       opts=after(*ready))
    tenants = {}
    for tenant in config.tenants:
        tenants[tenant.name] = Tenant(
            tenant.name, tenant, config.policies, render_tenant_runtimes(catalog, tenant.as_catalog_tenant()),
            guardrails, scheduling.parent_queues.get(tenant.queue.parent or ""), opts=after(*ready, guardrails))
    return {"crds": crds, "jobset": jobset, "volcano": volcano, "scheduling": scheduling, "controller": controller,
            "guardrails": guardrails, "catalog": catalog_component, "tenants": tenants}


def main() -> None:
    """Entry point of __main__.py: validation errors surface before any resource is registered."""
    catalog = load_catalog()
    config = load_stack(read_stack_values(), file=f"stacks/Pulumi.{pulumi.get_stack()}.yaml", catalog=catalog)
    build(config, catalog, upstream_inputs(config), kubernetes_provider(config))
    pulumi.export("catalogVersion", catalog.current.version)
    pulumi.export("tenants", {t.name: {"namespace": t.namespace, "queue": t.queue.name,
                                       "catalogVersion": t.catalog_version} for t in config.tenants})
    pulumi.export("controllersRunLocally", config.controllers_run_locally)
