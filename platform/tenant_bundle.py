"""One tenant's onboarding as a list of plain objects, and the objects every tenant shares: what
`platform/components/tenancy.py` registers through Pulumi, for tools that apply them directly (the fit
agreement benchmark, integration tests). The NetworkPolicy and the runtime catalog are left out."""

from __future__ import annotations

from trainyard.platform import tenant_objects as objs
from trainyard.platform.gpu_pod_routing import render_gpu_pod_routing_binding, render_gpu_pod_routing_policy
from trainyard.platform.node_loss_toleration import render_node_loss_binding, render_node_loss_policy
from trainyard.platform.pod_defaults import render_pod_defaults_binding, render_pod_defaults_policy
from trainyard.platform.queue_guard import render_queue_guard_binding, render_queue_guard_policy
from trainyard.platform.stack_config import PolicySpec, TenantSpec
from trainyard.platform.tenant_rbac import render_tenant_rbac, runtime_reader_cluster_role


def tenant_bundle(spec: TenantSpec, policies: PolicySpec = PolicySpec(pod_security="baseline")) -> list[dict]:
    return [objs.render_namespace(spec, policies), objs.render_resource_quota(spec, policies), *objs.render_priority_quotas(spec),
            objs.render_limit_range(spec), *render_tenant_rbac(spec), objs.render_tenant_queue(spec),
            render_queue_guard_binding(spec), render_gpu_pod_routing_binding(spec), render_pod_defaults_binding(spec),
            render_node_loss_binding(spec)]


def shared_bundle() -> list[dict]:
    return [render_queue_guard_policy(), render_gpu_pod_routing_policy(), render_pod_defaults_policy(),
            render_node_loss_policy(), runtime_reader_cluster_role()]
