"""Tenancy components: shared guardrails, the runtime catalog and one Tenant per stack entry."""

from __future__ import annotations

from typing import Any

import pulumi

from trainyard.platform import tenant_objects as objs
from trainyard.platform.components.kube import child, register, with_quota_await
from trainyard.platform.gpu_pod_routing import render_gpu_pod_routing_binding, render_gpu_pod_routing_policy
from trainyard.platform.node_loss_toleration import render_node_loss_binding, render_node_loss_policy
from trainyard.platform.pod_defaults import render_pod_defaults_binding, render_pod_defaults_policy
from trainyard.platform.queue_guard import controller_username, render_queue_guard_binding, render_queue_guard_policy
from trainyard.platform.stack_config import PolicySpec, TenantSpec
from trainyard.platform.tenant_rbac import render_tenant_rbac, runtime_reader_cluster_role
from trainyard.platform.tokens import type_token


# A changed runtime is replaced, not updated in place: pulumi-kubernetes 4.25 sends an empty policy
# object such as `mlPolicy.torch: {}` as null on update, which the CRD rightly rejects. Replacing keeps every
# TrainJob's work: each builds from its own runtime snapshot, never from the live runtime; only while a runtime is
# deleted and not yet created again does the TrainJob webhook refuse a create, suspend or resume naming it.
RUNTIME_UPDATE: dict[str, Any] = {"replace_on_changes": ["spec"], "delete_before_replace": True}


class Guardrails(pulumi.ComponentResource):
    """Objects every tenant shares: the queue-guard, GPU-pod routing, pod-defaults and node-loss toleration
    policies, the runtime-reader ClusterRole."""

    def __init__(self, name: str, controller_namespace: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_token("tenants", "Guardrails"), name, None, opts)
        self.queue_guard = register(render_queue_guard_policy(controller_username(controller_namespace)), child(self))
        self.gpu_pod_routing = register(render_gpu_pod_routing_policy(), child(self))
        self.pod_defaults = register(render_pod_defaults_policy(), child(self))
        self.node_loss = register(render_node_loss_policy(), child(self))
        self.runtime_reader = register(runtime_reader_cluster_role(), child(self))
        self.register_outputs({})


class RuntimeCatalog(pulumi.ComponentResource):
    """ClusterTrainingRuntimes of the current catalog release (names stable across releases)."""

    def __init__(self, name: str, runtimes: list[dict], version: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_token("catalog", "RuntimeCatalog"), name, None, opts)
        for runtime in runtimes:
            register(runtime, child(self, **RUNTIME_UPDATE))
        self.register_outputs({"version": version, "runtimes": [r["metadata"]["name"] for r in runtimes]})


class Tenant(pulumi.ComponentResource):
    """One team: namespace, quotas, LimitRange, RBAC, Volcano queue, queue guard, GPU-pod routing, pod default
    limits, node-loss toleration, runtimes, optional NetworkPolicy.

    Namespaced objects depend on the Namespace; the queue on its parent queue; the guard and routing bindings
    on the shared policies (the routing binding also on the queue its pods are sent to). `opts.depends_on` (the controller and CRDs) makes `destroy` remove tenants first,
    while the controllers can still finalize users' objects.
    """

    def __init__(self, name: str, tenant: TenantSpec, policies: PolicySpec, runtimes: list[dict],
                 guardrails: Guardrails, parent_queue: pulumi.Resource | None = None,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(type_token("tenants", "Tenant"), name, None, opts)
        namespace = register(objs.render_namespace(tenant, policies), child(self))
        inside = child(self, [namespace])
        self.quota = register(with_quota_await(objs.render_resource_quota(tenant, policies)), inside)
        for quota in objs.render_priority_quotas(tenant):
            register(with_quota_await(quota), inside)
        register(objs.render_limit_range(tenant), inside)
        self.rbac = [register(obj, child(self, [namespace, guardrails.runtime_reader])) for obj in render_tenant_rbac(tenant)]
        self.queue = register(objs.render_tenant_queue(tenant), child(self, [parent_queue] if parent_queue else []))
        self.guard = register(render_queue_guard_binding(tenant), child(self, [guardrails.queue_guard, namespace]))
        self.routing = register(render_gpu_pod_routing_binding(tenant),
                                child(self, [guardrails.gpu_pod_routing, namespace, self.queue]))
        self.pod_defaults = register(render_pod_defaults_binding(tenant), child(self, [guardrails.pod_defaults, namespace]))
        register(render_node_loss_binding(tenant), child(self, [guardrails.node_loss, namespace]))
        if objs.wants_default_deny(tenant, policies):
            register(objs.render_default_deny(tenant), inside)
        for runtime in runtimes:
            register(runtime, child(self, [namespace, self.queue], deleted_with=namespace, **RUNTIME_UPDATE))
        self.register_outputs({"namespace": tenant.namespace, "queue": tenant.queue.name,
                               "catalogVersion": tenant.catalog_version})
