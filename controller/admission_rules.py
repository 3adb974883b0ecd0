"""The admission webhook's rules, declared: what each refuses (or warns about), the field it names and the fix.

The checks themselves stay where they run (`trainjob_validation`, `runtime_validation`, `tenant_namespace`,
`admission`, the plugins' `validate`); this table is what `docs/reference/admission.md` is generated from. A unit
test (`tests/unit/controller/test_admission_rules.py`) submits one bad object per rule to the webhook and checks
that it answers with the rule's field and a message containing `says`, and that every rule has such a sample,
so the table cannot drift from what the webhook does. The CRD schema's own CEL rules are read from the schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainyard import k8s as K

from . import constants as C

TRAINJOB = "TrainJob"
RUNTIME = "TrainingRuntime and ClusterTrainingRuntime"
UPSTREAM = "upstream"
TRAINYARD = "trainyard"
UPSTREAM_V2_4 = "upstream v2.4"
"""Kubeflow Trainer v2.4 behaviour; the live oracle (v2.3.0) admits it, the differential suite allows it by name."""


@dataclass(frozen=True)
class AdmissionRule:
    id: str
    kind: str
    """TRAINJOB or RUNTIME: what is submitted."""
    field: str
    """The field the webhook names; `*` stands for an index or a key."""
    refuses: str
    fix: str
    says: str
    """A part of the webhook's message for this rule (the unit test checks it is there)."""
    origin: str = UPSTREAM
    warning: bool = False
    """A warning: the object is admitted, and kubectl prints the message."""


_AT_CREATE = "; checked at create"

