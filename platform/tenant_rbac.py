"""RBAC for a tenant's admin and user groups: TrainJobs in their own namespace, read-only runtimes.

Nothing here grants rights on other namespaces, on queues, quotas, priority classes or on
writing runtimes (those are the platform team's, through the stack file). No wildcards.
"""

from __future__ import annotations

from trainyard.k8s import JOBSET_GROUP, JOBSETS, PODGROUPS, VOLCANO_GROUP
from trainyard.k8s import TRAINER_GROUP
from trainyard.k8s import part_of_trainyard
from trainyard.platform.stack_config import TenantSpec
from trainyard.platform.tenant_objects import tenant_labels

RBAC = "rbac.authorization.k8s.io/v1"
READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete"]
RUNTIME_READER = "trainyard:runtime-reader"


def _observe_rules() -> list[dict]:
    """What both roles need to follow their jobs: the JobSets, PodGroups, pods and logs they produce, and the
    quota and defaults they run under (read-only, so "exceeded quota" can be checked against the limits)."""
    return [
        {"apiGroups": [TRAINER_GROUP], "resources": ["trainingruntimes"], "verbs": READ},
        {"apiGroups": [TRAINER_GROUP], "resources": ["trainjobs/status"], "verbs": ["get"]},
        {"apiGroups": [JOBSET_GROUP], "resources": [JOBSETS], "verbs": READ},
        {"apiGroups": [VOLCANO_GROUP], "resources": [PODGROUPS], "verbs": READ},
        {"apiGroups": [""], "resources": ["pods", "events"], "verbs": READ},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["resourcequotas", "limitranges"], "verbs": READ},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates", "resourceclaims"], "verbs": READ},
    ]


def user_rules() -> list[dict]:
    return [{"apiGroups": [TRAINER_GROUP], "resources": ["trainjobs"], "verbs": READ + WRITE}, *_observe_rules()]


def admin_rules() -> list[dict]:
    """Users' rights plus the namespace's credentials and config (dataset tokens, launch configs)."""
    return [
        *user_rules(),
        {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": READ + WRITE},
        # the devices its TrainJobs claim per node (resourceClaimsPerNode); the quota caps the GPUs among them
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"], "verbs": READ + WRITE},
        {"apiGroups": [RBAC.split("/")[0]], "resources": ["rolebindings"], "verbs": READ},
    ]


def _role(tenant: TenantSpec, name: str, rules: list[dict]) -> dict:
    return {"apiVersion": RBAC, "kind": "Role",
            "metadata": {"name": name, "namespace": tenant.namespace, "labels": tenant_labels(tenant)}, "rules": rules}


def _groups(names: tuple[str, ...]) -> list[dict]:
    return [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name} for name in names]


def _binding(tenant: TenantSpec, role: str, groups: tuple[str, ...]) -> dict:
    return {"apiVersion": RBAC, "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": tenant.namespace, "labels": tenant_labels(tenant)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": _groups(groups)}


def runtime_reader_cluster_role() -> dict:
    """Shared by all tenants: read ClusterTrainingRuntimes (cluster-scoped, so a ClusterRole is needed)."""
    return {"apiVersion": RBAC, "kind": "ClusterRole",
            "metadata": {"name": RUNTIME_READER, "labels": part_of_trainyard()},
            "rules": [{"apiGroups": [TRAINER_GROUP], "resources": ["clustertrainingruntimes"], "verbs": READ}]}


def render_tenant_rbac(tenant: TenantSpec) -> list[dict]:
    """Two Roles and RoleBindings in the namespace, and a per-tenant binding to the runtime reader."""
    return [
        _role(tenant, "trainyard-tenant-admin", admin_rules()),
        _role(tenant, "trainyard-tenant-user", user_rules()),
        _binding(tenant, "trainyard-tenant-admin", tenant.groups.admins),
        _binding(tenant, "trainyard-tenant-user", tenant.groups.users),
        {"apiVersion": RBAC, "kind": "ClusterRoleBinding",
         "metadata": {"name": f"trainyard:runtime-reader:{tenant.name}", "labels": tenant_labels(tenant)},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RUNTIME_READER},
         "subjects": _groups(tenant.groups.admins + tenant.groups.users)},
    ]


def wildcard_rules(obj: dict) -> list[dict]:
    """Rules of a Role/ClusterRole that use '*' anywhere (the policy pack and tests forbid them)."""
    return [rule for rule in obj.get("rules") or []
            if any("*" in (rule.get(key) or []) for key in ("apiGroups", "resources", "verbs", "resourceNames"))]
