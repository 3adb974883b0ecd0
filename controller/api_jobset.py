"""The JobSet template inside a runtime (`jobset.x-k8s.io/v1alpha2` JobSetSpec), top levels validated.

Only what the build reads or JobSet's own CRD checks is typed (bounds and CEL as in JobSet v0.12), so a
runtime JobSet v0.12 would refuse is refused at admission, not at apply time.
"""

from __future__ import annotations

from .api_core import preserved_object_meta, resource_requirements
from .schema import DNS1035, Rule, array, boolean, free_object, immutable, integer, list_map, list_type, obj, preserve_unknown, string

# The largest count of nodes (numNodes) or of a replicated job's replicas: Kubernetes' largest supported cluster.
# The pipeline builds a hostname per pod, so an unbounded count exhausted memory before anything refused it.
MAX_NUM_NODES = 5000


def _no_depends_on_with_in_order(spec: dict) -> bool:
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    return not (in_order and any("dependsOn" in j for j in spec.get("replicatedJobs") or [] if isinstance(j, dict)))


def _no_namespace_in_claim_templates(policy: dict) -> bool:
    """JobSet: a claim template may not set a (non-empty) namespace."""
    return all(not (t.get("metadata") or {}).get("namespace") for t in policy.get("templates") or [])


def jobset_spec() -> dict:
    value_immutable = immutable("Value is immutable")
    job_spec = obj({
        "parallelism": integer(),
        "completions": integer(),
        "completionMode": string(),
        "backoffLimit": integer(),
        "template": obj({
            "metadata": preserved_object_meta(),
            "spec": obj({
                # resources typed as in the Pod API: the build reads them (PodGroup minResources, GPU limits)
                "containers": array(obj({"name": string(), "resources": resource_requirements()}, required=["name"],
                                        **preserve_unknown())),
                "initContainers": array(obj({"name": string(), "resources": resource_requirements()}, required=["name"],
                                            **preserve_unknown())),
            }, **preserve_unknown()),
        }, **preserve_unknown()),
    }, required=["template"], **preserve_unknown())
    replicated_job = obj({
        "name": string(),
        "groupName": string(default="default", maxLength=63, pattern=DNS1035.pattern),
        "replicas": integer(default=1, minimum=0, maximum=MAX_NUM_NODES),
        "dependsOn": array(obj({"name": string(), "status": string(enum=["Ready", "Complete"])}, required=["name", "status"]),
                           maxItems=5, rules=[value_immutable],
                           **list_map("name")),
        "template": obj({"metadata": preserved_object_meta(), "spec": job_spec}),
    }, required=["name", "template"])
    return obj({
        "replicatedJobs": array(replicated_job, **list_map("name")),
        "network": obj({"enableDNSHostnames": boolean(), "subdomain": string(), "publishNotReadyAddresses": boolean()},
                       rules=[value_immutable]),
        "successPolicy": obj({"operator": string(enum=["All", "Any"]), "targetReplicatedJobs": array(string(), **list_type("atomic"))},
                             required=["operator"], rules=[value_immutable]),
        "failurePolicy": obj({
            "maxRestarts": integer(),
            "restartStrategy": string(default="Recreate", enum=["Recreate", "BlockingRecreate", "RecreateJob"]),
            "rules": array(free_object()),
        }, rules=[value_immutable]),
        "startupPolicy": obj({"startupPolicyOrder": string(enum=["AnyOrder", "InOrder"])}, required=["startupPolicyOrder"],
                             rules=[value_immutable]),
        # JobSet v0.12 bounds both lists at 50 (its CEL rules iterate/compare them); its rule allows an
        # empty namespace, as does the Python predicate.
        "volumeClaimPolicies": array(obj({
            "templates": array(obj({"metadata": obj({"namespace": string()}, **preserve_unknown())},
                                   **preserve_unknown()),
                               maxItems=50, **list_type("atomic")),
            "retentionPolicy": obj({"whenDeleted": string(default="Delete", enum=["Delete", "Retain"])}),
        }, **preserve_unknown(), rules=[Rule(
            "!has(self.templates) || self.templates.all(t, !has(t.metadata) || !has(t.metadata.namespace) || "
            "size(t.metadata.namespace) == 0)",
            "namespace cannot be set for VolumeClaimPolicies templates", _no_namespace_in_claim_templates)]),
            maxItems=50, rules=[value_immutable], **list_type("atomic")),
        "suspend": boolean(),
        "coordinator": free_object(),
        "managedBy": string(),
        "ttlSecondsAfterFinished": integer(minimum=0),
    }, rules=[Rule("!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
                   "self.replicatedJobs.exists(x, has(x.dependsOn)))",
                   "StartupPolicy and DependsOn APIs are mutually exclusive", _no_depends_on_with_in_order)])
