"""Label and annotation keys the catalog reads or writes, with their allowed values."""

# Upstream (kubeflow/trainer pkg/constants) keys.
FRAMEWORK = "trainer.kubeflow.org/framework"
"""Which framework a runtime trains with: torch, torchtune, deepspeed, mpi, jax, xgboost."""

ANCESTOR_STEP = "trainer.kubeflow.org/trainjob-ancestor-step"
"""On ``replicatedJobs[].template.metadata.labels``: dataset-initializer, model-initializer or trainer."""

ANCESTOR_CONTAINERS = {
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
    "trainer": "node",
}
"""The container each ancestor job must contain (upstream runtime admission)."""

SUPPORT = "trainer.kubeflow.org/support"
"""``deprecated`` makes upstream-compatible webhooks warn on runtime and TrainJob creation."""

SUPPORT_DEPRECATED = "deprecated"

VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
"""On the JobSet template metadata; the controller copies it into the Volcano PodGroup."""

VOLCANO_SCHEDULER = "volcano"

# trainyard keys.
CATALOG_VERSION = "trainyard.dev/catalog-version"
"""The catalog release a runtime was rendered from (on the runtime and on every JobSet it yields)."""

CATALOG_RUNTIME = "trainyard.dev/catalog-runtime"
"""The stable catalog name of the runtime (equal to metadata.name; survives renames of the object)."""

MPI_IMPLEMENTATION = "trainyard.dev/mpi-implementation"
"""On Hydra-based MPI runtimes (intel, mpich): the Trainer API only knows OpenMPI, so the flavour is recorded here."""
