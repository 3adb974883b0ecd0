"""GPU pods in tenant namespaces are Volcano's, in the tenant's queue, whoever creates them.

A MutatingAdmissionPolicy (CEL run by the API server at pod create, no webhook process) sets
`schedulerName: volcano` on every pod that names `nvidia.com/gpu` in a request or limit of any container
or init container, and `scheduling.volcano.sh/queue-name` to the namespace's queue when the pod names
none. Volcano's podgroup controller then gives a pod without a gang a one-pod PodGroup in that queue,
so Deployments, Jobs, CronJobs, StatefulSets, bare pods and CI service accounts all wait in the tenant's
queue, under its capability and fair share; kube-scheduler never places (or preempts for) a tenant GPU pod.
The queue guard (`queue_guard.py`) refuses what the mutation cannot fix: a pod naming another queue, a
GPU pod that still names another scheduler, and `spec.nodeName` at create (which skips every scheduler).

Like the queue guard, one policy serves every tenant (the queue is read from the namespace's
`trainyard.dev/queue` label through `namespaceObject`) and each tenant gets a Binding for its namespace.
"""

from __future__ import annotations

from trainyard import k8s as K
from trainyard.platform.stack_config import TenantSpec
from trainyard.platform.tenant_objects import QUEUE_LABEL, admission_policy_binding, pod_create_mutation_policy

POLICY_NAME = "trainyard-gpu-pods-to-volcano"
QUEUE = K.VOLCANO_QUEUE_ANNOTATION


def names_gpus(pod: str = "object") -> str:
    """CEL: some container or init container of `pod` names the GPU resource as a request or a limit."""
    containers = f"{pod}.spec.?containers.orValue([]) + {pod}.spec.?initContainers.orValue([])"
    gpu = K.GPU_RESOURCE
    return (f"({containers}).exists(c, c.?resources.?requests[?'{gpu}'].hasValue() || "
            f"c.?resources.?limits[?'{gpu}'].hasValue())")


def _mutation() -> str:
    queue = (f"object.metadata.?annotations[?'{QUEUE}'].hasValue() ? {{}} : "
             f"{{'{QUEUE}': variables.queue}}")
    return (f"Object{{metadata: Object.metadata{{annotations: {queue}}}, "
            f"spec: Object.spec{{schedulerName: '{K.VOLCANO_SCHEDULER_NAME}'}}}}")


def render_gpu_pod_routing_policy() -> dict:
    return pod_create_mutation_policy(
        POLICY_NAME, [{"name": "names-gpus", "expression": names_gpus()}],
        [{"name": "queue", "expression": f"namespaceObject.?metadata.?labels[?'{QUEUE_LABEL}'].orValue('')"}],
        _mutation())


def render_gpu_pod_routing_binding(tenant: TenantSpec) -> dict:
    return admission_policy_binding("MutatingAdmissionPolicyBinding", POLICY_NAME, tenant)
