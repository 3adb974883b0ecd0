"""The plugin registry: every policy the build, admission and reconcile know, in the one order they run.

Each phase (see `framework.PHASES`) runs over the whole registry in this order before the next phase
starts, so the order only matters between plugins sharing a phase:
- ML policies: torch and mpi before plainml (which steps aside for them), xgboost before flux (flux
  rewrites the trainer), trainjobstatus last of them;
- coscheduling and volcano before tenancy, whose build fills the Volcano PodGroup's queue;
- jobset last: its build reads the pod templates the others have finished with.

Adding a policy: write `plugins/<name>.py` with the phases it needs (same signatures as `PHASES`) and
add it to `REGISTRY` below; `tests/unit/controller/test_plugin_registry.py` checks the shape.
Helper modules (`common`, `framework`, `gang`, `torchtune`) are not plugins.
"""

from . import coscheduling, flux, jax, jobset, mpi, plainml, tenancy, torch, trainjobstatus, volcano, xgboost

REGISTRY = (
    torch,
    mpi,
    plainml,
    jax,
    xgboost,
    flux,
    trainjobstatus,
    coscheduling,
    volcano,
    tenancy,
    jobset,
)
