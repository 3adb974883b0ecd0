"""trainyard's model of the `trainer.kubeflow.org` API: TrainJob, TrainingRuntime, ClusterTrainingRuntime.

The v2.3 shape (runtimeRef, initializer, trainer, runtimePatches, activeDeadlineSeconds, managedBy,
status) plus the seed-era (v2.0/v2.1) fields the platform's users still write: `spec.labels`,
`spec.annotations`, `spec.podTemplateOverrides`, `numProcPerNode` as `auto|cpu|gpu|<int>`,
`mlPolicy.torch.elasticPolicy`, `mpi.mpiImplementation` OpenMPI/Intel/MPICH. Built with
`schema.py` so one definition serves the CRD, defaulting, pruning and admission.
"""

from __future__ import annotations

import re

from . import constants as C
from .quantity import QUANTITY_PATTERN
from .schema import (DNS1035, Rule, array, boolean, free_object, immutable, int_or_string, integer, obj, string,
                     string_map)

IMMUTABLE = immutable()

NUM_PROC_VALUES = ("auto", "cpu", "gpu")


def _num_proc_ok(v: object) -> bool:
    """The CEL rule below, in Python: a digit string such as "4" is a string, hence refused (quote-free 4)."""
    if isinstance(v, str):
        return v in NUM_PROC_VALUES
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


NUM_PROC_RULE = Rule(
    "type(self) == int ? self >= 1 : self in ['auto', 'cpu', 'gpu']",
    "numProcPerNode must be greater than or equal to 1, or one of auto, cpu, gpu",
    _num_proc_ok,
)

# ---- core/v1 pieces (typed where trainyard reads them, preserved otherwise) ----------------------

def env_var() -> dict:
    return obj({"name": string(), "value": string(), "valueFrom": free_object()}, required=["name"])


def env_list(max_items: int = 128) -> dict:
    return array(env_var(), maxItems=max_items, **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})


def resource_list() -> dict:
    return {"type": "object", "additionalProperties": int_or_string(pattern=QUANTITY_PATTERN)}


def _object_meta() -> dict:
    """Template metadata: labels and annotations are string maps as in ObjectMeta (the build copies them)."""
    return obj({"labels": string_map(), "annotations": string_map()}, **{"x-kubernetes-preserve-unknown-fields": True})


def resource_requirements() -> dict:
    return obj({
        "limits": resource_list(),
        "requests": resource_list(),
        "claims": array(obj({"name": string(), "request": string()}, required=["name"]),
                        **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
    })


def local_object_reference() -> dict:
    return obj({"name": string(default="")}, **{"x-kubernetes-map-type": "atomic"})


def template_metadata() -> dict:
    return obj({"labels": string_map(), "annotations": string_map()})


def volume_mount() -> dict:
    return obj({"name": string(), "mountPath": string(), "readOnly": boolean(), "subPath": string(),
                "subPathExpr": string(), "mountPropagation": string(), "recursiveReadOnly": string()},
               required=["name", "mountPath"])


def container_patch(bounded: bool = True) -> dict:
    """ContainerPatch: the only container fields a TrainJob may change (upstream PodSpecPatch).

    `bounded` adds upstream v2.3's ContainerPatch bounds (name 1..253, volumeMounts <= 128): the
    `self == oldSelf` rules on the containers lists above need them to fit the API server's CEL cost budget.
    """
    name = string(minLength=1, maxLength=253) if bounded else string()
    return obj({
        "name": name,
        "env": env_list(),
        "volumeMounts": array(volume_mount(), maxItems=128 if bounded else None,
                              **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["mountPath"]}),
        "securityContext": free_object(),
    }, required=["name"])


def toleration() -> dict:
    return obj({"key": string(), "operator": string(), "value": string(), "effect": string(),
                "tolerationSeconds": integer("int64")})


def _named(max_items: int | None = None, rules=None, item: dict | None = None) -> dict:
    extra = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
    if max_items:
        extra["maxItems"] = max_items
    return array(item or obj({"name": string()}, required=["name"]), rules=rules, **extra)


