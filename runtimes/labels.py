"""Label and annotation keys the catalog reads or writes, with their allowed values."""

from trainyard import k8s as K
from trainyard.controller import constants as C

# Every key is defined once, in `trainyard.k8s`.
FRAMEWORK = K.LABEL_FRAMEWORK
"""Which framework a runtime trains with: torch, torchtune, deepspeed, mpi, jax, xgboost."""

ANCESTOR_STEP = K.LABEL_ANCESTOR
"""On ``replicatedJobs[].template.metadata.labels``: dataset-initializer, model-initializer or trainer."""

ANCESTOR_CONTAINERS = {
    C.DATASET_INITIALIZER: C.DATASET_INITIALIZER,
    C.MODEL_INITIALIZER: C.MODEL_INITIALIZER,
    C.ANCESTOR_TRAINER: C.NODE,
}
"""The container each ancestor job must contain (upstream runtime admission)."""

SUPPORT = K.LABEL_SUPPORT
"""``deprecated`` makes upstream-compatible webhooks warn on runtime and TrainJob creation."""

SUPPORT_DEPRECATED = K.SUPPORT_DEPRECATED

VOLCANO_QUEUE = K.VOLCANO_QUEUE_ANNOTATION
"""On the JobSet template metadata; the controller copies it into the Volcano PodGroup."""

VOLCANO_SCHEDULER = "volcano"

# trainyard keys.
CATALOG_VERSION = K.CATALOG_VERSION_LABEL
"""The catalog release a runtime was rendered from (on the runtime and on every JobSet it yields)."""

CATALOG_RUNTIME = K.CATALOG_RUNTIME_LABEL
"""The stable catalog name of the runtime (equal to metadata.name; survives renames of the object)."""

MPI_IMPLEMENTATION = K.MPI_IMPLEMENTATION_LABEL
"""On Hydra-based MPI runtimes (intel, mpich): the Trainer API only knows OpenMPI, so the flavour is recorded here."""
