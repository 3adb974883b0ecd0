"""The plugin registry: every policy the build, admission and reconcile know, in the one order they run.

Each phase (see `framework.PHASES`) runs over the whole registry in this order before the next phase
starts, so the order only matters between plugins sharing a phase:
- ML policies: torch and mpi before plainml (which steps aside for them), xgboost before flux (flux
  rewrites the trainer), trainjobstatus last of them;
- coscheduling and volcano before tenancy, whose build fills the Volcano PodGroup's queue;
- jobset last: its build reads the pod templates the others have finished with.

Adding a policy: write `plugins/<name>.py` with the phases it needs (same signatures as `PHASES`), add it
to `REGISTRY` below and to the typed table of each phase it defines: mypy (`make test`) checks every phase
against its protocol in `framework.py`, and `tests/unit/controller/test_plugin_registry.py` checks that the
tables list exactly the registered plugins that define the phase, in registry order.
Helper modules (`common`, `framework`, `gang`, `torchtune`) are not plugins.
"""

from . import coscheduling, flux, framework, jax, jobset, mpi, plainml, tenancy, torch, trainjobstatus, volcano, xgboost

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

# The registry per phase, typed: a phase whose signature drifts from its protocol fails the type check.
VALIDATES: tuple[framework.Validates, ...] = (torch, mpi, xgboost, flux)
ENFORCES_ML_POLICY: tuple[framework.EnforcesMLPolicy, ...] = (torch, mpi, plainml, jax, xgboost, flux, trainjobstatus)
ENFORCES_POD_GROUP_POLICY: tuple[framework.EnforcesPodGroupPolicy, ...] = (coscheduling, volcano, tenancy)
PRE_BUILDS: tuple[framework.PreBuilds, ...] = (jobset,)
BUILDS: tuple[framework.Builds, ...] = (mpi, flux, trainjobstatus, coscheduling, volcano, tenancy, jobset)
OWNS_OBJECTS: tuple[framework.OwnsObjects, ...] = (mpi, coscheduling, volcano, jobset)
BY_PHASE: dict[str, tuple] = {
    "validate": VALIDATES, "enforce_ml_policy": ENFORCES_ML_POLICY, "enforce_pod_group_policy": ENFORCES_POD_GROUP_POLICY,
    "pre_build": PRE_BUILDS, "build": BUILDS, "owned_objects": OWNS_OBJECTS,
}
