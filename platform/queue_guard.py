"""The queue guard: a ValidatingAdmissionPolicy (CEL run by the API server, no webhook process) so that
nothing in a tenant namespace can name another tenant's Volcano queue.

A PodGroup or Volcano Job that names no queue is defaulted to Volcano's `default` queue by its CRD,
which the guard refuses like any other queue. A bare pod (no controller owner) may not join a gang by
naming a PodGroup; Volcano resolves that name in the pod's own namespace, so pods of the tenant's
controllers (Jobs of its TrainJobs) can only ever join the tenant's own gangs.

The allowed queue is the namespace's `trainyard.dev/queue` label, read through `namespaceObject`,
so one policy serves every tenant; each tenant gets its own Binding scoped to its namespace.
Tenants cannot relabel their namespace (tenant RBAC has no namespace rights).

With `gpu_pod_routing.py` (which sends GPU pods to Volcano in the tenant's queue) the guard also keeps the
scheduler in charge: a GPU pod that still names another scheduler is refused, and so is `spec.nodeName` at
create, on a pod or in any pod template of a workload (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
CronJob, JobSet, Volcano Job, TrainJob), since a pod created bound skips every scheduler's fit check.

A PodGroup the TrainJob controller owns is the controller's: only its identity (or a cluster admin) may
change what scheduling reads from it (queue, priorityClassName, minMember, minResources, networkTopology);
anyone else with PodGroup rights in the namespace is refused at admission instead of being reverted later.
Its `status` is Volcano's: the controller resumes a gang's JobSet when the phase reads Inqueue, so only Volcano's
scheduler and controllers (their ServiceAccounts), the TrainJob controller or a cluster admin may change it.
Volcano's PodGroup CRD has no status subresource, so status writes are plain updates of `podgroups`.
"""

from __future__ import annotations

from trainyard import k8s as K
from trainyard.k8s import VOLCANO_QUEUE_ANNOTATION as QUEUE_ANNOTATION
from trainyard.k8s import part_of_trainyard
from trainyard.platform.gpu_pod_routing import POLICY_NAME as POLICY_NAME_ROUTING
from trainyard.platform.gpu_pod_routing import names_gpus
from trainyard.platform.stack_config import TenantSpec
from trainyard.platform.tenant_objects import QUEUE_LABEL, admission_policy_binding
from trainyard.queues.scheduler_config import CONFIGMAP_NAMESPACE as VOLCANO_NAMESPACE

POLICY_NAME = "trainyard-queue-guard"
API = "admissionregistration.k8s.io/v1"

GUARDED_RESOURCES = (
    ("", "v1", "pods"),
    (K.VOLCANO_GROUP, K.VOLCANO_VERSION, K.PODGROUPS),
    (K.TRAINER_GROUP, "*", K.TRAINJOBS),
    (K.JOBSET_GROUP, K.JOBSET_VERSION, K.JOBSETS),
    (K.VOLCANO_BATCH_GROUP, "v1alpha1", "jobs"),
    ("apps", "v1", "deployments"), ("apps", "v1", "replicasets"), ("apps", "v1", "statefulsets"),
    ("apps", "v1", "daemonsets"), ("batch", "v1", "jobs"), ("batch", "v1", "cronjobs"),
)
GROUP_NAME = K.VOLCANO_GROUP_ANNOTATION


def _annotation_ok(annotations_expr: str) -> str:
    """True when the annotation map names no queue, or the namespace's own queue."""
    return f"{annotations_expr}[?'{QUEUE_ANNOTATION}'].orValue(variables.queue) == variables.queue"


def _template_ok(template: str) -> str:
    return _annotation_ok(f"{template}.?metadata.?annotations")