def pod_spec_patch(immutable_fields: bool) -> dict:
    """Pod spec fields a TrainJob may override.

    `immutable_fields` (the v2.3 runtimePatches PodSpecPatch) adds upstream's per-field CEL together with
    upstream's bounds that keep those rules inside the API server's cost budget (serviceAccountName
    maxLength 253, imagePullSecrets maxItems 64, container patches bounded). The seed-era
    podTemplateOverrides variant carries no CEL and keeps its looser shape.
    """
    imm = [IMMUTABLE] if immutable_fields else None
    volume = obj({"name": string()}, required=["name"], **{"x-kubernetes-preserve-unknown-fields": True})
    return obj({
        "serviceAccountName": string(rules=imm, maxLength=253 if immutable_fields else None),
        "nodeSelector": string_map(),
        "affinity": free_object(),
        "tolerations": array(toleration(), maxItems=128, **{"x-kubernetes-list-type": "atomic"}),
        "volumes": _named(128, imm, volume),
        "initContainers": _named(64, imm, container_patch(immutable_fields)),
        "containers": _named(64, imm, container_patch(immutable_fields)),
        "schedulingGates": _named(16),
        "imagePullSecrets": _named(64 if immutable_fields else None, imm),
        "securityContext": free_object(rules=imm),
        "terminationGracePeriodSeconds": integer("int64", rules=imm, minimum=0),
    })


# ---- JobSet template (jobset.x-k8s.io/v1alpha2 JobSetSpec, top levels validated) -----------------

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
            "metadata": _object_meta(),
            "spec": obj({
                # resources typed as in the Pod API: the build reads them (PodGroup minResources, GPU limits)
                "containers": array(obj({"name": string(), "resources": resource_requirements()}, required=["name"],
                                        **{"x-kubernetes-preserve-unknown-fields": True})),
                "initContainers": array(obj({"name": string(), "resources": resource_requirements()}, required=["name"],
                                            **{"x-kubernetes-preserve-unknown-fields": True})),
            }, **{"x-kubernetes-preserve-unknown-fields": True}),
        }, **{"x-kubernetes-preserve-unknown-fields": True}),
    }, required=["template"], **{"x-kubernetes-preserve-unknown-fields": True})
    replicated_job = obj({
        "name": string(),
        "groupName": string(default="default", maxLength=63, pattern=DNS1035.pattern),
        "replicas": integer(default=1),
        "dependsOn": array(obj({"name": string(), "status": string(enum=["Ready", "Complete"])}, required=["name", "status"]),
                           maxItems=5, rules=[value_immutable],
                           **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
        "template": obj({"metadata": _object_meta(), "spec": job_spec}),
    }, required=["name", "template"])
    return obj({
        "replicatedJobs": array(replicated_job, **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
        "network": obj({"enableDNSHostnames": boolean(), "subdomain": string(), "publishNotReadyAddresses": boolean()},
                       rules=[value_immutable]),
        "successPolicy": obj({"operator": string(enum=["All", "Any"]), "targetReplicatedJobs": array(string(), **{"x-kubernetes-list-type": "atomic"})},
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
            "templates": array(obj({"metadata": obj({"namespace": string()}, **{"x-kubernetes-preserve-unknown-fields": True})},
                                   **{"x-kubernetes-preserve-unknown-fields": True}),
                               maxItems=50, **{"x-kubernetes-list-type": "atomic"}),
            "retentionPolicy": obj({"whenDeleted": string(default="Delete", enum=["Delete", "Retain"])}),
        }, **{"x-kubernetes-preserve-unknown-fields": True}, rules=[Rule(
            "!has(self.templates) || self.templates.all(t, !has(t.metadata) || !has(t.metadata.namespace) || "
            "size(t.metadata.namespace) == 0)",
            "namespace cannot be set for VolumeClaimPolicies templates", _no_namespace_in_claim_templates)]),
            maxItems=50, rules=[value_immutable], **{"x-kubernetes-list-type": "atomic"}),
        "suspend": boolean(),
        "coordinator": free_object(),
        "managedBy": string(),
        "ttlSecondsAfterFinished": integer(minimum=0),
    }, rules=[Rule("!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
                   "self.replicatedJobs.exists(x, has(x.dependsOn)))",
                   "StartupPolicy and DependsOn APIs are mutually exclusive", _no_depends_on_with_in_order)])


# ---- TrainingRuntime / ClusterTrainingRuntime ---------------------------------------------------

def _only_one_policy(ml: dict) -> bool:
    return sum(k in ml for k in ("torch", "mpi", "jax", "xgboost", "flux")) <= 1


def _no_num_nodes_with_elastic(ml: dict) -> bool:
    return not ("numNodes" in ml and "elasticPolicy" in (ml.get("torch") or {}))


