"""Names of upstream Kubeflow Trainer's controller (ports, env vars, suffixes, conditions).

API groups/versions and the labels and annotations other packages also use are defined once, in
`trainyard.k8s` (`K.TRAINER_GROUP`, `K.LABEL_ANCESTOR`, ...); nothing here renames them.
"""

from trainyard import k8s as _k8s

TRAINJOB_KIND = "TrainJob"
TRAINING_RUNTIME_KIND = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME_KIND = "ClusterTrainingRuntime"
RUNTIME_KINDS = (TRAINING_RUNTIME_KIND, CLUSTER_TRAINING_RUNTIME_KIND)

ANCESTOR_TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
NODE = "node"
LAUNCHER = "launcher"
MAX_REPLICATED_JOB_NAME = 20
"""Kubeflow Trainer v2.4 (kubeflow/trainer#4394) refuses runtimes whose replicatedJobs have longer names."""
INITIALIZER_VOLUME_MOUNT = "initializer"
ENV_STORAGE_URI = "STORAGE_URI"

SNAPSHOT_SUFFIX = "-runtime-snapshot"
SNAPSHOT_KEY = "runtime"

CONTAINER_TRAINER_PORT = 29500
JOB_COMPLETION_INDEX_FIELD = f"metadata.annotations['{_k8s.JOB_COMPLETION_INDEX_ANNOTATION}']"

TORCH_ENV_NUM_NODES = "PET_NNODES"
TORCH_ENV_NPROC = "PET_NPROC_PER_NODE"
TORCH_ENV_NODE_RANK = "PET_NODE_RANK"
TORCH_ENV_MASTER_ADDR = "PET_MASTER_ADDR"
TORCH_ENV_MASTER_PORT = "PET_MASTER_PORT"
TORCH_ENV_MAX_RESTARTS = "PET_MAX_RESTARTS"
TORCH_ENV_RDZV_BACKEND = "PET_RDZV_BACKEND"
TORCH_ENV_RDZV_ENDPOINT = "PET_RDZV_ENDPOINT"
TORCH_ENV_RDZV_ID = "PET_RDZV_ID"
TORCH_RESERVED_ENVS = (TORCH_ENV_NUM_NODES, TORCH_ENV_NPROC, TORCH_ENV_NODE_RANK, TORCH_ENV_MASTER_ADDR, TORCH_ENV_MASTER_PORT)
TORCH_ELASTIC_RESERVED_ENVS = (TORCH_ENV_MAX_RESTARTS, TORCH_ENV_RDZV_BACKEND, TORCH_ENV_RDZV_ENDPOINT, TORCH_ENV_RDZV_ID)
TORCHTUNE_ENTRYPOINT = ["tune", "run"]
TORCHTUNE_ARG_RDZV_ENDPOINT = "--rdzv_endpoint"
TORCHTUNE_ARG_CONFIG = "--config"
TORCHTUNE_FULL_SINGLE_DEVICE = "full_finetune_single_device"
TORCHTUNE_FULL_DISTRIBUTED = "full_finetune_distributed"
TORCHTUNE_LORA_SINGLE_DEVICE = "lora_finetune_single_device"
TORCHTUNE_LORA_DISTRIBUTED = "lora_finetune_distributed"
TORCHTUNE_SUFFIX_FULL_SINGLE_DEVICE = "_full_single_device"
TORCHTUNE_SUFFIX_FULL = "_full"
TORCHTUNE_SUFFIX_FULL_MULTINODE = "_full_multinode"
TORCHTUNE_SUFFIX_LORA_SINGLE_DEVICE = "_lora_single_device"
TORCHTUNE_SUFFIX_QLORA_SINGLE_DEVICE = "_qlora_single_device"
TORCHTUNE_SUFFIX_LORA = "_lora"
TORCHTUNE_SUFFIX_QLORA = "_qlora"
TORCHTUNE_LORA_ATTN_MODULES = "model.lora_attn_modules"
TORCHTUNE_QUANTIZE_BASE = "model.quantize_base"
TORCHTUNE_USE_DORA = "model.use_dora"
TORCHTUNE_MODEL_LLAMA3_2_1B = "llama3_2/1B"
TORCHTUNE_MODEL_LLAMA3_2_3B = "llama3_2/3B"
TORCHTUNE_MODEL_LLAMA3_3_70B = "llama3_3/70B"
TORCHTUNE_MODEL_QWEN2_5_1_5B = "qwen2_5/1.5B"
TORCHTUNE_SUPPORTED_MODELS = (TORCHTUNE_MODEL_LLAMA3_2_1B, TORCHTUNE_MODEL_LLAMA3_2_3B,
                              TORCHTUNE_MODEL_LLAMA3_3_70B, TORCHTUNE_MODEL_QWEN2_5_1_5B)
