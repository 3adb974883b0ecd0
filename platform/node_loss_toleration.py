"""How long a tenant's pods stay bound to a lost node before Kubernetes evicts them: the tenant's
`limits.nodeLossTolerationSeconds` instead of the API server's 300.

The API server gives every pod that states none a toleration of the `node.kubernetes.io/not-ready` and
`node.kubernetes.io/unreachable` NoExecute taints for 300 s (the DefaultTolerationSeconds admission plugin). A
training gang with a member on a lost node cannot go on, but for those 5 minutes its pods still say Running: the
Job does not fail, JobSet's failure policy does not act, and the gang's Volcano queue stays charged. So a
MutatingAdmissionPolicy, which runs after that plugin, sets the tenant's value (namespace annotation
`trainyard.dev/node-loss-toleration-seconds`, written by the platform) on exactly those two defaulted tolerations.
A toleration the pod states itself, with any other value, is kept (one stating exactly 300 s cannot be told apart
from the default, and gets the tenant's value too).
"""

from __future__ import annotations

from trainyard import k8s as K
from trainyard.platform.stack_config import TenantSpec
from trainyard.platform.tenant_objects import admission_policy_binding, pod_create_mutation_policy

POLICY_NAME = "trainyard-tenant-node-loss-toleration"
NODE_LOSS_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
API_SERVER_DEFAULT_SECONDS = 300
"""What the DefaultTolerationSeconds admission plugin gives (its --default-*-toleration-seconds flags' default)."""


def _defaulted(t: str = "t") -> str:
    """CEL: toleration `t` is one the API server added by default."""
    keys = ", ".join(f"'{key}'" for key in NODE_LOSS_TAINTS)
    return (f"{t}.?key.orValue('') in [{keys}] && {t}.?effect.orValue('') == 'NoExecute' && "
            f"{t}.?tolerationSeconds.orValue(-1) == {API_SERVER_DEFAULT_SECONDS}")


def has_defaulted_toleration() -> str:
    return f"object.spec.?tolerations.orValue([]).exists(t, {_defaulted()})"


def mutation() -> str:
    """JSON patches setting the tenant's seconds on the defaulted tolerations, by index (the list is atomic: an
    ApplyConfiguration may not change it, and a patch replacing it whole with typed items crashes the API server's
    JSON-patch conversion in v1.36)."""
    index = "string(object.spec.tolerations.indexOf(t))"
    return (f"object.spec.tolerations.filter(t, {_defaulted()}).map(t, JSONPatch{{op: \"replace\", "
            f"path: \"/spec/tolerations/\" + {index} + \"/tolerationSeconds\", value: variables.seconds}})")


def render_node_loss_policy() -> dict:
    annotation = K.NAMESPACE_NODE_LOSS_TOLERATION_ANNOTATION
    seconds = (f"int(namespaceObject.?metadata.?annotations[?'{annotation}']"
               f".orValue('{API_SERVER_DEFAULT_SECONDS}'))")
    return pod_create_mutation_policy(
        POLICY_NAME, [{"name": "has-defaulted-node-loss-toleration", "expression": has_defaulted_toleration()}],
        [{"name": "seconds", "expression": seconds}],
        f"variables.seconds == {API_SERVER_DEFAULT_SECONDS} ? [] : {mutation()}", patch_type="JSONPatch")


def render_node_loss_binding(tenant: TenantSpec) -> dict:
    return admission_policy_binding("MutatingAdmissionPolicyBinding", POLICY_NAME, tenant)