def _min_le_max(p: dict) -> bool:
    return not ("minNodes" in p and "maxNodes" in p) or p["minNodes"] <= p["maxNodes"]


def ml_policy() -> dict:
    elastic = obj({
        "maxRestarts": integer(minimum=0),
        "minNodes": integer(minimum=1),
        "maxNodes": integer(minimum=1),
        "metrics": array(obj({"type": string()}, required=["type"], **{"x-kubernetes-preserve-unknown-fields": True}),
                         **{"x-kubernetes-list-type": "atomic"}),
    }, rules=[Rule("!has(self.minNodes) || !has(self.maxNodes) || self.minNodes <= self.maxNodes",
                   "minNodes must be less than or equal to maxNodes", _min_le_max)])
    target = obj({
        "jobName": string(minLength=1, maxLength=253),
        "containerNames": array(string(maxLength=63), minItems=1, maxItems=8, rules=[Rule(
            "!self.exists(c, c == 'node')",
            "containerNames must not include the main node container because PET_* envs are always injected into it",
            lambda names: "node" not in names)], **{"x-kubernetes-list-type": "set"}),
    }, required=["jobName", "containerNames"])
    torch = obj({
        "numProcPerNode": int_or_string(rules=[NUM_PROC_RULE]),
        "elasticPolicy": elastic,
        "envInjection": obj({"targets": array(target, maxItems=16,
                                              **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["jobName"]})}),
    })
    mpi = obj({
        "numProcPerNode": integer(default=1, rules=[Rule("self >= 1", "NumProcPerNode in mpiPolicy must be >= 1", lambda v: v >= 1)]),
        "mpiImplementation": string(default=C.MPI_OPENMPI, enum=[C.MPI_OPENMPI, C.MPI_INTEL, C.MPI_MPICH, ""]),
        "sshAuthMountPath": string(default="/root/.ssh", maxLength=4096),
        "runLauncherAsNode": boolean(default=False),
    })
    flux = obj({"numProcPerNode": integer(default=1, rules=[Rule("self >= 1", "NumProcPerNode in fluxPolicy must be >= 1", lambda v: v >= 1)])})
    return obj({
        "numNodes": integer(minimum=0),
        "torch": torch,
        "mpi": mpi,
        "jax": obj({}),
        "xgboost": obj({}),
        "flux": flux,
    }, rules=[
        Rule("[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1",
             "Only one of the policy can be configured", _only_one_policy),
        Rule("!(has(self.numNodes) && (has(self.torch) && has(self.torch.elasticPolicy)))",
             "numNodes should not be set if torch.elasticPolicy is configured", _no_num_nodes_with_elastic),
    ])


def pod_group_policy() -> dict:
    return obj({
        "coscheduling": obj({"scheduleTimeoutSeconds": integer(default=60, minimum=0)}),
        "volcano": obj({"networkTopology": obj({
            "mode": string(default="hard", enum=["hard", "soft"]),
            "highestTierAllowed": integer(default=1, minimum=0),
        })}),
    })


def training_runtime_spec() -> dict:
    return obj({
        "mlPolicy": ml_policy(),
        "podGroupPolicy": pod_group_policy(),
        "template": obj({"metadata": template_metadata(), "spec": jobset_spec()}),
    }, required=["template"], minProperties=1)


def runtime_schema() -> dict:
    return obj({
        "apiVersion": string(), "kind": string(), "metadata": obj(),
        "spec": training_runtime_spec(),
    })


# ---- TrainJob -----------------------------------------------------------------------------------

def _storage_uri_ok(v: str) -> bool:
    return v == "" or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$", v) is not None


def initializer_source() -> dict:
    return obj({
        "storageUri": string(maxLength=2048, rules=[Rule(
            "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
            "storageUri may be empty, or it must be a valid URI (scheme://...)", _storage_uri_ok)]),
        "env": env_list(),
        "secretRef": local_object_reference(),
    })


def trainer_spec() -> dict:
    return obj({
        "image": string(maxLength=500),
        "command": array(string(maxLength=1048576), maxItems=128, **{"x-kubernetes-list-type": "atomic"}),
        "args": array(string(maxLength=1048576), maxItems=128, **{"x-kubernetes-list-type": "atomic"}),
        "env": env_list(),
        "numNodes": integer(minimum=0),
        "resourcesPerNode": resource_requirements(),
        "numProcPerNode": int_or_string(rules=[NUM_PROC_RULE]),
    }, rules=[IMMUTABLE])


