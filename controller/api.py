"""trainyard's model of the `trainer.kubeflow.org` API: TrainJob, TrainingRuntime, ClusterTrainingRuntime.

The v2.3 shape (runtimeRef, initializer, trainer, runtimePatches, activeDeadlineSeconds, managedBy,
status) plus the seed-era (v2.0/v2.1) fields the platform's users still write: `spec.labels`,
`spec.annotations`, `spec.podTemplateOverrides`, `numProcPerNode` as `auto|cpu|gpu|<int>`,
`mlPolicy.torch.elasticPolicy`, `mpi.mpiImplementation` OpenMPI/Intel/MPICH. Built with
`schema.py` so one definition serves the CRD, defaulting, pruning and admission.

The core/v1 pieces live in `api_core.py`, the JobSet template in `api_jobset.py`.
"""

from __future__ import annotations

import re

from trainyard import k8s as K
from . import constants as C
from .api_core import IMMUTABLE, env_list, local_object_reference, pod_spec_patch, resource_requirements, template_metadata
from .api_jobset import MAX_NUM_NODES, jobset_spec
from .seed_topology import NETWORK_POLICY_MODES
from .schema import DNS1035, DNS1123_LABEL, Rule, array, boolean, int_or_string, integer, list_map, list_type, obj, preserve_unknown, string, string_map

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

# trainyard's upper bounds (upstream has none): the pipeline builds one hostname, env entry or hostfile line
# per node and process, so an unbounded count exhausts memory before anything can refuse it. 5000 nodes is
# Kubernetes' largest supported cluster (MAX_NUM_NODES, api_jobset: a replicated job's replicas too); 1024
# processes per node is far above any accelerator count.
MAX_PROCS_PER_NODE = 1024


def _num_proc_bounded(v: object) -> bool:
    return not (isinstance(v, int) and not isinstance(v, bool)) or v <= MAX_PROCS_PER_NODE


NUM_PROC_MAX_RULE = Rule(
    f"type(self) != int || self <= {MAX_PROCS_PER_NODE}",
    f"numProcPerNode must be at most {MAX_PROCS_PER_NODE} (trainyard's bound on processes per node); "
    "use one process per accelerator",
    _num_proc_bounded,
)


def num_nodes() -> dict:
    return integer(minimum=0, maximum=MAX_NUM_NODES)


def procs_per_node(message: str) -> dict:
    """mpi/flux numProcPerNode: an int32 from 1 to MAX_PROCS_PER_NODE."""
    return integer(default=1, maximum=MAX_PROCS_PER_NODE, rules=[Rule("self >= 1", message, lambda v: v >= 1)])


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
        "minNodes": integer(minimum=1, maximum=MAX_NUM_NODES),
        "maxNodes": integer(minimum=1, maximum=MAX_NUM_NODES),
        "metrics": array(obj({"type": string()}, required=["type"], **preserve_unknown()),
                         **list_type("atomic")),
    }, rules=[Rule("!has(self.minNodes) || !has(self.maxNodes) || self.minNodes <= self.maxNodes",
                   "minNodes must be less than or equal to maxNodes", _min_le_max)])
    target = obj({
        "jobName": string(minLength=1, maxLength=253),
        "containerNames": array(string(maxLength=63), minItems=1, maxItems=8, rules=[Rule(
            "!self.exists(c, c == 'node')",
            "containerNames must not include the main node container because PET_* envs are always injected into it",
            lambda names: "node" not in names)], **list_type("set")),
    }, required=["jobName", "containerNames"])
    torch = obj({
        "numProcPerNode": int_or_string(rules=[NUM_PROC_RULE, NUM_PROC_MAX_RULE]),
        "elasticPolicy": elastic,
        "envInjection": obj({"targets": array(target, maxItems=16,
                                              **list_map("jobName"))}),
    })
    mpi = obj({
        "numProcPerNode": procs_per_node("NumProcPerNode in mpiPolicy must be >= 1"),
        "mpiImplementation": string(default=C.MPI_OPENMPI, enum=[C.MPI_OPENMPI, C.MPI_INTEL, C.MPI_MPICH, ""]),
        "sshAuthMountPath": string(default="/root/.ssh", maxLength=4096),
        "runLauncherAsNode": boolean(default=False),
    })
    flux = obj({"numProcPerNode": procs_per_node("NumProcPerNode in fluxPolicy must be >= 1")})
    return obj({
        "numNodes": num_nodes(),
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
            # the seed-era spelling (mapped to mode/highestTierAllowed by `seed_topology.py`, with a warning)
            "topologyKey": string(maxLength=317),
            "networkPolicy": string(enum=list(NETWORK_POLICY_MODES)),
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
        "command": array(string(maxLength=1048576), maxItems=128, **list_type("atomic")),
        "args": array(string(maxLength=1048576), maxItems=128, **list_type("atomic")),
        "env": env_list(),
        "numNodes": num_nodes(),
        "resourcesPerNode": resource_requirements(),
        "resourceClaimsPerNode": resource_claims_per_node(),
        "numProcPerNode": int_or_string(rules=[NUM_PROC_RULE, NUM_PROC_MAX_RULE]),
    }, rules=[IMMUTABLE, NO_RESOURCES_CLAIMS_RULE])


