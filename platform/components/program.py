"""The platform program: read and validate stack config, then register the components in order.

Order: CRDs -> JobSet / Volcano / scheduling / controller -> catalog -> tenants.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from trainyard.platform.components import kube
from trainyard.platform.components.provider import kubernetes_provider
from trainyard.platform.components.system import Crds, JobSet, Scheduling, TrainyardController, Volcano, upstream_inputs
from trainyard.platform.components.tenancy import Guardrails, RuntimeCatalog, Tenant
from trainyard.platform.problems import errors_of, warnings_of
from trainyard.platform.stack_config import NAMESPACE, StackConfig
from trainyard.platform.stack_source import read_stack_source
from trainyard.platform.stack_validation import check_stack
from trainyard.platform.components import sdk_speedups
from trainyard.runtimes import Catalog, load_catalog, render_cluster_runtimes, render_tenants_runtimes


def config_keys() -> list[str]:
    """Every `trainyard:` key of the stack, not a fixed list: an unknown (typo'd) key must be seen to be refused."""
    from pulumi.runtime import config as runtime_config

    names = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    prefix = f"{NAMESPACE}:"
    return sorted(key[len(prefix):] for key in names if key.startswith(prefix))


def read_stack_values() -> dict[str, Any]:
    """The `trainyard:` keys Pulumi resolved (stack file over project defaults), JSON-decoded."""
    cfg = pulumi.Config(NAMESPACE)
    values = {}
    for key in config_keys():
        try:
            value = cfg.get_object(key)
        except Exception:  # plain strings that are not JSON (paths, contexts)
            value = cfg.get(key)
        if value is not None:
            values[key] = value
    return values


def checked_stack(values: dict[str, Any], stack: str, catalog: Catalog) -> StackConfig:
    """Validate before anything is registered: warnings are logged, errors end the program with the
    clean message only (`pulumi.RunError`: no "unhandled exception", no traceback)."""
    file = f"stacks/Pulumi.{stack}.yaml"
    source = read_stack_source(Path(file), file)  # line numbers only; Pulumi's resolved values are the truth
    config, problems = check_stack(values, file=file, catalog=catalog, lines=source.lines)
    for problem in list(source.misspelt) + warnings_of(problems):
        pulumi.log.warn(str(problem))
    errors = errors_of(problems)
    if errors:
        count = len(errors)
        raise pulumi.RunError(f"{count} problem{'s' if count != 1 else ''} in the stack configuration "
                              "(`trainyard platform validate --stack " + stack + "` shows the same offline):\n"
                              + "\n".join(str(p) for p in errors))
    return config


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
    guardrails = Guardrails("guardrails", config.controller.namespace, opts=after(crds))
    ready = [crds, jobset, volcano, scheduling, controller]
    catalog_component = RuntimeCatalog("catalog", render_cluster_runtimes(catalog), catalog.current.version,
                                       opts=after(*ready))
    tenants = {}
    runtimes = render_tenants_runtimes(catalog, [tenant.as_catalog_tenant() for tenant in config.tenants])
    for tenant in config.tenants:
        tenants[tenant.name] = Tenant(
            tenant.name, tenant, config.policies, runtimes[tenant.name],
            guardrails, scheduling.parent_queues.get(tenant.queue.parent or ""), opts=after(*ready, guardrails))
    return {"crds": crds, "jobset": jobset, "volcano": volcano, "scheduling": scheduling, "controller": controller,
            "guardrails": guardrails, "catalog": catalog_component, "tenants": tenants}


def main() -> None:
    """Entry point of __main__.py: validation errors surface before any resource is registered."""
    sdk_speedups.install()
    catalog = load_catalog()
    config = checked_stack(read_stack_values(), pulumi.get_stack(), catalog)
    build(config, catalog, upstream_inputs(config), kubernetes_provider(config))
    pulumi.export("catalogVersion", catalog.current.version)
    pulumi.export("tenants", {t.name: {"namespace": t.namespace, "queue": t.queue.name,
                                       "catalogVersion": t.catalog_version} for t in config.tenants})
    pulumi.export("controllersRunLocally", config.controllers_run_locally)
