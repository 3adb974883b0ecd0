"""Label and annotation keys the catalog reads or writes, with their allowed values."""

from trainyard.controller import constants as C

# Upstream (kubeflow/trainer) keys: the controller's constants are the one definition.
FRAMEWORK = C.LABEL_FRAMEWORK
"""Which framework a runtime trains with: torch, torchtune, deepspeed, mpi, jax, xgboost."""

ANCESTOR_STEP = C.LABEL_ANCESTOR
"""On ``replicatedJobs[].template.metadata.labels``: dataset-initializer, model-initializer or trainer."""

ANCESTOR_CONTAINERS = {
    C.DATASET_INITIALIZER: C.DATASET_INITIALIZER,
    C.MODEL_INITIALIZER: C.MODEL_INITIALIZER,
    C.ANCESTOR_TRAINER: C.NODE,
}
"""The container each ancestor job must contain (upstream runtime admission)."""

SUPPORT = C.LABEL_SUPPORT
"""``deprecated`` makes upstream-compatible webhooks warn on runtime and TrainJob creation."""

SUPPORT_DEPRECATED = C.SUPPORT_DEPRECATED

VOLCANO_QUEUE = C.VOLCANO_QUEUE_ANNOTATION
"""On the JobSet template metadata; the controller copies it into the Volcano PodGroup."""

VOLCANO_SCHEDULER = "volcano"

# trainyard keys.
CATALOG_VERSION = "trainyard.dev/catalog-version"
"""The catalog release a runtime was rendered from (on the runtime and on every JobSet it yields)."""

CATALOG_RUNTIME = "trainyard.dev/catalog-runtime"
"""The stable catalog name of the runtime (equal to metadata.name; survives renames of the object)."""

MPI_IMPLEMENTATION = "trainyard.dev/mpi-implementation"
"""On Hydra-based MPI runtimes (intel, mpich): the Trainer API only knows OpenMPI, so the flavour is recorded here."""