# Runtime-owned `key=value` configs: copied from the runtime's `tune run` command, refused in trainer.args.
TORCHTUNE_IMMUTABLE_CONFIGS = ("output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file")

MPI_SSH_SECRET_SUFFIX = "-mpi-ssh-auth"
MPI_SSH_VOLUME = "mpi-ssh-auth"
MPI_SSH_PRIVATE_KEY = "ssh-privatekey"
MPI_SSH_PUBLIC_KEY = "ssh-publickey"
MPI_HOSTFILE_SUFFIX = "-mpi-hostfile"
MPI_HOSTFILE_VOLUME = "mpi-hostfile"
MPI_HOSTFILE_DIR = "/etc/mpi"
MPI_HOSTFILE_NAME = "hostfile"
MPI_OPENMPI = "OpenMPI"
MPI_INTEL = "Intel"
MPI_MPICH = "MPICH"
OMPI_ENV_HOSTFILE = "OMPI_MCA_orte_default_hostfile"
OMPI_ENV_RSH_ARGS = "OMPI_MCA_plm_rsh_args"
OMPI_ENV_KEEP_FQDN = "OMPI_MCA_orte_keep_fqdn_hostnames"
OMPI_ENV_DEFAULT_SLOTS = "OMPI_MCA_orte_set_default_slots"
# Open MPI 5 replaced ORTE with PRTE and ignores the OMPI_MCA_orte_* names (Kubeflow Trainer v2.4,
# kubeflow/trainer#4029): the same settings under PRTE's names; Open MPI 4 ignores these.
PRTE_ENV_HOSTFILE = "PRTE_MCA_prte_default_hostfile"
PRTE_ENV_KEEP_FQDN = "PRTE_MCA_prte_keep_fqdn_hostnames"
PRTE_ENV_DEFAULT_SLOTS = "PRTE_MCA_prte_set_default_slots"
PRTE_ENV_SSH_ARGS = "PRTE_MCA_plm_ssh_args"
MPI_RSH_ARGS = "-o ConnectionAttempts=10"
INTEL_ENV_HOSTFILE = "I_MPI_HYDRA_HOST_FILE"
INTEL_ENV_BOOTSTRAP_ARGS = "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"
MPICH_ENV_HOSTFILE = "HYDRA_HOST_FILE"
MPICH_ENV_LAUNCH_ARGS = "HYDRA_LAUNCH_EXTRA_ARGS"
MPI_RESERVED_ENVS = (OMPI_ENV_HOSTFILE, OMPI_ENV_RSH_ARGS, OMPI_ENV_KEEP_FQDN, OMPI_ENV_DEFAULT_SLOTS,
                     PRTE_ENV_HOSTFILE, PRTE_ENV_KEEP_FQDN, PRTE_ENV_DEFAULT_SLOTS, PRTE_ENV_SSH_ARGS,
                     INTEL_ENV_HOSTFILE, INTEL_ENV_BOOTSTRAP_ARGS, MPICH_ENV_HOSTFILE, MPICH_ENV_LAUNCH_ARGS)
"""Upstream (v2.4) reserves the OpenMPI and PRTE names; the Intel and MPICH ones are trainyard's."""

XGBOOST_RESERVED_ENVS = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")

SYSTEM_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")

# Condition types / reasons on TrainJob.status.
COND_SUSPENDED = "Suspended"
COND_COMPLETE = "Complete"
COND_FAILED = "Failed"
REASON_SUSPENDED = "Suspended"
REASON_RESUMED = "Resumed"
REASON_RUNTIME_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
REASON_PODS_REFUSED = "PodsRefused"  # trainyard: the API server refuses the pods for good (pod_refusals.py)
CONTROLLER_FAILURE_REASONS = (REASON_DEADLINE_EXCEEDED, REASON_PODS_REFUSED)
MSG_SUSPENDED = "TrainJob is suspended"
MSG_RESUMED = "TrainJob is resumed"
MSG_DEADLINE_EXCEEDED = "TrainJob exceeded its active deadline"

# Condition (trainyard, not upstream) present only while the controller cannot create a TrainJob's
# resources; removed on the next successful reconcile so the SDK's "Running" detection (no conditions) holds.
COND_RESOURCES_CREATION_FAILED = "ResourcesCreationFailed"
REASON_APPLY_FAILED = "ApplyFailed"
REASON_BUILD_FAILED = "BuildFailed"
REASON_RUNTIME_NOT_FOUND = "RuntimeNotFound"
REASON_QUEUE_NOT_FOUND = "QueueNotFound"
REASON_QUOTA_EXCEEDED = "QuotaExceeded"
REASON_POD_NOT_ALLOWED = "PodNotAllowed"  # a tenant's pods ask what its policy forbids (tenant_namespace.pod_policy_errors)
EVENT_RESOURCES_CREATION_FAILED = "TrainJobResourcesCreationFailed"  # upstream's event reason