def _no_resources_claims(trainer: dict) -> bool:
    return not ((trainer.get("resourcesPerNode") or {}).get("claims"))


NO_RESOURCES_CLAIMS_RULE = Rule(
    "!has(self.resourcesPerNode) || !has(self.resourcesPerNode.claims) || size(self.resourcesPerNode.claims) == 0",
    "resourcesPerNode.claims is not used (v2.4, KEP-2782); request devices with resourceClaimsPerNode "
    "(name and resourceClaimTemplateName)", _no_resources_claims)


def resource_claims_per_node() -> dict:
    """KEP-2782: one claim per entry on each trainer pod, made from a ResourceClaimTemplate of the namespace."""
    claim = obj({
        "name": string(minLength=1, maxLength=63, pattern=DNS1123_LABEL.pattern),
        "resourceClaimTemplateName": string(minLength=1, maxLength=253),
    }, required=["name", "resourceClaimTemplateName"])
    return array(claim, maxItems=32, **list_map("name"))


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
                                                 **list_map("name"))}),
        })}),
    }, required=["manager"])


def pod_template_override() -> dict:
    """Seed-era (v2.1) per-job pod template override."""
    return obj({
        "targetJobs": array(obj({"name": string()}, required=["name"]), minItems=1),
        "metadata": template_metadata(),
        "spec": pod_spec_patch(False),
    }, required=["targetJobs"])


MANAGED_BY_VALUES = (K.MANAGED_BY_CONTROLLER, K.MANAGED_BY_MULTIKUEUE)


def trainjob_spec() -> dict:
    return obj({
        "runtimeRef": obj({
            "name": string(minLength=1, maxLength=253),
            "apiGroup": string(default=K.TRAINER_GROUP, maxLength=253),
            "kind": string(default=C.CLUSTER_TRAINING_RUNTIME_KIND, maxLength=253),
        }, required=["name"], rules=[IMMUTABLE]),
        "initializer": obj({"dataset": initializer_source(), "model": initializer_source()}, rules=[IMMUTABLE]),
        "trainer": trainer_spec(),
        "runtimePatches": array(runtime_patch(), maxItems=16,
                                **list_map("manager")),
        "labels": string_map(),
        "annotations": string_map(),
        "podTemplateOverrides": array(pod_template_override(), **list_type("atomic")),
        "suspend": boolean(default=False),
        "activeDeadlineSeconds": integer("int64", minimum=1, rules=[IMMUTABLE]),
        "managedBy": string(default=K.MANAGED_BY_CONTROLLER, maxLength=253, rules=[
            Rule(f"self in ['{K.MANAGED_BY_CONTROLLER}', '{K.MANAGED_BY_MULTIKUEUE}']",
                 f"ManagedBy must be {K.MANAGED_BY_CONTROLLER} or {K.MANAGED_BY_MULTIKUEUE} if set",
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
        "conditions": array(condition, maxItems=8, **list_map("type")),
        "jobsStatus": array(job_status, maxItems=100, **list_map("name")),
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