VALIDATIONS = (
    ("metadata annotation", _annotation_ok("object.?metadata.?annotations")),
    ("PodGroup spec.queue",
     "object.kind != 'PodGroup' || object.?spec.?queue.orValue(variables.queue) == variables.queue"),
    ("TrainJob spec.annotations",
     f"object.kind != 'TrainJob' || {_annotation_ok('object.?spec.?annotations')}"),
    ("TrainJob runtimePatches",
     "object.kind != 'TrainJob' || object.?spec.?runtimePatches.orValue([]).all(p, "
     f"{_template_ok('p.?trainingRuntimeSpec.?template')} && "
     "p.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([]).all(j, "
     f"{_template_ok('j.?template')} && {_template_ok('j.?template.?spec.?template')}))"),
    ("TrainJob podTemplateOverrides",
     "object.kind != 'TrainJob' || object.?spec.?podTemplateOverrides.orValue([]).all(o, "
     f"{_annotation_ok('o.?metadata.?annotations')})"),
    ("JobSet templates",
     "object.kind != 'JobSet' || object.?spec.?replicatedJobs.orValue([]).all(j, "
     f"{_template_ok('j.?template')} && {_template_ok('j.?template.?spec.?template')})"),
    ("Volcano Job spec.queue or task template",
     "!object.apiVersion.startsWith('batch.volcano.sh/') || (object.?spec.?queue.orValue('') == variables.queue && "
     f"object.?spec.?tasks.orValue([]).all(t, {_template_ok('t.?template')}))"),
)

def _unbound(pod_spec: str) -> str:
    return f"{pod_spec}.?nodeName.orValue('') == ''"


PLACE_BY_SCHEDULER = ("pods in this tenant namespace are placed by their scheduler (Volcano for GPU pods), "
                      "which checks that they fit: choose nodes with nodeSelector or nodeAffinity")
TEMPLATE_NODE_NAMES = (
    ("a pod template (spec.template.spec.nodeName)",
     "!(object.apiVersion in ['apps/v1', 'batch/v1']) || object.kind == 'CronJob' || "
     + _unbound("object.?spec.?template.?spec")),
    ("the CronJob job template", "object.kind != 'CronJob' || " + _unbound("object.?spec.?jobTemplate.?spec.?template.?spec")),
    ("a JobSet replicated job", "object.kind != 'JobSet' || object.?spec.?replicatedJobs.orValue([]).all(j, "
     + _unbound("j.?template.?spec.?template.?spec") + ")"),
    ("a Volcano Job task", "!object.apiVersion.startsWith('batch.volcano.sh/') || "
     "object.?spec.?tasks.orValue([]).all(t, " + _unbound("t.?template.?spec") + ")"),
    ("a TrainJob podTemplateOverride", "object.kind != 'TrainJob' || "
     "object.?spec.?podTemplateOverrides.orValue([]).all(o, " + _unbound("o.?spec") + ")"),
    ("a TrainJob runtimePatch", "object.kind != 'TrainJob' || object.?spec.?runtimePatches.orValue([]).all(p, "
     "p.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([]).all(j, "
     + _unbound("j.?template.?spec.?template.?spec") + "))"),
)

SCHEDULING_FIELDS = (("queue", "''"), ("priorityClassName", "''"), ("minMember", "0"), ("minResources", "{}"),
                     ("networkTopology", "{}"))
ADMIN_GROUP = "system:masters"


VOLCANO_SERVICE_ACCOUNTS = ("volcano-scheduler", "volcano-controllers")
"""The identities of Volcano's chart (release `volcano`) that write PodGroup status."""


def controller_username(namespace: str = "trainyard-system") -> str:
    return f"system:serviceaccount:{namespace}:{K.CONTROLLER_NAME}"


def volcano_usernames(namespace: str = VOLCANO_NAMESPACE) -> tuple[str, ...]:
    return tuple(f"system:serviceaccount:{namespace}:{name}" for name in VOLCANO_SERVICE_ACCOUNTS)


def _owned_pod_group_update(trusted: tuple[str, ...], same: str) -> str:
    """CEL: not an update of a TrainJob-owned PodGroup, or one by a trusted identity or an admin, or `same` holds."""
    names = ", ".join(f"'{name}'" for name in trusted)
    return ("object.kind != 'PodGroup' || request.operation != 'UPDATE' || "
            "!oldObject.?metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false) && "
            f"r.kind == 'TrainJob') || request.userInfo.username in [{names}] || "
            f"request.userInfo.?groups.orValue([]).exists(g, g == '{ADMIN_GROUP}') || ({same})")