def runtime_patch() -> dict:
    replicated_job_patch = obj({
        "name": string(minLength=1, maxLength=253),
        "template": obj({
            "metadata": template_metadata(),
            "spec": obj({"template": obj({"metadata": template_metadata(), "spec": pod_spec_patch(True)})}),
        }),
    }, required=["name"])
    return obj({
        "manager": string(minLength=1, maxLength=253, rules=[IMMUTABLE]),
        "time": string(format="date-time"),
        "trainingRuntimeSpec": obj({"template": obj({
            "metadata": template_metadata(),
            "spec": obj({"replicatedJobs": array(replicated_job_patch, maxItems=100,
                                                 **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})}),
        })}),
    }, required=["manager"])


def pod_template_override() -> dict:
    """Seed-era (v2.1) per-job pod template override."""
    return obj({
        "targetJobs": array(obj({"name": string()}, required=["name"]), minItems=1),
        "metadata": template_metadata(),
        "spec": pod_spec_patch(False),
    }, required=["targetJobs"])


MANAGED_BY_VALUES = (C.MANAGED_BY_CONTROLLER, C.MANAGED_BY_MULTIKUEUE)


def trainjob_spec() -> dict:
    return obj({
        "runtimeRef": obj({
            "name": string(minLength=1, maxLength=253),
            "apiGroup": string(default=C.GROUP, maxLength=253),
            "kind": string(default=C.CLUSTER_TRAINING_RUNTIME_KIND, maxLength=253),
        }, required=["name"], rules=[IMMUTABLE]),
        "initializer": obj({"dataset": initializer_source(), "model": initializer_source()}, rules=[IMMUTABLE]),
        "trainer": trainer_spec(),
        "runtimePatches": array(runtime_patch(), maxItems=16,
                                **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["manager"]}),
        "labels": string_map(),
        "annotations": string_map(),
        "podTemplateOverrides": array(pod_template_override(), **{"x-kubernetes-list-type": "atomic"}),
        "suspend": boolean(default=False),
        "activeDeadlineSeconds": integer("int64", minimum=1, rules=[IMMUTABLE]),
        "managedBy": string(default=C.MANAGED_BY_CONTROLLER, maxLength=253, rules=[
            Rule("self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
                 "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
                 lambda v: v in MANAGED_BY_VALUES),
            IMMUTABLE]),
    }, required=["runtimeRef"])


def trainjob_status() -> dict:
    condition = obj({
        "type": string(maxLength=316), "status": string(enum=["True", "False", "Unknown"]),
        "reason": string(maxLength=1024), "message": string(maxLength=32768),
        "lastTransitionTime": string(format="date-time"), "observedGeneration": integer("int64", minimum=0),
    }, required=["type", "status", "reason", "message", "lastTransitionTime"])
    job_status = obj({k: integer() for k in ("ready", "succeeded", "failed", "active", "suspended")} | {"name": string(maxLength=253)},
                     required=["name", "ready", "succeeded", "failed", "active", "suspended"])
    trainer_status = obj({
        "progressPercentage": integer(minimum=0, maximum=100),
        "estimatedRemainingSeconds": integer("int64", minimum=0),
        "metrics": array(obj({"name": string(maxLength=64), "value": string(maxLength=64)}, required=["name", "value"]), maxItems=256),
        "lastUpdatedTime": string(format="date-time"),
    }, rules=[Rule("has(self.lastUpdatedTime)", "lastUpdatedTime is required when trainerStatus is present",
                   lambda v: "lastUpdatedTime" in v)])
    return obj({
        "conditions": array(condition, maxItems=8, **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}),
        "jobsStatus": array(job_status, maxItems=100, **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
        "trainerStatus": trainer_status,
    })


def _name_ok(meta: dict) -> bool:
    return DNS1035.match(meta.get("name", "")) is not None


def trainjob_schema() -> dict:
    return obj({
        "apiVersion": string(), "kind": string(), "metadata": obj(),
        "spec": trainjob_spec(),
        "status": trainjob_status(),
    }, rules=[
        Rule("self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')", "metadata.name must match RFC 1035 DNS label format",
             lambda o: _name_ok(o.get("metadata") or {})),
        Rule("size(self.metadata.name) <= 63", "metadata.name must be no more than 63 characters",
             lambda o: len((o.get("metadata") or {}).get("name", "")) <= 63),
    ])