ADMISSION_RULES: tuple[AdmissionRule, ...] = (
    # ---- the referenced runtime
    AdmissionRule("runtime-kind", TRAINJOB, "spec.runtimeRef",
                  f"a runtimeRef other than kind TrainingRuntime or ClusterTrainingRuntime of {K.TRAINER_GROUP}",
                  f"set runtimeRef.kind to TrainingRuntime or ClusterTrainingRuntime and apiGroup {K.TRAINER_GROUP}",
                  "unsupported runtime"),
    AdmissionRule("runtime-missing", TRAINJOB, "spec.runtimeRef",
                  "a runtime that does not exist (a TrainingRuntime in the TrainJob's namespace, or a "
                  "ClusterTrainingRuntime)",
                  "name a runtime of `kubectl get trainingruntimes,clustertrainingruntimes`",
                  "must be created before the TrainJob is created"),
    AdmissionRule("initializer-job", TRAINJOB, "spec.runtimeRef",
                  "spec.initializer.dataset or .model when the runtime has no dataset-initializer / model-initializer "
                  "job", "drop the initializer, or use a runtime that has that job",
                  "job when trainJob is configured with input"),
    AdmissionRule("initializer-container", TRAINJOB, "spec.runtimeRef",
                  "an initializer whose runtime job has no container of the job's name",
                  "fix the runtime: name the container as its job", "must have container with name -"),
    AdmissionRule("initializer-volume", TRAINJOB, "spec.runtimeRef",
                  "an initializer whose container does not mount the `initializer` volume",
                  "fix the runtime: mount the volume `initializer` in that container", "must have volumeMount with name -"),
    # ---- runtimePatches and podTemplateOverrides
    AdmissionRule("patch-manager", TRAINJOB, "spec.runtimePatches[*].manager",
                  "a runtimePatches manager that is not a domain-prefixed path",
                  "name the manager like `example.com/my-tool`", "must be a domain-prefixed path"),
    AdmissionRule("patch-unknown-job", TRAINJOB, "spec.runtimePatches[*].trainingRuntimeSpec.template.spec.replicatedJobs[*]",
                  "a patch of a replicated job the runtime does not have",
                  "patch only the runtime's jobs (`kubectl get clustertrainingruntime NAME -o yaml`)",
                  "must not have replicated job that doesn't exist in the runtime job template"),
    AdmissionRule("patch-unknown-container", TRAINJOB,
                  "spec.runtimePatches[*].trainingRuntimeSpec.template.spec.replicatedJobs[*]",
                  "a patch of a container or init container the runtime job does not have",
                  "patch only the job's containers", "must not have container that doesn't exist in the runtime job"),
    AdmissionRule("patch-reserved-env", TRAINJOB,
                  "spec.runtimePatches[*].trainingRuntimeSpec.template.spec.replicatedJobs[*]",
                  "env set through a patch on the node, dataset-initializer or model-initializer container",
                  "set the trainer's env in spec.trainer.env", "must not have envs for the"),
    AdmissionRule("override-unknown-job", TRAINJOB, "spec.podTemplateOverrides",
                  "a podTemplateOverrides targetJob the runtime does not have", "target only the runtime's jobs",
                  "must not have targetJob that doesn't exist in the runtime job template"),
    AdmissionRule("reserved-ancestor-label", TRAINJOB, f"spec.labels[{K.LABEL_ANCESTOR}]",
                  "the ancestor label in spec.labels (it is the runtime's)", "remove the label",
                  "must not set the reserved label", TRAINYARD),
    AdmissionRule("patches-update-running", TRAINJOB, "spec.runtimePatches",
                  "a change of runtimePatches while the TrainJob is not suspended",
                  "suspend the TrainJob (`spec.suspend: true`) first",
                  "RuntimePatches can only be modified when the TrainJob is suspended"),
    AdmissionRule("patches-update-active", TRAINJOB, "spec.runtimePatches",
                  "a change of runtimePatches while a replicated job of its JobSet still has active pods",
                  "wait until its pods are gone after the suspend",
                  "RuntimePatches cannot be modified when the JobSet's ReplicatedJob"),
    AdmissionRule("overrides-update-running", TRAINJOB, "spec.podTemplateOverrides",
                  "a change of podTemplateOverrides while the TrainJob is not suspended",
                  "suspend the TrainJob first",
                  "PodTemplateOverrides can only be modified when the TrainJob is suspended"),
    # ---- Volcano queue and priority classes
    AdmissionRule("queue-empty", TRAINJOB, f"spec.annotations[{K.VOLCANO_QUEUE_ANNOTATION}]",
                  "an empty Volcano queue name", "name a queue or drop the annotation",
                  "Volcano queue name must not be empty"),
    AdmissionRule("queue-missing", TRAINJOB, f"spec.annotations[{K.VOLCANO_QUEUE_ANNOTATION}]",
                  "a Volcano queue that does not exist", "name an existing queue (`kubectl get queues`)",
                  "create it or pick an existing queue"),
    AdmissionRule("runtime-priority-class-missing", TRAINJOB, "spec.templateSpec.priorityClassName",
                  "a runtime whose pods name a PriorityClass that does not exist", "fix the runtime",
                  "doesn't exist: priorityclasses.scheduling.k8s.io"),
    # ---- tenant namespaces (trainyard)
    AdmissionRule("tenant-coscheduling", TRAINJOB, "spec.runtimeRef",
                  "in a tenant namespace, a runtime whose podGroupPolicy is coscheduling (it cannot honour the "
                  "tenant's Volcano queue)", "use a Volcano runtime of the catalog",
                  "podGroupPolicy is coscheduling", TRAINYARD),
    AdmissionRule("tenant-catalog-pin", TRAINJOB, "spec.runtimeRef",
                  "a ClusterTrainingRuntime from another catalog release than the namespace pins",
                  "use the TrainingRuntime of the same name in the namespace (the pinned release's copy), or ask "
                  "the platform team to move the tenant's catalogVersion", "pins runtime catalog", TRAINYARD),
    AdmissionRule("tenant-queue", TRAINJOB, f"spec.annotations[{K.VOLCANO_QUEUE_ANNOTATION}]",
                  "another Volcano queue than the tenant namespace's (also when a runtime or runtimePatches names it)"
                  + _AT_CREATE, "name no queue: the namespace's queue is used", "(the Volcano queue of namespace",
                  TRAINYARD),
    AdmissionRule("tenant-priority-class", TRAINJOB, f"metadata.labels[{K.PRIORITY_CLASS_LABEL}]",
                  "a priority class the tenant namespace was not granted" + _AT_CREATE,
                  "select one of the supported values the message lists", "was granted)", TRAINYARD),
    AdmissionRule("tenant-priority-class-missing", TRAINJOB, f"metadata.labels[{K.PRIORITY_CLASS_LABEL}]",
                  "a selected priority class that does not exist", "select an existing, granted class",
                  "doesn't exist", TRAINYARD),
    AdmissionRule("tenant-runtime-priority-class", TRAINJOB, "spec.runtimeRef",
                  "a runtime whose pods use a priority class the tenant was not granted (and no class selected)",
                  f"select a granted class with the label {K.PRIORITY_CLASS_LABEL}", "was not granted", TRAINYARD),
    AdmissionRule("tenant-service-account", TRAINJOB, "spec.runtimeRef",
                  "pods that run as a ServiceAccount other than `default` and the tenant's `serviceAccounts` "
                  "(the field is spec.runtimePatches or spec.podTemplateOverrides when the TrainJob has them)",
                  "remove serviceAccountName, or ask the platform team to list the account in the stack",
                  "pods may not run as ServiceAccount", TRAINYARD),
    AdmissionRule("tenant-toleration", TRAINJOB, "spec.runtimeRef",
                  f"pods that tolerate the platform's {K.RESERVATION_TAINT} taint, or every taint (an empty-key "
                  "Exists toleration)", "tolerate named taints only", "pods may not tolerate", TRAINYARD),
    AdmissionRule("tenant-grace-period", TRAINJOB, "spec.runtimeRef",
                  "pods whose terminationGracePeriodSeconds is above the tenant's "
                  "limits.maxTerminationGracePeriodSeconds", "ask for at most the limit, or ask the platform team to "
                  "raise it", "limit of", TRAINYARD),
    AdmissionRule("quota-never-fits", TRAINJOB, "spec.trainer.numNodes",
                  "a gang larger than a ResourceQuota of its namespace allows: it could never start" + _AT_CREATE,
                  "ask for fewer nodes or resources, or for a larger quota", "it can never start", TRAINYARD),
    AdmissionRule("pods-refused", TRAINJOB, "spec.runtimeRef",
                  "pods the API server would refuse (Pod Security, LimitRange, an unknown ServiceAccount, admission "
                  "policies): one pod per replicated job is dry-run created (field as for tenant-service-account)",
                  "the fix the message names", "the API server refuses the pods of", TRAINYARD),
    AdmissionRule("jobset-refused", TRAINJOB, "spec.labels",
                  "a TrainJob whose JobSet the API server would refuse (a label or annotation key that is no qualified "
                  "name); the field is spec.labels or spec.annotations, else as for tenant-service-account",
                  "a label or annotation key must be a qualified name such as example.com/team",
                  "the API server refuses the JobSet this TrainJob builds", TRAINYARD),
    AdmissionRule("platform-annotation", TRAINJOB, f"metadata.annotations[{K.RECLAIMED_FOR_ANNOTATION}]",
                  "a change of the annotation the platform's reclaim loop writes, by anyone but the controller",
                  "remove it; suspend a TrainJob with spec.suspend", "written by the platform's reclaim loop only",
                  TRAINYARD),
    # ---- ML policies (the plugins' validate phase)
    AdmissionRule("reserved-env", TRAINJOB, "spec.trainer.env",
                  "trainer env the torch or MPI policy sets itself (PET_*, OMPI_MCA_*, ...)",
                  "remove those variables", "must not have reserved envs"),
    AdmissionRule("xgboost-reserved-env", TRAINJOB, "spec.trainer.env[*]",
                  "trainer env the XGBoost policy sets itself (DMLC_*)", "remove those variables",
                  "is reserved for the XGBoost runtime"),
    AdmissionRule("torch-env-injection", TRAINJOB, "spec.runtimeRef",
                  "a torch runtime whose envInjection targets a job or container it does not have", "fix the runtime",
                  "not found in runtime template"),
    AdmissionRule("mpi-launcher-as-node", TRAINJOB, "spec.trainer.numNodes",
                  "numNodes >= 2 for an MPI runtime with runLauncherAsNode that lacks a launcher or a node job",
                  "use numNodes 1, or a runtime with both jobs",
                  "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode"),
    AdmissionRule("mpi-procs", TRAINJOB, "spec.trainer.numProcPerNode",
                  "a numProcPerNode other than an integer for an MPI runtime", "give an integer",
                  "must be an integer for MPI runtimes", TRAINYARD),
    AdmissionRule("flux-procs", TRAINJOB, "spec.trainer.numProcPerNode",
                  "numProcPerNode below 1 for a Flux runtime", "give 1 or more",
                  "must be greater than or equal to 1 for Flux TrainJob"),
    AdmissionRule("flux-installer", TRAINJOB, "spec.trainer.initContainers",
                  "a Flux runtime whose node job has its own init container `flux-installer`", "rename it",
                  "InitContainer 'flux-installer' is reserved"),
    AdmissionRule("torchtune-model", TRAINJOB, "spec.runtimeRef.name",
                  "a torchtune TrainJob (command `tune run`) on a runtime of an unsupported model",
                  "use one of the catalog's torchtune runtimes", "must have a supported pretrained model"),
    AdmissionRule("torchtune-nodes", TRAINJOB, "spec.trainer.numNodes",
                  "numNodes above 1 for a torchtune model other than Llama 3.3 70B", "use numNodes 1",
                  "must be 1 for"),
    AdmissionRule("torchtune-immutable-config", TRAINJOB, "spec.trainer.args[*]",
                  "trainer args that set a torchtune config the runtime manages", "drop that argument",
                  "must not set immutable config"),
    AdmissionRule("build-refused", TRAINJOB, "spec.*",
                  "anything the build itself refuses (a trial build runs when every other rule passed)",
                  "the fix the message names", "", TRAINYARD),
    # ---- warnings
    AdmissionRule("deprecated-runtime", TRAINJOB, "spec.runtimeRef",
                  "a ClusterTrainingRuntime of a deprecated catalog release", "move to the release the catalog names",
                  "is deprecated", warning=True),
    AdmissionRule("trainer-unreachable", TRAINJOB, "spec.trainer",
                  "spec.trainer on a runtime without a trainer job with a container named `node` (it is ignored)",
                  "fix the runtime", "spec.trainer is ignored", TRAINYARD, warning=True),
    # ---- runtimes
    AdmissionRule("ancestor-replicas", RUNTIME, "spec.template.spec.replicatedJobs[*].replicas",
                  "a trainer or initializer job (ancestor label) with replicas other than 1",
                  "set replicas 1 (numNodes scales the trainer)", "always must be 1"),
    AdmissionRule("replicated-job-name", RUNTIME, "spec.template.spec.replicatedJobs[*].name",
                  f"a replicatedJob name longer than {C.MAX_REPLICATED_JOB_NAME} characters (kubeflow/trainer#4394)",
                  "shorten the job's name", f"must be no more than {C.MAX_REPLICATED_JOB_NAME} characters",
                  UPSTREAM_V2_4),
    AdmissionRule("ancestor-container", RUNTIME, "spec.template.spec.replicatedJobs[*].template.spec.template.spec.containers",
                  "a trainer or initializer job without its container (`node`, `dataset-initializer`, "
                  "`model-initializer`)", "name the container after its role",
                  "must contain the required container for the ancestor"),
    AdmissionRule("topology-key", RUNTIME, "spec.podGroupPolicy.volcano.networkTopology.topologyKey",
                  "a seed-era topologyKey from which no HyperNode tier is built",
                  "use highestTierAllowed with one of the platform's tiers", "no HyperNode tier is built", TRAINYARD),
    AdmissionRule("deprecated-cluster-runtime", RUNTIME, "metadata.labels",
                  "creating a ClusterTrainingRuntime labelled deprecated", "use a supported release",
                  "is deprecated", warning=True),
    AdmissionRule("trainer-job-label", RUNTIME, "spec.template.spec.replicatedJobs[*].template.metadata.labels",
                  "a trainer job without the Job-level ancestor label (TrainJob trainer settings would not reach it)",
                  f"add {K.LABEL_ANCESTOR}: trainer to the Job template's labels", "has no Job-level label",
                  TRAINYARD, warning=True),
    AdmissionRule("trainer-node-container", RUNTIME, "spec.template.spec.replicatedJobs[*].template.spec.template.spec.containers",
                  "a trainer job without a container named `node`", "rename the training container to `node`",
                  'has no container named "node"', TRAINYARD, warning=True),
    AdmissionRule("seed-topology-spelling", RUNTIME, "spec.podGroupPolicy.volcano.networkTopology",
                  "the seed-era networkPolicy/topologyKey spelling (trainyard maps it)",
                  "spell it mode and highestTierAllowed", "is the seed-era spelling", TRAINYARD, warning=True),
)