def _owned_pod_group_unchanged(controller: str) -> str:
    """CEL: an update of a TrainJob-owned PodGroup by anyone but the controller keeps its scheduling fields."""
    same = " && ".join(f"object.spec.?{f}.orValue({empty}) == oldObject.spec.?{f}.orValue({empty})"
                       for f, empty in SCHEDULING_FIELDS)
    return _owned_pod_group_update((controller,), same)


def _owned_pod_group_status_unchanged(controller: str, volcano: tuple[str, ...]) -> str:
    """CEL: an update of a TrainJob-owned PodGroup by anyone but Volcano or the controller keeps its status."""
    return _owned_pod_group_update((controller, *volcano), "object.?status.orValue({}) == oldObject.?status.orValue({})")


def _own_message_validations(controller: str, volcano: tuple[str, ...]) -> tuple:
    fields = ", ".join(f for f, _ in SCHEDULING_FIELDS)
    return OWN_MESSAGE_VALIDATIONS + (
        (_owned_pod_group_unchanged(controller),
         f"'this PodGroup belongs to a TrainJob: only the TrainJob controller may change its {fields}; "
         "edit the TrainJob (suspend it, change it, resume it) instead'"),
        (_owned_pod_group_status_unchanged(controller, volcano),
         "'this PodGroup belongs to a TrainJob: its status (phase, running, conditions) is written by Volcano only, "
         "since the TrainJob controller starts the gang when Volcano admits it; leave status alone'"),)


# (expression, message) checks with messages of their own
OWN_MESSAGE_VALIDATIONS = (
    ("object.kind != 'Pod' || request.operation != 'CREATE' || " + _unbound("object.spec"),
     f"'spec.nodeName is set at create, which skips the scheduler: {PLACE_BY_SCHEDULER}'"),
    (f"object.kind != 'Pod' || request.operation != 'CREATE' || !({names_gpus()}) || "
     f"object.spec.?schedulerName.orValue('') == '{K.VOLCANO_SCHEDULER_NAME}'",
     f"'a pod naming {K.GPU_RESOURCE} is scheduled by {K.VOLCANO_SCHEDULER_NAME} in queue ' + variables.queue + "
     f"', not by ' + object.spec.?schedulerName.orValue('default-scheduler') + ': leave spec.schedulerName unset "
     f"(is the tenant\\'s {POLICY_NAME_ROUTING} binding missing?)'"),
    *((expression, f"'{where} sets spec.nodeName, which skips the scheduler: {PLACE_BY_SCHEDULER}'")
      for where, expression in TEMPLATE_NODE_NAMES),
    (f"object.kind != 'Pod' || !object.?metadata.?annotations[?'{GROUP_NAME}'].hasValue() || "
     "object.?metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false)) || "
     f"object.metadata.annotations['{GROUP_NAME}'] == 'podgroup-' + object.?metadata.?uid.orValue('')",
     f"'a bare pod (no controller owner) may not name a PodGroup ({GROUP_NAME}): gangs are built by TrainJobs'"),
)


def render_queue_guard_policy(controller: str = controller_username(),
                              volcano: tuple[str, ...] = volcano_usernames()) -> dict:
    """`controller`: the username the TrainJob controller acts as (the only one that may edit its PodGroups);
    `volcano`: the usernames Volcano writes PodGroup status as."""
    rules = [{"apiGroups": [group], "apiVersions": [version], "resources": [resource],
              "operations": ["CREATE", "UPDATE"]} for group, version, resource in GUARDED_RESOURCES]
    return {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": part_of_trainyard()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "variables": [{"name": "queue", "expression":
                           f"namespaceObject.?metadata.?labels[?'{QUEUE_LABEL}'].orValue('')"}],
            "validations": [
                *({"expression": expression, "reason": "Forbidden",
                   "messageExpression": f"'{where} names a Volcano queue other than this namespace\\'s queue ' + variables.queue"}
                  for where, expression in VALIDATIONS),
                *({"expression": expression, "reason": "Forbidden", "messageExpression": message}
                  for expression, message in _own_message_validations(controller, volcano)),
            ],
        },
    }


def render_queue_guard_binding(tenant: TenantSpec) -> dict:
    return admission_policy_binding("ValidatingAdmissionPolicyBinding", POLICY_NAME, tenant, validationActions=["Deny"])
